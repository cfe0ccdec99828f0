"""Apply a plan all at once and journal it inside the tree, so `revert` works later.

The journal (`.codemod/<op>.json`) holds each touched file's original bytes and
the bytes the bypass wrote. Apply and revert each run as one transaction
(codemod/apply/transaction.py): all files or none, even if the process is killed.
Revert restores the originals where a file still holds what the bypass wrote;
in a file edited since, it undoes only the bypass's own hunks (three-way), so
later work, including other ops' bypasses, is kept.
"""
from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path

from codemod.apply import three_way

from codemod.apply import transaction
from codemod.capture.capture import Capture
from codemod.model.edits import apply_edits
from codemod.model.errors import BadInput, VerificationFailed
from codemod.plan.plan import OpEntries, Plan, op_entries
from codemod.apply.transaction import STATE_DIR, Transaction
from codemod.model.tree import NATIVE_FUNCTIONS, Tree

JOURNAL_DIR = STATE_DIR
FORMAT = "codemod-journal/3"  # 3: keeps what the bypass wrote, not only its hash


@dataclass(frozen=True)
class JournalFile:
    path: str
    before: bytes | None  # None: the bypass created the file, revert deletes it
    after: bytes  # what the bypass wrote


@dataclass(frozen=True)
class Journal:
    op: str
    overloads: tuple[str, ...]
    files: tuple[JournalFile, ...]
    created_dirs: tuple[str, ...] = ()  # made for created files, deepest first; revert removes them
    capture: Capture | None = None  # what the bypass was made from, so build and bench measure that (None: older journal)

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "op": self.op,
                "overloads": list(self.overloads),
                "files": [{"path": f.path, "before": _encode(f.before), "after": _encode(f.after)} for f in self.files],
                "created_dirs": list(self.created_dirs),
                "capture": None if self.capture is None else json.loads(self.capture.to_json()),
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, where: Path, data: str) -> Journal:
        try:
            raw = json.loads(data)
            if raw.get("format") != FORMAT:
                raise BadInput(
                    f"{where}: journal format {raw.get('format')!r}, this codemod reads {FORMAT!r}; "
                    "revert with the codemod version that wrote it, or restore the files from version control"
                )
            files = tuple(JournalFile(f["path"], _decode(f["before"]), _decode(f["after"])) for f in raw["files"])
            captured = raw.get("capture")
            capture = None if captured is None else Capture.from_json(json.dumps(captured))
            return cls(raw["op"], tuple(raw["overloads"]), files, tuple(raw["created_dirs"]), capture)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise BadInput(f"{where}: corrupt journal ({type(error).__name__}: {error}); restore the files from version control")


@dataclass(frozen=True)
class RevertedFile:
    path: str
    outcome: str
    since: str  # the edits made after the bypass, as a diff; "" when there were none


def _encode(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _decode(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data, validate=True)


def _journal_rel(op: str) -> str:
    return f"{JOURNAL_DIR}/{op}.json"


def load(tree: Tree, op: str) -> Journal | None:
    transaction.refuse_if_interrupted(tree.root)
    path = tree.path(_journal_rel(op))
    return Journal.from_json(path, path.read_text()) if path.exists() else None


def bypassed(tree: Tree) -> list[Journal]:
    """Every journal in the tree, by op name."""
    transaction.refuse_if_interrupted(tree.root)
    directory = tree.root / JOURNAL_DIR
    paths = sorted(directory.glob("*.json")) if directory.is_dir() else []
    return [Journal.from_json(path, path.read_text()) for path in paths]


def changed_since(tree: Tree, journal: Journal) -> list[str]:
    """Files the bypass wrote that no longer hold what it wrote."""
    return [f.path for f in journal.files if _current(tree, f.path) != f.after]


def recorded_entries(tree: Tree, recorded: Journal, guarded: bool = False) -> OpEntries:
    """The op's structured groups as they were before the bypass (in the tree they are no longer structured)."""
    return op_entries(tree, recorded.op, guarded, _native_functions(recorded).before.decode())


def is_guarded(tree: Tree, recorded: Journal) -> bool:
    """Whether the bypass was `--guarded`: its yaml edit is what the guarded planner makes of the recorded yaml."""
    yaml = _native_functions(recorded)
    return apply_edits(yaml.before, list(recorded_entries(tree, recorded, guarded=True).yaml_edits)) == yaml.after


def _native_functions(recorded: Journal) -> JournalFile:
    found = next((f for f in recorded.files if f.path == NATIVE_FUNCTIONS and f.before is not None), None)
    if found is None:
        raise BadInput(f"{_journal_rel(recorded.op)}: records no {NATIVE_FUNCTIONS}; restore the files from version control")
    return found


def _current(tree: Tree, rel_path: str) -> bytes | None:
    path = tree.path(rel_path)
    return path.read_bytes() if path.is_file() else None


def apply(tree: Tree, plan: Plan) -> Journal:
    changes = [c for c in plan.changes if c.before != c.after]
    journal = Journal(
        plan.op,
        plan.overloads,
        tuple(JournalFile(c.path, c.before, c.after) for c in changes),
        _missing_dirs(tree, [c.path for c in changes if c.before is None]),
        plan.capture,
    )
    writes = ((_journal_rel(plan.op), journal.to_json().encode()), *((c.path, c.after) for c in changes))
    _refuse_unwritable(tree, [path for path, _ in writes])
    transaction.run(tree.root, Transaction(f"bypass {plan.op}", writes))
    return journal


def revert(tree: Tree, op: str, force: bool = False) -> tuple[RevertedFile, ...]:
    """Restore what `bypass OP` changed; in a file edited since, undo only the bypass's hunks (or, with FORCE,
    restore the recorded bytes). Writes nothing and raises VerificationFailed when a later edit overlaps a hunk."""
    journal = load(tree, op)
    if journal is None:
        raise BadInput(f"op {op!r} is not bypassed in {tree.root} (no {_journal_rel(op)}); nothing to revert")
    reverted, writes, conflicts = [], [], []
    for entry in journal.files:
        current = _current(tree, entry.path)
        since = "" if current == entry.after else _since_diff(entry, current)
        if current in (entry.after, entry.before) or force:
            restored, outcome = entry.before, _plain_outcome(entry, current, force)
        elif current is None or entry.before is None:
            what = "deleted" if current is None else "created by the bypass and edited"
            conflicts.append(f"{entry.path}: {what} since the bypass\n{since}")
            continue
        else:
            undone = three_way.undo(entry.before, entry.after, current)
            if undone.conflicts:
                conflicts.append(_conflict_report(entry.path, since, undone.conflicts))
                continue
            restored, outcome = undone.data, "the bypass's hunks undone, later edits kept"
        reverted.append(RevertedFile(entry.path, outcome, since))
        writes.append((entry.path, restored))
    if conflicts:
        raise VerificationFailed(
            f"revert {op}: files were edited since the bypass where it changed them; nothing was written.\n"
            + "\n".join(conflicts)
            + f"\nresolve these by hand, or run `codemod revert {op} --force` to restore the recorded bytes "
            "(discarding the later edits of these files)"
        )
    _refuse_unwritable(tree, [path for path, _ in writes])
    transaction.run(tree.root, Transaction(f"revert {op}", (*writes, (_journal_rel(op), None)), journal.created_dirs))
    return tuple(reverted)


def _plain_outcome(entry: JournalFile, current: bytes | None, force: bool) -> str:
    if current == entry.before:
        return "already held its original bytes"
    if current != entry.after and force:
        return "--force: recorded bytes restored, later edits discarded"
    return "created by the bypass: deleted" if entry.before is None else "restored"


def _since_diff(entry: JournalFile, current: bytes | None) -> str:
    return three_way.unified_diff(
        three_way.lines(entry.after), three_way.lines(current or b""), f"a/{entry.path} (as the bypass wrote it)", f"b/{entry.path} (now)"
    )


def _conflict_report(path: str, since: str, conflicts: tuple[three_way.Conflict, ...]) -> str:
    hunks = [
        f"{path}:{c.line}: a later edit overlaps a hunk of the bypass\n  the bypass's hunk:\n{c.bypass_hunk}  the later edit:\n{c.later_hunk}"
        for c in conflicts
    ]
    return f"{path}: edited since the bypass:\n{since}" + "".join(hunks)


def _refuse_unwritable(tree: Tree, rel_paths: list[str]) -> None:
    """Refuse before writing anything when a file or its directory cannot or should not be written.

    os.access answers for a read-only file system and an immutable file (chattr +i), even for root.
    The mode bits are checked too: root (tests, CI, containers) may write a file chmod'ed a-w, but
    whoever made it read-only did not want it edited, so it is refused as well."""
    for rel_path in rel_paths:
        path = tree.path(rel_path)
        directory = path.parent
        while not directory.exists():
            directory = directory.parent
        for candidate in (path, directory) if path.exists() else (directory,):
            if not os.access(candidate, os.W_OK) or not candidate.stat().st_mode & 0o222:
                raise BadInput(
                    f"{candidate}: not writable (read-only file system, chattr +i or no write permission); "
                    "nothing was written: make it writable and run again"
                )


def _missing_dirs(tree: Tree, created_files: list[str]) -> tuple[str, ...]:
    """Directories the created files need that do not exist yet, deepest first."""
    missing: set[str] = set()
    for path in created_files:
        for parent in Path(path).parents:
            if parent != Path(".") and not tree.path(parent.as_posix()).exists():
                missing.add(parent.as_posix())
    return tuple(sorted(missing, key=lambda p: (-p.count("/"), p)))
