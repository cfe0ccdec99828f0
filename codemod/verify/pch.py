"""Precompiled headers: g++ parses a set of headers once; each compile that force-includes it (-include) loads it.

A PCH is kept in the build cache under the key of the compiler, the flags it is built with (include directories
aside) and every header it holds, each by path and content as `g++ -M` resolves it under the compile's own include
directories: a header that changed, or that another include directory now shadows, gives another key, so a stale
PCH is never found. It is made once per key, under the entry's lock (threads and processes asking meanwhile wait
for it), and held (its lock shared) while a compile loads it. g++ itself refuses a PCH built with other flags
(-Winvalid-pch), which a compile with warnings on turns into an error (-Werror=invalid-pch); since the compile check
runs with -w, which silences that, each PCH is also tried once, warnings on, when it is made. A PCH g++ would not
use is an error, never a silent fallback.

Whether a source may load a PCH is one check (`reads_the_same`): g++'s preprocessor output for the source alone and
with the PCH's header force-included, grouped by the file each line comes from, reads the same files, each with the
same lines (number and text; the system headers' lines taken together). The PCH then changes only the order in which
the source reads what it reads anyway: the same headers, each seen with the same macros.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from codemod.model import cache, progress
from codemod.model.errors import BadInput, VerificationFailed

# Not part of the key: where headers are looked up decides only which files are read, and the key holds those.
_INCLUDE_DIR_OPTIONS = ("-I", "-iquote", "-isystem", "-idirafter")
# Flags that say what to produce or where to write dependencies, not how to read the source.
_OUTPUT_OPTIONS = ("-c", "-fsyntax-only", "-E", "-MD", "-MMD")
_OPTIONS_WITH_PATH = ("-MF", "-MT", "-MQ", "-o")
# With the -include of a PCH's header (g++ looks for NAME.gch beside it first): a refused PCH is an error. -fpch-deps
# asks the dependency file (-MD) to list the headers the PCH holds, which g++ 12 does not do: a caller that records
# what a compile read adds them (files_read of the PCH's header).
USE_FLAGS = ("-Winvalid-pch", "-Werror=invalid-pch", "-fpch-deps")
# The preprocessor's line markers: `# LINE "FILE" FLAGS`, before the lines that come from FILE from LINE on.
LINE_MARKER = re.compile(r'^# (?P<line>\d+) "(?P<file>(?:\\.|[^"\\])*)"(?P<flags>[ \d]*)$')
# What a PCH's own header may leave in the preprocessed text (ATen_pch.h saves and restores a macro around its
# includes): nothing that declares anything.
_MACRO_PRAGMA = re.compile(r"^#pragma (?:push|pop)_macro\(")


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


def _entry(pch_key: str) -> str:
    return f"pch-{pch_key}"


def kept(header: Path, pch_key: str) -> bool:
    """Whether the build cache holds HEADER precompiled under PCH_KEY (key)."""
    return (cache.cache_dir() / _entry(pch_key) / f"{header.name}.gch").is_file()


def any_kept(header: Path) -> bool:
    """Whether the build cache holds HEADER precompiled under any key."""
    return any(cache.cache_dir().glob(f"pch-*/{header.name}.gch"))


@contextlib.contextmanager
def loaded(cxx: str, header: Path, flags: Sequence[str], pch_key: str | None = None, bound: int | None = None) -> Iterator[list[str]]:
    """What to add to a compile with FLAGS to load HEADER precompiled, for the block that runs it: an -include of the
    cached copy of HEADER, beside its .gch, and USE_FLAGS. Made once per key (PCH_KEY, when the caller computed it),
    under the entry's lock, so that a thread or process asking for it meanwhile waits and finds it; held while the
    block runs, so that no eviction removes it meanwhile. BOUND: when one is made, keep at most that many PCHs of
    HEADER's name, evicting the least recently used."""
    entry = _entry(pch_key or key(cxx, header, flags))
    make = functools.partial(_make, cxx, header, flags)
    with cache.using(entry, f"{header.name}.gch", make) as (found, was_kept):
        if not was_kept:
            _evict_beyond(header, bound)
        yield ["-include", str(found / header.name), *USE_FLAGS]


@contextlib.contextmanager
def loaded_when_asked_again(cxx: str, header: Path, flags: Sequence[str]) -> Iterator[list[str]]:
    """`loaded`, for a PCH that costs more to make than a compile saves: the first compile that asks for it in a build
    cache loads nothing and leaves a note there (ENTRY.wanted); the next one makes it."""
    pch_key = key(cxx, header, flags)
    note = cache.cache_dir() / f"{_entry(pch_key)}.wanted"
    if kept(header, pch_key) or note.is_file():
        with loaded(cxx, header, flags, pch_key) as loading:
            yield loading
        return
    note.parent.mkdir(parents=True, exist_ok=True)
    note.touch()
    yield []


def _evict_beyond(header: Path, bound: int | None) -> None:
    if bound is not None:
        cache.evict([held.parent for held in cache.cache_dir().glob(f"pch-*/{header.name}.gch")], bound)


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


@dataclass(frozen=True)
class Preprocessed:
    """g++'s preprocessor output, by the file each line comes from."""

    lines: dict[str, list[tuple[int, str]]]  # each file's non-blank lines, (line, text): every file entered, by path
    system: frozenset[str]  # of those, the system headers (line marker flag 3)


def parse(text: str) -> Preprocessed:
    """Preprocessed TEXT by file (paths as g++ spelled them, normalised)."""
    lines: dict[str, list[tuple[int, str]]] = {}
    system = set()
    current: list[tuple[int, str]] = []
    line = 0
    for text_line in text.splitlines():
        marker = LINE_MARKER.match(text_line) if text_line.startswith("# ") else None
        if marker is not None:
            name = os.path.normpath(marker["file"])
            current, line = lines.setdefault(name, []), int(marker["line"])
            if "3" in marker["flags"].split():
                system.add(name)
            continue
        if text_line.strip():
            current.append((line, text_line))
        line += 1
    return Preprocessed(lines, frozenset(system))


# The system headers' lines, taken together: glibc's headers share typedefs (pid_t in sys/types.h and sched.h, under
# one __pid_t_defined), so which of them yields one depends on which is read first, which a PCH changes.
SYSTEM_HEADERS = "<system headers>"


def preprocessed(
    cxx: str, source: Path, flags: Sequence[str], header: Path | None = None, deps: Path | None = None,
    paths: Callable[[str], str] = str,
) -> dict[str, str] | None:
    """What reads_the_same compares of g++'s preprocessor output on SOURCE with FLAGS (and HEADER force-included):
    each file read (PATHS: how to name it, from its path) and the digest of its lines (number and text, as a
    multiset: a PCH reorders files, so a header included twice may come in another order), the system headers' lines
    as one multiset of texts (SYSTEM_HEADERS); HEADER's own lines left out when they only save and restore macros.
    None when the preprocessor fails (an #error, a missing header: the compile says why). DEPS: where to write what
    it read (g++ -MD)."""
    command = [
        cxx, *language_flags(flags), "-E", *(["-include", str(header)] if header else []),
        *(["-MD", "-MF", str(deps)] if deps else []), str(source),
    ]
    progress.command(command)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return None
    found = parse(result.stdout)
    if header is not None and all(_MACRO_PRAGMA.match(text) for _, text in found.lines.get(os.path.normpath(header), [])):
        found.lines.pop(os.path.normpath(header), None)
    digests = {paths(name): "" if name in found.system else _multiset(lines) for name, lines in found.lines.items()}
    digests[SYSTEM_HEADERS] = _multiset([(0, text) for name in found.system for _, text in found.lines.get(name, [])])
    return digests


def _multiset(lines: list[tuple[int, str]]) -> str:
    return hashlib.sha256("\n".join(f"{number} {text}" for number, text in sorted(lines)).encode()).hexdigest()


def reads_the_same(alone: dict[str, str] | None, with_header: dict[str, str] | None) -> bool:
    """Whether a source reads the same files, each with the same lines, with a header force-included as without it
    (preprocessed's of each): then loading that header precompiled changes only the order it reads them in. Not when
    the preprocessor failed."""
    return alone is not None and alone == with_header


_INCLUDE = re.compile(r"^#include <(?P<name>[^>]+)>$", re.MULTILINE)


def unread_includes_removed(text: str, read: Iterable[str]) -> str:
    """TEXT less its `#include <NAME>` lines of the headers not among READ (the paths of the files a source reads)."""
    rooted = tuple("/" + path for path in read)  # a tree's file is named relative to the tree
    return _INCLUDE.sub(lambda line: line[0] if any(path.endswith("/" + line["name"]) for path in rooted) else "", text)
