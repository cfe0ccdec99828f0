"""Precompiled headers: g++ parses a set of headers once; each compile that force-includes it (-include) loads it.

A PCH is kept in the build cache under the key of the compiler, the flags it is built with (include directories
aside) and every header it holds, each by path and content as `g++ -M` resolves it under the compile's own include
directories: a header that changed, or that another include directory now shadows, gives another key, so a stale
PCH is never found. g++ itself refuses a PCH built with other flags (-Winvalid-pch), which a compile with warnings
on turns into an error (-Werror=invalid-pch); since the compile check runs with -w, which silences that, each PCH
is also tried once, warnings on, when it is made. A PCH g++ would not use is an error, never a silent fallback.
"""
from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from codemod.model import cache, progress
from codemod.model.errors import BadInput, VerificationFailed

# Not part of the key: where headers are looked up decides only which files are read, and the key holds those.
_INCLUDE_DIR_OPTIONS = ("-I", "-iquote", "-isystem", "-idirafter")
# Flags that say what to produce or where to write dependencies, not how to read the source.
_OUTPUT_OPTIONS = ("-c", "-fsyntax-only", "-MD", "-MMD")
_OPTIONS_WITH_PATH = ("-MF", "-MT", "-MQ", "-o")
# With the -include of a PCH's header (g++ looks for NAME.gch beside it first): a refused PCH is an error, and a
# dependency file (-MD) still lists every header the PCH holds.
USE_FLAGS = ("-Winvalid-pch", "-Werror=invalid-pch", "-fpch-deps")


@functools.lru_cache(maxsize=1)
def compiler_identity(cxx: str) -> str:
    if shutil.which(cxx) is None:
        raise BadInput(f"{cxx}: compiler not found (set CXX)")
    return subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout


def language_flags(flags: Sequence[str]) -> list[str]:
    """FLAGS without what they write (outputs, dependency files) and without the compiled file's language (`-x c++`
    for a header compiled as a unit: a PCH is built as c++-header): the flags a PCH is built with."""
    return _without(flags, (*_OPTIONS_WITH_PATH, "-x"), _OUTPUT_OPTIONS)


def _without(flags: Sequence[str], with_value: tuple[str, ...], alone: tuple[str, ...] = ()) -> list[str]:
    """FLAGS less the options ALONE, and less the options WITH_VALUE and their value (the next flag, or joined)."""
    kept: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
        elif flag in with_value:
            skip = True
        elif flag not in alone and not flag.startswith(with_value):
            kept.append(flag)
    return kept


@functools.lru_cache(maxsize=64)
def files_read(cxx: str, path: Path, flags: tuple[str, ...], as_header: bool = False) -> tuple[Path, ...]:
    """Every file g++ reads for PATH under FLAGS (their include directories decide which), PATH first (g++ -M)."""
    command = [cxx, *language_flags(flags), "-M", *(["-x", "c++-header"] if as_header else []), str(path)]
    progress.command(command)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        said = result.stderr.strip()[-2000:]
        raise VerificationFailed(f"{cxx} cannot read the includes of {path.name} (exit {result.returncode})" + (f":\n{said}" if said else ""))
    return tuple(Path(name) for name in result.stdout.replace("\\\n", " ").split(":", 1)[1].split())


def key(cxx: str, header: Path, flags: Sequence[str]) -> str:
    """The compiler, the flags but include directories, HEADER, and every header it reads, by path and content."""
    parts: list[bytes | str] = [compiler_identity(cxx), "\0".join(_without(language_flags(flags), _INCLUDE_DIR_OPTIONS))]
    parts += [header.name, header.read_bytes()]  # by name: a header written to a scratch directory keys alike
    for path in files_read(cxx, header, tuple(flags), as_header=True)[1:]:
        parts += [str(path), hashlib.sha256(path.read_bytes()).digest()]
    return cache.digest(*parts)[:20]


def flags_for(cxx: str, header: Path, flags: Sequence[str]) -> list[str]:
    """What to add to a compile with FLAGS to load HEADER precompiled (made once, when the cache has no PCH of this
    key): an -include of the cached copy of HEADER, beside its .gch, and USE_FLAGS."""
    entry, _ = cache.cached_build(f"pch-{key(cxx, header, flags)}", f"{header.name}.gch", lambda scratch: _make(cxx, header, flags, scratch))
    return ["-include", str(entry / header.name), *USE_FLAGS]


def _make(cxx: str, header: Path, flags: Sequence[str], scratch: Path) -> None:
    copy = scratch / header.name
    shutil.copyfile(header, copy)
    built = language_flags(flags)
    command = [cxx, *built, "-x", "c++-header", str(copy), "-o", f"{copy}.gch"]
    with progress.step(f"precompile {header.name} (once for these headers, flags and compiler)"):
        progress.command(command)
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise VerificationFailed(f"precompiling {header} failed ({cxx} exit {result.returncode}):\n{result.stderr.strip()[-2000:]}")
        _require_usable(cxx, copy, built)


def _require_usable(cxx: str, copy: Path, flags: list[str]) -> None:
    """Compile nothing with the PCH, warnings on (-w would hide g++'s refusal): refused, it is an error here."""
    warnings_on = [flag for flag in flags if flag != "-w"]
    with tempfile.NamedTemporaryFile(suffix=".cpp") as empty:
        command = [cxx, *warnings_on, "-fsyntax-only", "-include", str(copy), *USE_FLAGS[:2], empty.name]
        result = subprocess.run(command, capture_output=True, text=True)
    refused = [line for line in result.stderr.splitlines() if "invalid-pch" in line or ".gch" in line]
    if result.returncode != 0 or refused:
        raise VerificationFailed(f"{cxx} does not use the precompiled {copy.name} it just made:\n" + "\n".join(refused or [result.stderr.strip()]))


# What PyTorch's own build force-includes into every libtorch source with USE_PRECOMPILED_HEADERS: c10 and the
# ATen headers that include no generated file (it defines TORCH_ASSERT_NO_OPERATORS to keep it so), so no bypass
# changes it.
ATEN_PCH = "ATen/core/ATen_pch.h"
_INCLUDE = re.compile(r"^#include <(?P<name>[^>]+)>$", re.MULTILINE)


def for_source(cxx: str, source: Path, flags: Sequence[str]) -> list[str]:
    """The flags that load ATen_pch.h precompiled into a compile of SOURCE with FLAGS, less its includes SOURCE
    does not read: the PCH holds only headers SOURCE reads anyway (checked with g++ -M), so it changes only the
    order they are read in. None where the include directories hold no ATen_pch.h or g++ cannot read SOURCE's
    includes (the compile itself then says why)."""
    header = next((found for found in (Path(d) / ATEN_PCH for d in include_dirs(flags)) if found.is_file()), None)
    if header is None:
        return []
    try:
        read = set(files_read(cxx, source, tuple(flags)))
    except VerificationFailed:
        return []
    text = _INCLUDE.sub(lambda line: line[0] if _reads(read, line["name"]) else "", header.read_text())
    with tempfile.TemporaryDirectory(prefix="codemod-pch-") as scratch:
        subset = Path(scratch, header.name)
        subset.write_text(text)
        held = set(files_read(cxx, subset, tuple(flags), as_header=True)[1:])
        return flags_for(cxx, subset, flags) if held <= read else []


def _reads(read: set[Path], name: str) -> bool:
    return any(path.as_posix().endswith("/" + name) for path in read)


def include_dirs(flags: Sequence[str]) -> list[str]:
    """The -I and -isystem directories of FLAGS, in the order g++ searches them for <...>."""
    found, system = [], []
    for flag, following in zip(flags, [*flags[1:], ""]):
        if flag.startswith("-I"):
            found.append(flag[2:] or following)
        elif flag.startswith("-isystem"):
            system.append(flag[len("-isystem"):] or following)
    return found + system
