"""What the build cache holds, by kind and size, and what of it this install will not use again (`codemod cache`).

An entry is a directory (a codegen run, a compile, a precompiled header, OpInfo samples: cache.cached_build, with
the ENTRY_STAMP of what it was made under) or a file (a capture, a kernel-definition or compile-check record, a
build record, hot's per-call costs: cache.publish_text). Stale, what `prune --stale` removes:
- a directory made under another torch or Python than this one's (its stamp says so), or before entries had a
  stamp (an older codemod: its key cannot be read back);
- a build record whose build is gone or stale, and hot's costs measured under another torch;
- a source kept because it did not compile (kept to read the error), and what a run killed while publishing left
  (its scratch directory or file, a day old).
Captures, kernel-definition and compile-check records, check verdicts and parsed yaml are keyed by what they were made from (our
code, a tree's bytes), which cannot be told apart from what a tree will ask for again: only `prune --all` drops them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from codemod.model import cache

# Where each kind is, as the modules that write them name it; the first that matches names the kind.
_DIRECTORY_KINDS = (  # by the file a finished entry holds
    ("precompiled headers", "*.gch"),  # verify/pch.py
    ("codegen runs", ".ran-clean"),  # capture/codegen.py: torchgen, autograd, the yaml's loaders
    ("OpInfo samples", "samples.pt"),  # verify/samples.py
    ("harnesses and extensions", "harness.cpp"),  # verify/compiler.py
)
_FILE_KINDS = (
    ("captures", re.compile(r"capture-.+\.json")),  # capture/capture.py
    ("hot's per-call costs", re.compile(r"hot-cost-.+\.json")),  # measure/hot.py
    ("sources that did not compile", re.compile(r".+-failed\.cpp")),  # model/cache.py keep_failed
    ("build records", re.compile(r".+-[0-9a-f]{20}\.json")),  # verify/compiler.py record
)
# plan/structured_kernels.py, verify/compile_check.py, verify/checks.py, model/native_yaml.py (the newest 32 kept)
_RECORD_DIRECTORIES = {
    "kernels": "kernel definitions", "syntax": "compile-check records", "checks": "check verdicts", "yaml": "parsed yaml",
}
# What a run publishing an entry writes first: tempfile's scratch directory beside it, publish_text's scratch file;
# and where cache.evict moves an entry before removing it.
_SCRATCH = re.compile(r".+-[0-9a-f]{20}-[a-z0-9_]{8}|.+\.tmp\d+-\d+|\.evicted-[a-z0-9_]{8}")
_LOCK = re.compile(r"\..+\.lock")  # the lock file of an entry or record (cache.py): the cache's bookkeeping, not an entry
UNFINISHED = "unfinished (a run was publishing it)"
_ABANDONED_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Entry:
    path: Path
    kind: str
    bytes: int  # on disk
    stale: str | None  # why this install will not use it again; None: it may


def entries(root: Path | None = None) -> list[Entry]:
    """Every entry of the cache at ROOT (the build cache), by path."""
    root = root or cache.cache_dir()
    if not root.is_dir():
        return []
    now = cache.made_under()
    found = []
    for path in sorted(root.iterdir()):
        if _LOCK.fullmatch(path.name):
            continue
        if path.name in _RECORD_DIRECTORIES and path.is_dir():
            records = [record for record in sorted(path.iterdir()) if not _LOCK.fullmatch(record.name)]
            found += [Entry(record, _RECORD_DIRECTORIES[path.name], _size(record), None) for record in records]
        else:
            kind = _kind(path)
            found.append(Entry(path, kind, _size(path), _stale(path, kind, root, now)))
    return found


def prune(chosen: list[Entry]) -> None:
    """Remove CHOSEN. A codemod running on the cache meanwhile may miss an entry it just found: it fails, and a run
    after it makes the entry again."""
    for entry in chosen:
        if entry.path.is_dir() and not entry.path.is_symlink():
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            entry.path.unlink(missing_ok=True)
        entry.path.with_name(f".{entry.path.name}.lock").unlink(missing_ok=True)  # one waiting on it opens it anew


def _kind(path: Path) -> str:
    if _SCRATCH.fullmatch(path.name):
        return UNFINISHED
    if path.is_dir():
        return next((kind for kind, product in _DIRECTORY_KINDS if any(path.glob(product))), "other")
    return next((kind for kind, name in _FILE_KINDS if name.fullmatch(path.name)), "other")


def _stale(path: Path, kind: str, root: Path, now: dict) -> str | None:
    if kind == UNFINISHED:
        return "left by a run that did not finish" if time.time() - path.lstat().st_mtime > _ABANDONED_SECONDS else None
    if kind == "sources that did not compile":
        return "a source kept to read its compile error"
    if kind == "build records":
        build = root / _json(path).get("entry", "")
        return None if build != root and build.is_dir() and _stale(build, _kind(build), root, now) is None else "a build record whose build is gone or stale"
    if kind == "hot's per-call costs":
        torch = _json(path).get("torch")
        return None if torch == now["torch"] else f"per-call costs measured under torch {torch}"
    if path.is_dir() and kind != "other":
        made = _json(path / cache.ENTRY_STAMP)
        if not made:
            return "made by a codemod that did not record what it was made under"
        changed = [f"{what} {made.get(what)}" for what in ("torch", "python") if made.get(what) != now[what]]
        return f"made under {' and '.join(changed)}" if changed else None
    return None


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _size(path: Path) -> int:
    """PATH's bytes on disk, as du counts them (symlinks not followed)."""
    total = _disk_bytes(path.lstat())
    if path.is_dir() and not path.is_symlink():
        with os.scandir(path) as children:
            for child in children:
                total += _size(Path(child.path)) if child.is_dir(follow_symlinks=False) else _disk_bytes(child.stat(follow_symlinks=False))
    return total


def _disk_bytes(status: os.stat_result) -> int:
    return getattr(status, "st_blocks", 0) * 512 or status.st_size
