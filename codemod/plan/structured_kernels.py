"""Where the tree's native sources define structured kernels, as the compiler sees them.

A structured kernel is defined under `TORCH_META_FUNC(name)` / `TORCH_META_FUNC2(name, overload)`
(the meta struct `at::meta::structured_name[_overload]`, from NativeMetaFunctions.h) or
`TORCH_IMPL_FUNC(kernel)` (the native struct `at::native::structured_kernel`, from
NativeFunctions.h): either written out, or produced by the file's own macros
(`CREATE_UNARY_META_FUNC(sin)`, `##`-pasted names, macros calling macros), whose
invocation is then the definition's place. Code in dead branches (`#if 0`) and
comments defines nothing. `codemod ops` and `codemod bypass` both ask this module.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from codemod.model import cache, cpp_macros, cpp_syntax, paths
from codemod.model.errors import NotBypassable
from codemod.model.tree import NATIVE_SOURCES, Tree

META, IMPL = "meta", "impl"
_HEAD_MACROS = {
    "TORCH_META_FUNC": META, "TORCH_META_FUNC2": META,
    "TORCH_PRECOMPUTE_META_FUNC": META, "TORCH_PRECOMPUTE_META_FUNC2": META,
    "TORCH_IMPL_FUNC": IMPL,
}
_HEAD = re.compile(rf"\b(?P<macro>{'|'.join(_HEAD_MACROS)})\s*\(\s*(?P<name>\w+)\s*(?:,\s*(?P<overload>\w+)\s*)?\)")
_MAY_DEFINE = re.compile(rb"\bTORCH_(?:PRECOMPUTE_)?(?:META|IMPL)_FUNC")


@dataclass(frozen=True)
class KernelDefinition:
    kind: str  # META: defines at::meta::STRUCT::meta; IMPL: at::native::STRUCT::impl
    struct: str  # "structured_mul_Tensor"
    path: str  # tree-relative
    start: int  # byte offset of the definition, or of the macro invocation that expands to it
    end: int  # after the definition's body, or the invocation's closing parenthesis
    line: int  # 1-based line of START
    macro: str | None = None  # the file's own macro whose invocation defines it

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.struct

    def where(self) -> str:
        via = f" (through the file's macro {self.macro})" if self.macro else ""
        return f"{self.path}:{self.line}{via}"


def kernel_sources(tree: Tree) -> Iterator[Path]:
    """The native sources that mention a kernel-defining macro at all (a byte scan, so only those are parsed)."""
    for path in sorted(tree.path(NATIVE_SOURCES).rglob("*.cpp")):
        if paths.walked_file(path) and _MAY_DEFINE.search(path.read_bytes()):
            yield path


def find_definitions(tree: Tree) -> dict[tuple[str, str], list[KernelDefinition]]:
    """Every structured kernel definition of the tree's native sources, by (kind, struct)."""
    found: dict[tuple[str, str], list[KernelDefinition]] = {}
    for path in kernel_sources(tree):
        for definition in _kept_definitions_in(tree.rel(path), path.read_bytes()):
            found.setdefault(definition.key, []).append(definition)
    return found


def _kept_definitions_in(rel: str, data: bytes) -> list[KernelDefinition]:
    """definitions_in, kept in the build cache by the file's path and bytes, the parser and our code: a source is
    parsed and its macros expanded once, not by every `ops`, `explain` and `bypass`."""
    kept = cache.cache_dir() / "kernels" / f"{cache.digest(rel, data, *cpp_syntax.parser_versions(), cache.own_code())[:24]}.json"
    raw = cache.kept_json(kept, list[KernelDefinition])  # None: none, truncated or corrupt, parsed again
    if raw is not None:
        return [KernelDefinition(**fields) for fields in raw]
    found = definitions_in(rel, data)
    cache.publish_text(kept, json.dumps([asdict(definition) for definition in found]))
    return found


def locate(
    found: dict[tuple[str, str], list[KernelDefinition]], op: str, wanted: Sequence[tuple[str, str]],
) -> dict[tuple[str, str], list[KernelDefinition]]:
    """The definitions of the WANTED (kind, struct) keys, each in one file, the impls all in one file; in WANTED's order
    (torchgen's), which orders the structs a plan writes where one macro invocation defines several kernels.

    Raises NotBypassable otherwise: `ops` lists that reason, `bypass` refuses with it.
    """
    missing = sorted(f"at::{'meta' if kind == META else 'native'}::{name}" for kind, name in wanted if (kind, name) not in found)
    if missing:
        raise NotBypassable(
            f"no definition of {', '.join(missing)} (TORCH_META_FUNC/TORCH_IMPL_FUNC, written out or through the file's "
            f"own macros) under {NATIVE_SOURCES}; the structured kernel source of {op!r} is needed to bypass it",
            "kernel source not in the tree",
        )
    located = {key: found[key] for key in wanted}
    for (_, name), definitions in located.items():
        if len({d.path for d in definitions}) > 1:
            raise NotBypassable(
                f"{name} is defined in several files ({', '.join(d.where() for d in definitions)}); the tool handles one",
                "kernel defined in several files",
            )
    impl_files = sorted({d.path for (kind, _), defs in located.items() if kind == IMPL for d in defs})
    if len(impl_files) > 1:
        raise NotBypassable(
            f"the CPU kernels of {op!r} are defined in several files ({', '.join(impl_files)}); the tool handles one",
            "kernels in several files",
        )
    return located


def definitions_in(rel: str, data: bytes) -> list[KernelDefinition]:
    """The kernel definitions one file compiles, in file order."""
    src = cpp_syntax.parse(data)
    view = cpp_macros.live_view(src)
    found: list[KernelDefinition] = []
    expanded: list[tuple[int, int]] = []
    for invocation in cpp_macros.invocations(view, _kernel_macros(view)):
        expanded.append((invocation.start, invocation.end))
        for head in _HEAD.finditer(invocation.expansion):
            found.append(_definition(rel, data, head, invocation.start, invocation.end, invocation.macro))
    for head in _HEAD.finditer(view.text):
        if not any(start <= head.start() < end for start, end in expanded):
            found.append(_definition(rel, data, head, head.start(), cpp_macros.after_body(view.text, head.end()), None))
    return sorted(found, key=lambda d: (d.start, d.kind != META))


def _definition(rel: str, data: bytes, head: re.Match[str], start: int, end: int, macro: str | None) -> KernelDefinition:
    suffix = f"_{head['overload']}" if head["overload"] else ""
    line = data.count(b"\n", 0, start) + 1
    return KernelDefinition(_HEAD_MACROS[head["macro"]], f"structured_{head['name']}{suffix}", rel, start, end, line, macro)


def _kernel_macros(view: cpp_macros.LiveView) -> set[str]:
    """The file's macros whose expansion can hold a kernel head: directly, or through another of them."""
    bodies: dict[str, set[str]] = {}
    for _, name, macro in view.events:
        if macro is not None:
            bodies.setdefault(name, set()).update(t.text for t in macro.body)
    kernel = {name for name, words in bodies.items() if words & _HEAD_MACROS.keys()}
    while True:
        more = {name for name, words in bodies.items() if words & kernel} - kernel
        if not more:
            return kernel
        kernel |= more
