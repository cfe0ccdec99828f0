"""Link the objects verification compiled, as a build links them into libtorch: no symbol left undefined.

A build links the edited sources and the op's generated code with every other object of libtorch. The check links
the objects into one shared library against the installed libtorch (`-Wl,--no-undefined`), and a symbol the linker
cannot find counts only when no object of the installed libraries defines it either, hidden ones included (their
full symbol tables: a build links those objects in too), and none of them expects it from elsewhere (the Python API
libtorch_python takes from the interpreter). What the bypass removed does not count as defined, though the installed
libtorch still defines it: a reference to a removed `at::cpu::` or `at::redispatch::` function is undefined. A
hand-written definition whose parameters drifted from the regenerated declaration is such a symbol: declared, called
by the generated registrations, defined nowhere.

The verdict is kept in the build cache by the objects' content hashes, the compiler and the installed torch: a warm
run links nothing.
"""
from __future__ import annotations

import functools
import importlib.metadata
import json
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from codemod.model import cache, progress
from codemod.verify import compiler

# The libraries of the installed torch whose objects a build of the tree links the checked objects with.
LIBRARIES = ("libtorch_cpu.so", "libtorch.so", "libc10.so", "libtorch_python.so")
_UNDEFINED = re.compile(r"undefined reference to `(?P<symbol>[^']+)'")


@dataclass(frozen=True)
class Unresolved:
    symbol: str  # demangled
    mangled: str
    referenced_by: tuple[str, ...]  # tree paths of the objects that reference it
    removed: bool  # a function the bypass removed, which the installed libtorch still defines


def unresolved(objects: Mapping[str, Path], removed: frozenset[str]) -> list[Unresolved]:
    """The symbols OBJECTS (by tree path) reference that neither they nor the installed libraries define, and those
    naming a function of REMOVED (at::cpu:: and at::redispatch:: names) that they do not define."""
    record = cache.cache_dir() / "link" / f"{_key(objects, removed)}.json"
    kept = cache.kept_json(record, list[dict[str, object]])
    if kept is not None and all(set(row) == {"symbol", "mangled", "referenced_by", "removed"} for row in kept):
        return [Unresolved(row["symbol"], row["mangled"], tuple(row["referenced_by"]), row["removed"]) for row in kept]
    found = _unresolved(objects, removed)
    cache.publish_text(record, json.dumps([{**row.__dict__, "referenced_by": list(row.referenced_by)} for row in found]))
    return found


def _key(objects: Mapping[str, Path], removed: frozenset[str]) -> str:
    parts = [part for path, obj in sorted(objects.items()) for part in (path, cache.file_digest(obj))]
    return cache.digest(*parts, *sorted(removed), compiler.CXX, importlib.metadata.version("torch"))[:24]


def _unresolved(objects: Mapping[str, Path], removed: frozenset[str]) -> list[Unresolved]:
    lib = compiler.torch_dir() / "lib"
    with tempfile.TemporaryDirectory(prefix="codemod-link-") as scratch:
        command = [
            compiler.CXX, "-shared", "-o", str(Path(scratch, "linked.so")), *map(str, objects.values()),
            f"-L{lib}", *(f"-l{name.removeprefix('lib').removesuffix('.so')}" for name in LIBRARIES),
            "-Wl,--no-undefined", "-Wl,--no-demangle",
        ]
        progress.command(command)
        result = subprocess.run(command, capture_output=True, text=True)
    missing = {m["symbol"] for m in _UNDEFINED.finditer(result.stderr)} - _provided_by_torch(lib)
    references = {path: undefined(obj) for path, obj in objects.items()}
    defined = set().union(*(_symbols(obj, "--defined-only") for obj in objects.values()))
    referenced = sorted(set().union(*references.values()) - defined - missing)
    names = _demangled([*sorted(missing), *referenced])
    found = [(symbol, False) for symbol in sorted(missing)]
    found += [(symbol, True) for symbol in referenced if _names_removed(names[symbol], removed)]
    return [
        Unresolved(names[symbol], symbol, tuple(path for path, syms in references.items() if symbol in syms), was_removed)
        for symbol, was_removed in found
    ]


@functools.cache
def _provided_by_torch(lib: Path) -> frozenset[str]:
    """Every symbol the installed libraries define (hidden ones too) or take from elsewhere at load time."""
    symbols: set[str] = set()
    for name in LIBRARIES:
        if (lib / name).is_file():
            symbols |= _symbols(lib / name, "--defined-only") | _symbols(lib / name, "--undefined-only")
    return frozenset(symbols)


def undefined(obj: Path) -> set[str]:
    """The symbols OBJ references and does not define, mangled."""
    return _symbols(obj, "--undefined-only")


def _symbols(path: Path, which: str) -> set[str]:
    """PATH's symbols (nm WHICH), mangled."""
    result = subprocess.run(["nm", which, "--format=posix", str(path)], capture_output=True, text=True)
    return {line.split(" ", 1)[0] for line in result.stdout.splitlines() if line}


def _demangled(symbols: list[str]) -> dict[str, str]:
    result = subprocess.run(["c++filt"], input="\n".join(symbols), capture_output=True, text=True)
    names = result.stdout.splitlines()
    return dict(zip(symbols, names)) if len(names) == len(symbols) else {symbol: symbol for symbol in symbols}


def _names_removed(demangled: str, removed: frozenset[str]) -> bool:
    return any(demangled.startswith(f"at::{space}::{name}(") for space in ("cpu", "redispatch") for name in removed)
