"""Apply plans all at once and journal them inside the tree, so `revert` works later.

Each bypassed op has a journal, `.codemod/<op>.json`: its mode, its place in the
order ops were bypassed, and each touched file's bytes before and after the bypass.
Bypass and revert each run as one transaction (codemod/apply/transaction.py), for
one op or several: all files or none, even if the process is killed.

Revert takes the op's step out of each file's history (codemod/apply/rebase.py):
the ops bypassed after it, and the user's edits, are replayed on the file as it was
before the op, and those ops' journals are rewritten to match. So any set of ops
reverts in any order, byte for byte.

A journal is data, never an instruction: its op name and every path in it are
checked (inside the tree, not in `.codemod/`) and its content hash must match,
or nothing is done (exit 2 naming the journal).
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from codemod.apply import rebase, transaction
from codemod.apply.lock import LOCK_FILE
from codemod.apply.transaction import STATE_DIR, Transaction
from codemod.capture.capture import Capture
from codemod.model import json_file, op_name
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, Tree, inside

if TYPE_CHECKING:
    from codemod.plan.plan import OpEntries, Plan

JOURNAL_DIR = STATE_DIR
FORMAT = "codemod-journal/4"  # 4: the mode, the bypass order and a content hash; revert rewrites later ops' journals
MODES = ("plain", "guarded")
USER_EDITS = "a later edit"  # the name of the user's edits in a file's history
_BYPASS_OF = "the bypass of "  # and of another op's bypass
_RESTORE = "restore the files from version control"  # what to do about a journal that cannot be trusted


@dataclass(frozen=True)
class JournalFile:
    path: str
    before: bytes | None  # None: the bypass created the file, revert deletes it
    after: bytes  # what the bypass wrote


class _RecordedFile(TypedDict):
    path: str
    before: str | None  # base64
    after: str


class _Recorded(TypedDict):
    """A journal as JSON, its sha256 left out."""

    format: str
    op: str
    mode: str
    sequence: int
    overloads: list[str]
    files: list[_RecordedFile]
    created_dirs: list[str]
    capture: Capture | None


@dataclass(frozen=True)
class Journal:
    op: str
    overloads: tuple[str, ...]
    files: tuple[JournalFile, ...]
    created_dirs: tuple[str, ...] = ()  # made for created files, deepest first; revert removes them
    mode: str = "plain"  # or "guarded"
    sequence: int = 0  # the order ops were bypassed in: a file's history runs through its journals in this order
    capture: Capture | None = None  # what the bypass was made from, so build and bench measure that

    def file(self, path: str) -> JournalFile | None:
        return next((f for f in self.files if f.path == path), None)

    def _content(self) -> dict:
        return {
            "format": FORMAT,
            "op": self.op,
            "mode": self.mode,
            "sequence": self.sequence,
            "overloads": list(self.overloads),
            "files": [{"path": f.path, "before": _encode(f.before), "after": _encode(f.after)} for f in self.files],
            "created_dirs": list(self.created_dirs),
            "capture": None if self.capture is None else json.loads(self.capture.to_json()),
        }

    def to_json(self) -> str:
        content = self._content()
        return json.dumps({**content, "sha256": _digest(content)}, indent=1)

    @classmethod
    def read(cls, where: Path) -> Journal:
        """The journal at WHERE; its op, mode, paths and hash checked (the paths against WHERE's tree)."""
        raw = json_file.read(where, "journal", _RESTORE)
        try:
            if raw.get("format") != FORMAT:
                raise BadInput(
                    f"{where}: journal format {str(raw.get('format'))[:40]!r}, this codemod reads {FORMAT!r}; "
                    "revert with the codemod version that wrote it, or restore the files from version control"
                )
            recorded = raw.pop("sha256")
            if recorded != _digest(raw):
                raise BadInput(f"{where}: the journal does not match its sha256 (edited by hand?); restore the files from version control")
            if not json_file.matches(raw, _Recorded):
                raise TypeError("a field missing, unknown or of the wrong type")
            files = tuple(JournalFile(f["path"], _decode(f["before"]), _decode(f["after"])) for f in raw["files"])
            captured = raw["capture"]
            capture = None if captured is None else Capture.from_json(json.dumps(captured))
            journal = cls(raw["op"], tuple(raw["overloads"]), files, tuple(raw["created_dirs"]), raw["mode"], raw["sequence"], capture)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise BadInput(f"{where}: corrupt journal ({type(error).__name__}: {error}); restore the files from version control")
        journal._check(where)
        return journal

    def _check(self, where: Path) -> None:
        if self.op != op_name.validated(str(self.op), f"{where}: op") or f"{self.op}.json" != where.name:
            raise BadInput(f"{where}: records op {self.op!r}, not {where.stem!r}; restore the files from version control")
        if self.mode not in MODES or not isinstance(self.sequence, int):
            raise BadInput(f"{where}: mode {self.mode!r} / sequence {self.sequence!r} not understood; restore the files from version control")
        root = where.parent.parent
        for path in (*(f.path for f in self.files), *self.created_dirs):
            resolved = inside(root, path, f"{where}: entry")
            if resolved == root or resolved.is_relative_to(root / STATE_DIR) or resolved == root / LOCK_FILE:
                raise BadInput(f"{where}: entry {path!r} is codemod's own state, not a file of the tree; nothing was written")


@dataclass(frozen=True)
class RevertedFile:
    path: str
    outcome: str
    since: str  # the edits made after the bypass, as a diff; "" when there were none


@dataclass(frozen=True)
class Reverted:
    op: str
    mode: str
    files: tuple[RevertedFile, ...]


def _digest(content: dict) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _encode(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _decode(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data, validate=True)


def _journal_rel(op: str) -> str:
    return f"{JOURNAL_DIR}/{op_name.validated(op)}.json"


def load(tree: Tree, op: str) -> Journal | None:
    transaction.refuse_if_interrupted(tree.root)
    path = inside(tree.root, _journal_rel(op), "the journal")
    return Journal.read(path) if path.exists() else None


def bypassed(tree: Tree) -> list[Journal]:
    """Every journal in the tree, in the order the ops were bypassed."""
    transaction.refuse_if_interrupted(tree.root)
    directory = inside(tree.root, JOURNAL_DIR, "the journal directory")
    paths = sorted(directory.glob("*.json")) if directory.is_dir() else []
    return sorted((Journal.read(path) for path in paths), key=lambda j: j.sequence)


def changed_since(tree: Tree, journal: Journal, others: list[Journal] | None = None) -> list[str]:
    """Files the bypass wrote that no longer hold what the bypasses wrote last (this op's, or one bypassed after it)."""
    others = bypassed(tree) if others is None else others
    return [f.path for f in journal.files if _current(tree, f.path) != _last_written(f, journal, others)]


def _last_written(entry: JournalFile, journal: Journal, journals: list[Journal]) -> bytes:
    later = [j.file(entry.path) for j in journals if j.sequence > journal.sequence and j.file(entry.path)]
    return later[-1].after if later else entry.after


def recorded_entries(tree: Tree, recorded: Journal, guarded: bool = False) -> OpEntries:
    """The op's structured groups as they were before the bypass (in the tree they are no longer structured)."""
    from codemod.plan.plan import op_entries  # the planner and the yaml model: status and ops read journals without them

    return op_entries(tree, recorded.op, guarded, _native_functions(recorded).before.decode())


def _native_functions(recorded: Journal) -> JournalFile:
    found = next((f for f in recorded.files if f.path == NATIVE_FUNCTIONS and f.before is not None), None)
    if found is None:
        raise BadInput(f"{_journal_rel(recorded.op)}: records no {NATIVE_FUNCTIONS}; restore the files from version control")
    return found


def _current(tree: Tree, rel_path: str) -> bytes | None:
    path = inside(tree.root, rel_path, "a journal entry")
    return path.read_bytes() if path.is_file() else None


def apply(tree: Tree, plans: list[Plan]) -> list[Journal]:
    """Apply PLANS in one transaction; each plan's `before` is the tree as the plans before it leave it."""
    journals, writes, final, made = [], [], {}, set()
    sequence = max((j.sequence for j in bypassed(tree)), default=0)
    for plan in plans:
        changes = [c for c in plan.changes if c.before != c.after]
        created = [d for d in _missing_dirs(tree, [c.path for c in changes if c.before is None]) if d not in made]
        made.update(created)
        sequence += 1
        journal = Journal(
            plan.op, plan.overloads, tuple(JournalFile(c.path, c.before, c.after) for c in changes), tuple(created),
            "guarded" if plan.guarded else "plain", sequence, plan.capture,
        )
        journals.append(journal)
        writes.append((_journal_rel(plan.op), journal.to_json().encode()))
        final.update((c.path, c.after) for c in changes)
    writes += final.items()
    transaction.run(tree.root, Transaction(f"bypass {' '.join(p.op for p in plans)}", tuple(writes)))
    return journals


def revert(tree: Tree, ops: list[str], force: bool = False) -> list[Reverted]:
    """Take each of OPS out of the tree, in this order, in one transaction: every file it changed loses the
    op's step of its history, and keeps what came after (ops bypassed later, the user's edits).

    Writes nothing and raises VerificationFailed when a later edit overlaps the op's own lines; with FORCE,
    the user's edits made since the last bypass of such a file are discarded instead."""
    journals = {j.op: j for j in bypassed(tree)}
    files: dict[str, bytes | None] = {}
    changed_journals: set[str] = set()
    remove_dirs: list[str] = []
    reverted = []
    for op in ops:
        removed = journals.get(op_name.validated(op))
        if removed is None:
            raise BadInput(f"op {op!r} is not bypassed in {tree.root} (no {_journal_rel(op)}); nothing to revert")
        later = [j for j in sorted(journals.values(), key=lambda j: j.sequence) if j.sequence > removed.sequence]
        outcomes, conflicts = [], []
        for entry in removed.files:
            if entry.path not in files:
                files[entry.path] = _current(tree, entry.path)
            try:
                restored, outcome, since, rebased = _take_out(removed, entry, later, files[entry.path], force)
            except _Refused as refusal:
                conflicts.append(refusal)
                continue
            files[entry.path] = restored
            outcomes.append(RevertedFile(entry.path, outcome, since))
            for other, new_entry in rebased.items():
                journals[other] = replace(journals[other], files=tuple(new_entry if f.path == entry.path else f for f in journals[other].files))
                changed_journals.add(other)
        if conflicts:
            forcible = not force and all(refusal.force_helps for refusal in conflicts)
            raise VerificationFailed(
                f"revert {op}: later changes cut into the lines its bypass wrote; nothing was written.\n"
                + "\n".join(map(str, conflicts))
                + (f"\nresolve these by hand, or run `codemod revert {op} --force` to drop the edits listed (made by hand "
                   "since the last bypass; the other edits are kept)" if forcible else "\nresolve these by hand")
            )
        del journals[op]
        changed_journals.discard(op)
        for directory in removed.created_dirs:
            heirs = [j for j in journals.values() if any(f.before is None and _under(f.path, directory) for f in j.files)]
            for heir in heirs:  # it still holds their new files: the last of them to be reverted removes it
                journals[heir.op] = replace(heir, created_dirs=_deepest_first({*heir.created_dirs, directory}))
                changed_journals.add(heir.op)
            if not heirs:
                remove_dirs.append(directory)
        reverted.append(Reverted(op, removed.mode, tuple(outcomes)))
    writes = [
        *((path, data) for path, data in files.items() if data != _current(tree, path)),
        *((_journal_rel(op), journals[op].to_json().encode()) for op in sorted(changed_journals)),
        *((_journal_rel(r.op), None) for r in reverted),
    ]
    transaction.run(tree.root, Transaction(f"revert {' '.join(ops)}", tuple(writes), tuple(remove_dirs)))
    return reverted


class _Refused(Exception):
    """One file cannot be reverted: the message says where and why, and whether --force would take the op out."""

    def __init__(self, message: str, force_helps: bool) -> None:
        super().__init__(message)
        self.force_helps = force_helps


def _take_out(
    removed: Journal, entry: JournalFile, later: list[Journal], current: bytes | None, force: bool
) -> tuple[bytes | None, str, str, dict[str, JournalFile]]:
    """The file without REMOVED's step, its outcome, the user's edits as a diff, and the rebased entries of LATER ops."""
    path = entry.path
    others = [(j.op, j.file(path)) for j in later if j.file(path) is not None]
    last = others[-1][1].after if others else entry.after
    since = "" if current == last else _since_diff(path, last, current)
    if entry.before is None:  # created by the bypass: nothing later may depend on it
        if others:
            raise _Refused(f"{path}: created by the bypass of {removed.op} and changed by the bypass of {others[0][0]}: revert that first", False)
        if current not in (entry.after, None) and not force:
            raise _Refused(f"{path}: created by the bypass and edited since\n{since}", True)
        outcome = "already deleted" if current is None else "created by the bypass: deleted" if current == entry.after else _forced(since)
        return None, outcome, since, {}
    if not others and current == entry.before:
        return entry.before, "already held its original bytes", since, {}
    if current is None and not force:
        raise _Refused(f"{path}: deleted since the bypass", True)
    steps, previous = [], entry.after
    for other, other_entry in others:
        if other_entry.before != previous:
            steps.append(rebase.Step(USER_EDITS, previous, other_entry.before or b""))
        steps.append(rebase.Step(f"{_BYPASS_OF}{other}", other_entry.before or b"", other_entry.after))
        previous = other_entry.after
    removing = rebase.Step(removed.op, entry.before, entry.after)
    user = [rebase.Step(USER_EDITS, previous, current)] if current is not None and current != previous else []
    why_all_dropped = ""  # why the user's edits were all dropped
    droppable = bool(user) and force  # only the edits made since the last bypass: the later bypasses stand on the others
    try:
        states, dropped = rebase.without(removing, steps + user, drop_last=droppable)
    except rebase.Conflict as conflict:
        if not (droppable and conflict.clash.index == len(steps)):
            force_helps = bool(user) and conflict.clash.index == len(steps)
            raise _Refused(_conflict_report(path, since, conflict.clashes) + _first_to_revert(steps, conflict.clash.index), force_helps)
        states, _ = rebase.without(removing, steps)
        user, dropped, why_all_dropped = [], [], f" (at {path}:{conflict.clash.line} they cannot be told from the bypass's lines)"
    rebased, state = {}, entry.before
    for step, after in zip(steps, states):
        if step.name != USER_EDITS:
            rebased[step.name.removeprefix(_BYPASS_OF)] = JournalFile(path, state, after)
        state = after
    restored = states[-1] if states else entry.before
    if dropped:
        kept = len(rebase.spans(previous, current or b"")) > len(dropped)
        outcome = (f"--force: dropped the later edit{'s' if len(dropped) > 1 else ''} at "
                   f"{', '.join(f'{path}:{clash.line}' for clash in dropped)} (inside the bypass's lines)"
                   + ("; the other later edits kept" if kept else ""))
    elif user:
        outcome = "the bypass's hunks undone, later edits kept"
    elif since:
        outcome = _forced(since) + why_all_dropped
    else:
        outcome = "restored" + (f", keeping the bypass of {', '.join(op for op, _ in others)}" if others else "")
    return restored, outcome, since, rebased


def _first_to_revert(steps: list[rebase.Step], index: int) -> str:
    """For a clash --force cannot drop (made before another op's bypass, or by it): which op to revert first."""
    following = [step.name for step in steps[index:] if step.name != USER_EDITS]
    return f"  (--force cannot drop it: revert {following[0].removeprefix(_BYPASS_OF)} first)\n" if following else ""


def _forced(since: str) -> str:
    return "--force: recorded bytes restored, the edits made since the last bypass dropped" if since else "restored"


def _since_diff(path: str, written: bytes, current: bytes | None) -> str:
    return rebase.unified_diff(
        rebase.lines(written), rebase.lines(current or b""), f"a/{path} (as the bypasses wrote it)", f"b/{path} (now)"
    )


def _conflict_report(path: str, since: str, clashes: tuple[rebase.Clash, ...]) -> str:
    """Every place one step's changes cut into the bypass's lines in PATH."""
    report = "".join(
        f"{path}:{clash.line}: {'a later edit' if clash.step == USER_EDITS else clash.step} overlaps a hunk of the bypass\n"
        f"  the later edit:\n{clash.later_hunk}" for clash in clashes
    )
    return (f"{path}: edited since the bypass:\n{since}" if since else "") + report


def _missing_dirs(tree: Tree, created_files: list[str]) -> tuple[str, ...]:
    """Directories the created files need that do not exist yet, deepest first."""
    missing: set[str] = set()
    for path in created_files:
        for parent in Path(path).parents:
            if parent != Path(".") and not tree.path(parent.as_posix()).exists():
                missing.add(parent.as_posix())
    return _deepest_first(missing)


def _deepest_first(directories: set[str]) -> tuple[str, ...]:
    return tuple(sorted(directories, key=lambda p: (-p.count("/"), p)))


def _under(path: str, directory: str) -> bool:
    return Path(directory) in Path(path).parents
