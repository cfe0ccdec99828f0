"""Compile what the bypass wrote: every edited native source and rewritten caller, with g++ -fsyntax-only.

The headers those files include are what the tree's torchgen generates from the edited yaml and
templates (`--generate headers`, no per-operator headers: the lab's build), so a dropped meta
struct or a misspelt `at::native::` call fails here, as it would in the tree's own build.
Include order: the regenerated headers, the tree's `aten/src` and root (its own headers,
`torch/csrc/...`), then the installed torch's include paths for what the tree lacks.

Files are compiled as scratch copies (so the check does not depend on what the tree holds) and
g++'s messages name the tree's paths. A file that includes a header neither the tree nor the
installed torch has cannot be checked: it is reported by name, never counted as compiled. So is an
edited template unless a compiled file included the header generated from it. A slim tree (a subset
of the yaml), whose regenerated headers cannot replace the installed torch's, is compiled in a full
tree built around it (overlay_compile.py).
Results are cached by the content hash of the file, the headers, the flags, the compiler and
torch version, and of each tree header the file included; two files compile at a time.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from codemod.capture import codegen, fromtorch
from codemod.model import cache, exact_text, native_yaml, progress
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, TEMPLATES, Tree
from codemod.plan.plan import FileChange
from codemod.verify import compiler, pch

SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")
JOBS = max(1, min(2, os.cpu_count() or 1))
# What PyTorch compiles libtorch_cpu's sources with: C++20 (the installed headers need it), the
# library's own export macro; AT_PER_OPERATOR_HEADERS stays undefined, so files include the
# monolithic Functions.h / NativeFunctions.h that the regenerated headers hold.
LANGUAGE_FLAGS = ("-std=c++20", "-DCAFFE2_BUILD_MAIN_LIB")
FLAGS = ("-fsyntax-only", *LANGUAGE_FLAGS, "-w", "-fdiagnostics-color=never")
# PyTorch compiles each kernel source under native/cpu/ once per CPU capability (REGISTER_DISPATCH is only
# defined then); DEFAULT is the capability every build has. The flags follow from the path, which the result key holds.
KERNEL_DIR = "aten/src/ATen/native/cpu/"
KERNEL_FLAGS = ("-DCPU_CAPABILITY=DEFAULT", "-DCPU_CAPABILITY_DEFAULT")
SHOWN_ERROR_LINES = 25

_MISSING_HEADER = re.compile(r"^(?P<where>[^:\n]+):(?P<line>\d+):\d+: fatal error: (?P<header>[^:\n]+): No such file or directory$", re.M)


@dataclass(frozen=True)
class Source:
    path: str  # relative to the tree
    text: bytes  # what to compile
    before: bytes | None = None  # the file before the bypass: its includes are the tree's, not ours


@dataclass(frozen=True)
class Headers:
    root: Path  # holds ATen/...: the first include directory
    digest: str
    from_cache: bool = False  # torchgen ran clean on the same inputs before and was not run again


@dataclass(frozen=True)
class NotCompiled:
    path: str
    why: str


@dataclass(frozen=True)
class CompileReport:
    compiled: tuple[str, ...]
    cached: tuple[str, ...]  # of compiled: the same inputs compiled clean before
    templates_compiled: tuple[str, ...]  # edited header templates whose generated header a compiled file included
    not_compiled: tuple[NotCompiled, ...]
    seconds: float
    against: str = "against the headers the tree's torchgen regenerated"  # where, and against what, they compiled

    def verified(self) -> list[str]:
        if not self.compiled:
            return []
        cached = f"; {len(self.cached)} of them compiled clean before from the same inputs, not recompiled" if self.cached else ""
        through = f", including the headers generated from the edited {', '.join(self.templates_compiled)}" if self.templates_compiled else ""
        return [
            f"g++ -fsyntax-only ({' '.join(LANGUAGE_FLAGS)}) compiles {', '.join(self.compiled)} {self.against}"
            f"{through} ({len(self.compiled)} files, {self.seconds:.1f} s{cached})"
        ]

    def unchecked(self) -> list[str]:
        by_reason: dict[str, list[str]] = {}
        for item in self.not_compiled:
            by_reason.setdefault(item.why, []).append(item.path)
        return [f"{', '.join(paths)}: {why}" for why, paths in by_reason.items()]


def sources_of(changes: Iterable[FileChange]) -> tuple[list[Source], list[str]]:
    """The plan's C++ sources to compile, and its edited templates (compiled only through what they generate)."""
    sources, templates = [], []
    for change in changes:
        if change.path.startswith(TEMPLATES + "/"):
            templates.append(change.path)
        elif change.path.endswith(SOURCE_SUFFIXES):
            sources.append(Source(change.path, change.after, change.before))
    return sources, templates


def regenerate_headers(tree: Tree, scratch: Path) -> Headers:
    """The tree's torchgen on its whole (edited) yaml, headers only, kept in the build cache by content."""
    out = scratch / "ATen"
    from_cache = codegen.aten(tree, tree.aten_source_dir, out, "--generate", "headers")
    digest = hashlib.sha256()
    for path in sorted(p for p in scratch.rglob("*") if p.is_file()):
        digest.update(path.relative_to(scratch).as_posix().encode() + b"\0" + path.read_bytes())
    kept = cache.cache_dir() / f"headers-{digest.hexdigest()[:20]}"
    if not kept.is_dir():  # published by one rename, as cache.cached_build does
        kept.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f"{kept.name}-", dir=kept.parent))
        shutil.copytree(scratch, staged, dirs_exist_ok=True)
        try:
            staged.rename(kept)
        except OSError:  # another run kept the same headers first
            shutil.rmtree(staged)
    return Headers(kept, digest.hexdigest(), from_cache)


def include_dirs(tree: Tree, headers: Headers) -> list[str]:
    dirs = [headers.root, tree.path("aten/src"), tree.root, *_installed_include_dirs()]
    return [f"-I{d}" for d in dirs]


def slim_tree(tree: Tree) -> str | None:
    """Why the tree's regenerated headers cannot stand in for the installed torch's generated ones, or None.

    The installed torch's hand-written headers (ivalue.h, ...) use generated functions of every operator;
    a tree with its own ATen headers is compiled against those instead.
    """
    if tree.path("aten/src/ATen/core/Tensor.h").is_file():
        return None
    installed_yaml = fromtorch.installed_torchgen() / "packaged" / NATIVE_FUNCTIONS.removeprefix("aten/src/")
    installed = set(native_yaml.load(NATIVE_FUNCTIONS, installed_yaml.read_text()).by_name())
    missing = installed - set(native_yaml.load(NATIVE_FUNCTIONS, exact_text.read(tree, NATIVE_FUNCTIONS)).by_name())
    if not missing:
        return None
    return (
        f"the tree's native_functions.yaml lacks {len(missing)} of the installed torch's {len(installed)} operators "
        f"({', '.join(sorted(missing)[:3])}, ...), which the installed headers use, so its regenerated headers cannot "
        f"replace theirs (a slim tree: its edited sources are compiled in a full tree built around them)"
    )


@functools.lru_cache(maxsize=1)
def _compiler_identity() -> str:
    if shutil.which(compiler.CXX) is None:
        raise BadInput(f"{compiler.CXX}: compiler not found (set CXX); verification compiles the edited sources")
    return subprocess.run([compiler.CXX, "--version"], capture_output=True, text=True).stdout


def result_key(*inputs: bytes | str) -> str:
    """The cache key of a compile result: INPUTS, the flags, the compiler and the installed torch."""
    return cache.digest(*inputs, "\0".join(FLAGS), _compiler_identity(), importlib.metadata.version("torch"))[:24]


def check(
    tree: Tree, headers: Headers, sources: list[Source], templates: Sequence[str] = (), against: str = CompileReport.against,
) -> CompileReport:
    """Compile SOURCES; raise VerificationFailed with every error at the tree's file:line. TEMPLATES (edited)
    count as compiled when a compiled file included a header of their name that the tree's torchgen generated.
    AGAINST says where they compiled, for the verified line."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="codemod-compile-") as scratch:
        with ThreadPoolExecutor(max_workers=JOBS) as pool:
            outcomes = list(pool.map(lambda source: _compile(tree, headers, source, Path(scratch)), sources))
    failures = [o.errors for o in outcomes if o.errors]
    if failures:
        raise VerificationFailed("the edited sources do not compile (g++ -fsyntax-only):\n" + "\n".join(failures))
    generated_read = {Path(name).name for o in outcomes for name in o.generated_read}
    templates_compiled = [t for t in templates if Path(t).name in generated_read]
    not_compiled = [o.missing for o in outcomes if o.missing is not None] + [
        NotCompiled(t, template_not_compiled(t)) for t in templates if t not in templates_compiled
    ]
    return CompileReport(
        compiled=tuple(o.source.path for o in outcomes if o.missing is None),
        cached=tuple(o.source.path for o in outcomes if o.cached),
        templates_compiled=tuple(templates_compiled),
        not_compiled=tuple(not_compiled),
        seconds=time.monotonic() - started,
        against=against,
    )


def template_not_compiled(template: str) -> str:
    if template.endswith(SOURCE_SUFFIXES):
        return "a template of a generated source, which this check does not build"
    return "no compiled file includes a header generated from it under its name"


@dataclass(frozen=True)
class _Outcome:
    source: Source
    cached: bool = False
    errors: str = ""
    missing: NotCompiled | None = None
    generated_read: tuple[str, ...] = ()  # regenerated headers it included, relative to their root


def _compile(tree: Tree, headers: Headers, source: Source, scratch: Path) -> _Outcome:
    kernel_flags = KERNEL_FLAGS if source.path.startswith(KERNEL_DIR) else ()
    flags = [*FLAGS, *kernel_flags, f"-iquote{tree.path(source.path).parent}", *include_dirs(tree, headers)]
    record = cache.cache_dir() / "syntax" / f"{result_key(source.path, source.text, headers.digest)}.json"
    clean = _clean_record(record, tree)
    if clean is not None:
        return _Outcome(source, cached=True, generated_read=tuple(clean["generated_headers"]))
    copy = scratch / source.path
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(source.text)
    deps = copy.with_suffix(".d")
    command = [compiler.CXX, *flags, *pch.for_source(compiler.CXX, copy, flags), "-MD", "-MF", str(deps), str(copy)]
    progress.command(command)
    result = subprocess.run(command, capture_output=True, text=True)
    output = result.stderr.replace(f"{scratch}/", "")  # scratch copies are named as the tree's files
    if result.returncode == 0:
        read = _dependencies(tree, headers, deps)
        _record_clean(record, read)
        return _Outcome(source, generated_read=tuple(read["generated_headers"]))
    missing = _missing_header(source, output)
    if missing is not None:
        return _Outcome(source, missing=missing)
    errors = [line for line in output.splitlines() if line.strip()]
    return _Outcome(source, errors=f"{source.path}:\n" + "\n".join(f"  {line}" for line in errors[:SHOWN_ERROR_LINES]))


def _missing_header(source: Source, output: str) -> NotCompiled | None:
    """A header nobody has, included by the tree's own code (an include the bypass added is its error)."""
    found = _MISSING_HEADER.search(output)
    if found is None:
        return None
    header, where = found["header"], found["where"]
    added_by_bypass = where == source.path and header.encode() not in (source.before or b"")
    if added_by_bypass:
        return None
    why = f"includes <{header}> ({where}:{found['line']}), which neither the tree nor the installed torch has"
    return NotCompiled(source.path, why)


def _dependencies(tree: Tree, headers: Headers, deps_file: Path) -> dict:
    """What a compile read (g++ -MD) besides the compiled file: the regenerated headers by name, the tree's
    headers by content hash, and the installed torch's by path (a tree header of that path would shadow it)."""
    text = deps_file.read_text().replace("\\\n", " ")
    paths = [Path(name) for name in text.split(":", 1)[1].split()[1:]]
    generated, tree_headers, installed = [], {}, []
    for path in paths:
        if path.is_relative_to(headers.root):
            generated.append(path.relative_to(headers.root).as_posix())
        elif path.is_relative_to(tree.root):
            tree_headers[tree.rel(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            # the deepest include directory holding it: the name it was included by
            installed += [path.relative_to(d).as_posix() for d in reversed(_installed_include_dirs()) if path.is_relative_to(d)][:1]
    return {"generated_headers": generated, "tree_headers": tree_headers, "installed_headers": installed}


def _installed_include_dirs() -> list[Path]:
    torch = compiler.torch_dir()
    return [torch / "include", torch / "include/torch/csrc/api/include"]


def _record_clean(record: Path, dependencies: dict) -> None:
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(json.dumps(dependencies))
    tmp.replace(record)


def _clean_record(record: Path, tree: Tree) -> dict | None:
    """The dependencies of a clean compile of the same inputs, if every tree header it read is unchanged
    and none now shadows an installed header it read; else None."""
    if not record.is_file():
        return None
    deps = json.loads(record.read_text())
    if "generated_headers" not in deps:  # written before this field
        return None
    for name, digest in deps["tree_headers"].items():
        path = tree.path(name)
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return None
    own_dirs = (tree.path("aten/src"), tree.root)
    shadowed = any((d / name).is_file() for name in deps["installed_headers"] for d in own_dirs)
    return None if shadowed else deps
