"""The build cache every compile publishes into: entries keyed by a content digest, published by one rename.

`$CODEMOD_BUILD_CACHE`, else `cpp_ext/build/` of the checkout codemod runs from. Entries are never edited in
place, so concurrent codemod processes (and several checkouts pointed at one cache) share it safely. An entry is
made under its lock (a file lock beside it, `.ENTRY.lock`), so threads and processes asking for the same entry
make it once: the others wait and find it. A directory entry holds ENTRY_STAMP, what it was made under
(cache_entries.py reads it to prune what another install left). A kind of entry that is large and rarely used twice
(the precompiled generated headers) is bounded: its least recently used entries are evicted, each unless in use
(`using` holds its lock shared, which eviction does not wait for).
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from codemod.model import json_file

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "codemod"
ENTRY_STAMP = ".codemod-entry.json"


def cache_dir() -> Path:
    return Path(os.environ.get("CODEMOD_BUILD_CACHE") or REPO / "cpp_ext" / "build")  # set but empty: the default, not "."



def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()



@functools.cache
def installed_version(distribution: str) -> str:
    """The installed DISTRIBUTION's version, for the keys of what it computes."""
    from importlib.metadata import version  # tens of ms to import: only the commands that key such a result pay for it

    return version(distribution)


@functools.cache
def own_code() -> str:
    """The digest of codemod's own code, every file of the package (about 10 ms): what is kept by the key of the
    inputs it was computed from holds it among them, since which of our modules take part changes with the code."""
    files = sorted(p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return digest(*(part for p in files for part in (p.relative_to(PACKAGE).as_posix(), p.read_bytes())))


def cached_build(entry: str, product: str, make: Callable[[Path], None]) -> tuple[Path, bool]:
    """CACHE/ENTRY, holding PRODUCT, and whether it was there already. MAKE fills a scratch directory
    beside it (hidden: a dot name), published by one rename, so a half-made entry is never seen; under the entry's
    lock, so a thread or process asking meanwhile waits for it rather than making it again."""
    out_dir = cache_dir() / entry
    if (out_dir / product).is_file():
        return out_dir, True
    with _locked(entry, fcntl.LOCK_EX):
        if (out_dir / product).is_file():  # made while this one waited
            return out_dir, True
        with tempfile.TemporaryDirectory(prefix=f".{entry}-", dir=cache_dir(), ignore_cleanup_errors=True) as scratch:
            make(Path(scratch))
            Path(scratch, ENTRY_STAMP).write_text(json.dumps(made_under()))  # published with the entry, by the same rename
            try:
                Path(scratch).rename(out_dir)
            except OSError:  # published first by a codemod that takes no lock
                if not (out_dir / product).is_file():
                    raise
    return out_dir, False


def made_under() -> dict[str, str | None]:
    """What an entry made now depends on that another install may not have: torch's version (None: not installed)
    and Python's."""
    from importlib.metadata import PackageNotFoundError

    try:
        torch = installed_version("torch")
    except PackageNotFoundError:
        torch = None
    return {"torch": torch, "python": sys.version.split()[0]}


def file_digest(path: Path | str) -> str:
    """PATH's content hash, computed once per process while its inode, size and times stay the same (a run reads the
    same headers and outputs many times)."""
    return stat_digest(path, os.stat(path))


def stat_digest(path: Path | str, info: os.stat_result) -> str:
    """file_digest of PATH, given what os.stat said of it (INFO)."""
    return _digest_of(str(path), info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@functools.lru_cache(maxsize=1 << 15)
def _digest_of(path: str, *_stat: int) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def manifest(directory: Path, leaving: str) -> dict[str, str]:
    """Every file under DIRECTORY but LEAVING and the cache's own stamp (written after the entry is made), by its
    relative path: its content hash."""
    return {p.relative_to(directory).as_posix(): file_digest(p) for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name not in (leaving, ENTRY_STAMP)}


def kept_json(path: Path, shape: object) -> Any | None:
    """The JSON document the cache's file PATH holds, when it is whole and of SHAPE (a type hint, json_file.matches);
    else None, and the caller makes it again and publishes it over this one: a missing, truncated or corrupt entry is
    never trusted, never a crash. Nor a hang: what is not a regular file there (a FIFO would block the read forever, a
    device never end it) counts as corrupt, told without reading it."""
    data = kept_bytes(path)
    try:
        document = json.loads(data) if data is not None else None
    except (ValueError, RecursionError):
        return None
    return document if json_file.matches(document, shape) else None


def kept_bytes(path: Path) -> bytes | None:
    """The bytes of the cache's file PATH, or None: missing, unreadable, or not a regular file (told without reading)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:  # a FIFO's open does not wait for a writer
            return file.read() if stat.S_ISREG(os.fstat(file.fileno()).st_mode) else None
    except OSError:
        return None


def drop(entry: str) -> None:
    """Remove the cache's directory ENTRY, found corrupt on read, under its lock: the next cached_build makes it again."""
    with _locked(entry, fcntl.LOCK_EX) as lock:
        _remove(cache_dir() / entry, lock)


def publish_text(path: Path, text: str) -> None:
    """Write TEXT to PATH (a file of the cache) by one rename: a reader finds it whole or not at all."""
    _publish(path, lambda scratch: scratch.write_text(text))


def publish_bytes(path: Path, data: bytes) -> None:
    """Write DATA to PATH (a file of the cache), as publish_text writes."""
    _publish(path, lambda scratch: scratch.write_bytes(data))


def keep_newest(directory: Path, pattern: str, keep: int) -> None:
    """Of the files in DIRECTORY that match PATTERN (records of one kind, each touched when used), remove all but the
    KEEP used last: a reader that finds one gone makes it again."""
    files = sorted(directory.glob(pattern), key=_mtime_or_zero, reverse=True)
    for stale in files[keep:]:
        stale.unlink(missing_ok=True)


def _mtime_or_zero(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def publish_file(path: Path, made: Path) -> None:
    """Copy MADE (a scratch file) to PATH, a file of the cache, as publish_text writes."""
    _publish(path, lambda scratch: shutil.copyfile(made, scratch))


def _publish(path: Path, write: Callable[[Path], object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f"{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
    write(scratch)
    scratch.replace(path)


@contextlib.contextmanager
def using(entry: str, product: str, make: Callable[[Path], None]) -> Iterator[tuple[Path, bool]]:
    """cached_build's entry and whether it was there, held while the block uses it: its lock shared, which `evict`
    does not take, and its time of last use (the directory's mtime) now."""
    made = False
    while True:
        with _locked(entry, fcntl.LOCK_SH):
            out_dir = cache_dir() / entry
            if (out_dir / product).is_file():
                os.utime(out_dir)
                yield out_dir, not made
                return
        _, cached = cached_build(entry, product, make)
        made = not cached


def evict(entries: Sequence[Path], keep: int) -> None:
    """Of ENTRIES (directories of the cache), remove all but the KEEP most recently used, each unless its lock is held
    (made or used right now): moved out of sight first, so it is never seen half removed."""
    for entry in sorted(entries, key=_last_use, reverse=True)[keep:]:
        with contextlib.suppress(BlockingIOError), _locked(entry.name, fcntl.LOCK_EX | fcntl.LOCK_NB) as lock:
            _remove(entry, lock)


def _remove(entry: Path, lock: Path) -> None:
    """ENTRY, its LOCK held exclusively, moved out of sight first, so it is never seen half removed."""
    if entry.is_dir():  # else another process removed it meanwhile
        doomed = Path(tempfile.mkdtemp(prefix=".evicted-", dir=cache_dir()))
        entry.rename(doomed / entry.name)
        lock.unlink()  # after the rename: whoever opens it anew from here on finds no entry
        shutil.rmtree(doomed, ignore_errors=True)


def _last_use(entry: Path) -> float:
    try:
        return entry.stat().st_mtime
    except FileNotFoundError:
        return 0.0


@contextlib.contextmanager
def making(path: Path) -> Iterator[None]:
    """PATH, a file of the cache (a compile's record), held while the block makes it, by a lock beside it
    (`.NAME.lock`): a thread or process about to make the same file waits, then finds what the first published
    instead of making it again (two test workers, two commands, wanting one compile)."""
    with _flocked(path.with_name(f".{path.name}.lock"), fcntl.LOCK_EX):
        yield


@contextlib.contextmanager
def held_then_removed(path: Path) -> Iterator[None]:
    """PATH, a lock file outside the cache (in the temporary directory), held exclusively while the block runs and
    removed before it is let go: no file is left behind, and a process that waited for it opens PATH anew (_flocked)."""
    with _flocked(path, fcntl.LOCK_EX):
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(entry: str, operation: int) -> Iterator[Path]:
    """ENTRY's lock file (CACHE/.ENTRY.lock), flock-ed with OPERATION while the block runs."""
    with _flocked(cache_dir() / f".{entry}.lock", operation) as path:
        yield path


@contextlib.contextmanager
def _flocked(path: Path, operation: int) -> Iterator[Path]:
    """The lock file PATH, flock-ed with OPERATION while the block runs. Each call opens the file anew, so threads of
    one process exclude each other as processes do; a lock file removed (by `evict`, `cache prune`) while this call
    waited for it is opened again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, operation)
            try:
                current = os.stat(path).st_ino == os.fstat(descriptor).st_ino
            except FileNotFoundError:
                current = False
            if current:
                yield path
                return
        finally:
            os.close(descriptor)  # releases the lock


def keep_failed(source: Path, name: str) -> Path:
    """Keep a source that did not compile where the user can open it."""
    kept = cache_dir() / f"{name}-failed.cpp"
    shutil.copyfile(source, kept)
    return kept
