"""Apply a plan all at once and journal it inside the tree, so `revert` works later.

The journal (`.codemod/<op>.json`) holds each touched file's original bytes and
the hash of what the bypass wrote; it is written and synced before any file
is replaced, and revert restores the originals only where the file is still
what the bypass left.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from codemod.errors import BadInput, VerificationFailed
from codemod.plan import Plan
from codemod.tree import Tree

JOURNAL_DIR = ".codemod"
FORMAT = "codemod-journal/2"


@dataclass(frozen=True)
class JournalFile:
    path: str
    before: bytes | None  # None: the bypass created the file, revert deletes it
    after_sha256: str


@dataclass(frozen=True)
class Journal:
    op: str
    overloads: tuple[str, ...]
    files: tuple[JournalFile, ...]
    created_dirs: tuple[str, ...] = ()  # made for created files, deepest first; revert removes them

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "op": self.op,
                "overloads": list(self.overloads),
                "files": [
                    {"path": f.path, "before": _encode(f.before), "after_sha256": f.after_sha256}
                    for f in self.files
                ],
                "created_dirs": list(self.created_dirs),
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, where: Path, data: str) -> Journal:
        try:
            raw = json.loads(data)
            if raw.get("format") != FORMAT:
                raise BadInput(f"{where}: journal format {raw.get('format')!r}, this codemod reads {FORMAT!r}")
            files = tuple(JournalFile(f["path"], _decode(f["before"]), f["after_sha256"]) for f in raw["files"])
            return cls(raw["op"], tuple(raw["overloads"]), files, tuple(raw["created_dirs"]))
        except (ValueError, KeyError, TypeError) as error:
            raise BadInput(f"{where}: corrupt journal ({error}); restore the files from version control")


def _encode(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _decode(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data, validate=True)


def journal_path(tree: Tree, op: str) -> Path:
    return tree.root / JOURNAL_DIR / f"{op}.json"


def load(tree: Tree, op: str) -> Journal | None:
    path = journal_path(tree, op)
    return Journal.from_json(path, path.read_text()) if path.exists() else None


def bypassed(tree: Tree) -> list[Journal]:
    """Every journal in the tree, by op name."""
    directory = tree.root / JOURNAL_DIR
    paths = sorted(directory.glob("*.json")) if directory.is_dir() else []
    return [Journal.from_json(path, path.read_text()) for path in paths]


def changed_since(tree: Tree, journal: Journal) -> list[str]:
    """Files the bypass wrote that no longer hold what it wrote."""
    return [
        f.path for f in journal.files
        if not tree.path(f.path).is_file() or sha256(tree.path(f.path).read_bytes()) != f.after_sha256
    ]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def apply(tree: Tree, plan: Plan) -> Journal:
    changes = [c for c in plan.changes if c.before != c.after]
    journal = Journal(
        plan.op,
        plan.overloads,
        tuple(JournalFile(c.path, c.before, sha256(c.after)) for c in changes),
        _missing_dirs(tree, [c.path for c in changes if c.before is None]),
    )
    _write_all(tree, [(journal_path(tree, plan.op), journal.to_json().encode())], [(tree.path(c.path), c.after) for c in changes])
    return journal


def revert(tree: Tree, op: str) -> Journal:
    journal = load(tree, op)
    if journal is None:
        raise BadInput(f"op {op!r} is not bypassed in {tree.root} (no {JOURNAL_DIR}/{op}.json); nothing to revert")
    changed = changed_since(tree, journal)
    if changed:
        raise VerificationFailed(
            f"files changed since `codemod bypass {op}`: {', '.join(changed)}; "
            "revert them to the bypassed state (or commit your work elsewhere) and run revert again"
        )
    _write_all(tree, [], [(tree.path(f.path), f.before) for f in journal.files if f.before is not None])
    for created in (f for f in journal.files if f.before is None):
        tree.path(created.path).unlink()
    for directory in journal.created_dirs:
        if not any(tree.path(directory).iterdir()):
            tree.path(directory).rmdir()
    path = journal_path(tree, op)
    path.unlink()
    if not any(path.parent.iterdir()):
        path.parent.rmdir()
    return journal


def _missing_dirs(tree: Tree, created_files: list[str]) -> tuple[str, ...]:
    """Directories the created files need that do not exist yet, deepest first."""
    missing: set[str] = set()
    for path in created_files:
        for parent in Path(path).parents:
            if parent != Path(".") and not tree.path(parent.as_posix()).exists():
                missing.add(parent.as_posix())
    return tuple(sorted(missing, key=lambda p: (-p.count("/"), p)))


def _write_all(tree: Tree, first: list[tuple[Path, bytes]], files: list[tuple[Path, bytes]]) -> None:
    """Stage everything beside its target, sync, write FIRST (the journal), then rename the rest."""
    staged: list[tuple[Path, Path]] = []
    try:
        for target, data in [*first, *files]:
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.codemod-tmp")
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            if target.exists():
                os.chmod(temporary, target.stat().st_mode & 0o7777)
            staged.append((temporary, target))
    except OSError as error:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        raise BadInput(f"cannot write into {tree.root}: {error}; nothing was changed")
    for temporary, target in staged:
        os.replace(temporary, target)
        _sync_dir(target.parent)


def _sync_dir(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
