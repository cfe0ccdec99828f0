"""Change several files of a tree all or nothing, even if the process dies half-way.

A transaction is a redo log. `.codemod/transaction` holds every file's new bytes
(or its deletion) and the directories to remove afterwards; it is written and
synced under a temporary name and renamed into place: that rename is the commit
point. Then each file is replaced (temporary file beside it, synced, renamed)
and the log is deleted last. A process killed before the commit leaves the tree
as it was (at most a stray temporary log, which `recover` deletes); killed after
it, `recover` replays the log, which is idempotent, so the tree ends fully changed.

Test hooks: CODEMOD_CRASH_AFTER_WRITES=N makes the process die (os._exit, no
clean-up, as a kill would) right after its N-th filesystem mutation: a file
written, renamed or deleted, a directory made or removed. CODEMOD_RAISE_AT=commit
(or =applied) raises an exception nothing expects right after the commit point (or
once the transaction is applied), for the CLI's boundary (cli/boundary.py) to say.
"""
from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from codemod.apply import targets
from codemod.apply.targets import STATE_DIR, temporary
from codemod.model import json_file
from codemod.model.errors import BadInput
from codemod.model.tree import inside

LOG = f"{STATE_DIR}/transaction"
# Written into STATE_DIR when it is made, so `git status` in a checkout does not list the tool's own state.
STATE_GITIGNORE = f"{STATE_DIR}/.gitignore"
FORMAT = "codemod-transaction/1"
CRASH_ENV = "CODEMOD_CRASH_AFTER_WRITES"
CRASH_EXIT = 86  # what a crashed test run exits with, so a test can tell it from an error
RAISE_ENV = "CODEMOD_RAISE_AT"
_COMMAND = re.compile(r"(bypass|revert) [\w. ]{1,4000}")  # what `run` records: named in messages, so one line

_mutations = itertools.count(1)


class _Recorded(TypedDict):
    """A transaction log as JSON."""

    format: str
    command: str
    writes: list[tuple[str, str | None]]  # base64
    remove_dirs: list[str]


@dataclass(frozen=True)
class Transaction:
    command: str  # e.g. "bypass mul", named in messages
    writes: tuple[tuple[str, bytes | None], ...]  # tree-relative path and its new bytes; None deletes it
    remove_dirs: tuple[str, ...] = ()  # removed if empty, in this order, after the writes

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "command": self.command,
                "writes": [[path, None if data is None else base64.b64encode(data).decode()] for path, data in self.writes],
                "remove_dirs": list(self.remove_dirs),
            }
        )

    @classmethod
    def read(cls, where: Path) -> Transaction:
        """The log at WHERE, every path in it checked against WHERE's tree."""
        then = _discard_advice(where.parent.parent)
        raw = json_file.read(where, "transaction log", then)
        try:
            if raw["format"] != FORMAT:
                raise ValueError(f"not format {FORMAT!r}")
            if not json_file.matches(raw, _Recorded):
                raise TypeError("a field missing, unknown or of the wrong type")
            if not _COMMAND.fullmatch(raw["command"]):
                raise ValueError("not a codemod command")
            writes = tuple(
                (path, None if encoded is None else base64.b64decode(encoded, validate=True)) for path, encoded in raw["writes"]
            )
            transaction = cls(raw["command"], writes, tuple(raw["remove_dirs"]))
        except (ValueError, KeyError, TypeError) as error:
            raise BadInput(f"{where}: unreadable transaction log ({type(error).__name__}: {error}); {then}") from None
        for path in (*(path for path, _ in transaction.writes), *transaction.remove_dirs):
            inside(where.parent.parent, path, f"{where}: entry")
        return transaction


def _discard_advice(root: Path) -> str:
    return (
        "it cannot be replayed: restore the tree from version control, then drop the log with "
        f"`codemod recover --discard --tree {root}`"
    )


def run(root: Path, transaction: Transaction) -> None:
    refuse_if_interrupted(root)
    targets.check_writes(root, transaction.writes)  # nothing known in advance may stop the replay after the commit
    try:
        if not (root / STATE_GITIGNORE).exists():
            write_file(root / STATE_GITIGNORE, b"*\n")
        write_file(root / LOG, transaction.to_json().encode())  # the commit point
    except OSError as error:
        _rmdir_if_empty(root / STATE_DIR)
        raise BadInput(f"{error.filename}: {error.strerror}; nothing was changed in {root}: fix that and run again")
    _raise_if_asked("commit")
    _replay_or_explain(root, transaction)
    _raise_if_asked("applied")


def _raise_if_asked(point: str) -> None:
    """The test hook RAISE_ENV: an exception no caller expects, at POINT."""
    if os.environ.get(RAISE_ENV) == point:
        raise RuntimeError(f"test hook {RAISE_ENV}={point}")


def _replay_or_explain(root: Path, transaction: Transaction) -> None:
    """Replay a committed transaction; a file that cannot be written (a full disk) is named, with what to do."""
    try:
        _replay(root, transaction)
    except OSError as error:
        raise BadInput(
            f"{error.filename}: {error.strerror} during `codemod {transaction.command}`; the tree is part-way: "
            f"fix that (free space, permissions) and run `codemod recover --tree {root}` to finish it"
        )


def refuse_if_interrupted(root: Path) -> None:
    """Every command but `recover` starts here: an unfinished transaction must be finished first."""
    targets.check_state_dir(root)
    log = _log(root)
    if log.exists():
        command = Transaction.read(log).command
        raise BadInput(
            f"{log}: `codemod {command}` was interrupted half-way; run `codemod recover --tree {root}` to finish it"
        )


def recover(root: Path) -> Transaction | None:
    """Finish the interrupted transaction, if one was committed; drop one that was not."""
    targets.check_state_dir(root)
    log = _log(root)
    _unlink(temporary(log))
    if not log.exists():
        _remove_state_dir_if_unused(root)
        return None
    transaction = Transaction.read(log)
    _replay_or_explain(root, transaction)
    return transaction


def discard(root: Path) -> Path | None:
    """Drop a log that cannot be replayed (unreadable, or naming paths it may not touch), once the user has restored
    the tree; a log that can be replayed is refused, never dropped. The log dropped, if there was one."""
    targets.check_state_dir(root)
    log = _log(root)
    if not log.exists():
        return None
    try:
        Transaction.read(log)
    except BadInput:
        if log.is_dir():
            raise BadInput(f"{log}: a directory where codemod keeps its transaction log; move it away and run again") from None
        _unlink(log)
        _remove_state_dir_if_unused(root)
        return log
    raise BadInput(f"{log}: the log can be replayed, so it is not dropped; run `codemod recover --tree {root}` to finish it")


def strays(root: Path) -> list[Path]:
    """The temporary files a killed run left in ROOT's state directory (the log's, a journal's, the .gitignore's
    before its rename; one beside a tree file is only left after the commit, and the replay rewrites it)."""
    state = root / STATE_DIR
    if state.is_symlink() or not state.is_dir():  # refused by check_state_dir, in the command's own words
        return []
    return sorted(path for path in state.glob(".*.codemod-tmp") if path.is_file() and not path.is_symlink())


def remove_strays(root: Path) -> None:
    """Remove strays(ROOT), and the state directory if nothing else is left in it. Only under the tree's lock: no
    other codemod is writing them."""
    if (root / STATE_DIR).is_symlink():  # refused by check_state_dir, in the command's own words: not ours to tidy
        return
    for stray in strays(root):
        _unlink(stray)
    _remove_state_dir_if_unused(root)


def _log(root: Path) -> Path:
    """The log's path, once `.codemod` is known not to lead out of the tree."""
    inside(root, LOG, f"{root / STATE_DIR}")
    return root / LOG


def _replay(root: Path, transaction: Transaction) -> None:
    """Write through symlinks (the edit goes to their target, the link stays a link), never outside ROOT."""
    where = f"{root / LOG}: entry"
    for path, data in transaction.writes:
        if data is None:
            _unlink(inside(root, path, where))
        else:
            write_file(inside(root, path, where), data)
    for directory in transaction.remove_dirs:
        _rmdir_if_empty(inside(root, directory, where))
    _unlink(root / LOG)
    _remove_state_dir_if_unused(root)


def write_file(target: Path, data: bytes) -> None:
    """Replace TARGET by DATA atomically: a synced temporary file beside it, renamed over it."""
    _make_dirs(target.parent)
    beside = temporary(target)
    try:
        beside.unlink(missing_ok=True)  # left by a crash; O_EXCL | O_NOFOLLOW: a link planted there is never written through
        with open(os.open(beside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        _mutated()
        if target.exists():
            os.chmod(beside, target.stat().st_mode & 0o7777)
        os.replace(beside, target)
    except OSError as error:  # a full disk: no half-written temporary left, and the error names the target
        with contextlib.suppress(OSError):
            beside.unlink()
        raise OSError(error.errno, error.strerror, str(target)) from error
    _sync_dir(target.parent)
    _mutated()


def _make_dirs(directory: Path) -> None:
    if not directory.exists():
        _make_dirs(directory.parent)
        directory.mkdir()
        _mutated()


def _unlink(path: Path) -> None:
    if path.exists():
        path.unlink()
        _sync_dir(path.parent)
        _mutated()


def _rmdir_if_empty(directory: Path) -> None:
    if directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        _mutated()


def _remove_state_dir_if_unused(root: Path) -> None:
    """Remove STATE_DIR when it holds nothing but its .gitignore (no journal, no log)."""
    state, own = root / STATE_DIR, (temporary(root / STATE_GITIGNORE), root / STATE_GITIGNORE)  # a crash may leave the first
    if state.is_dir() and {p.name for p in state.iterdir()} <= {p.name for p in own}:
        for path in own:
            _unlink(path)
        _rmdir_if_empty(state)


def _sync_dir(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _mutated() -> None:
    """Count one filesystem mutation; die after the N-th when the test hook asks for it."""
    crash_after = os.environ.get(CRASH_ENV)
    if crash_after and next(_mutations) == int(crash_after):
        os._exit(CRASH_EXIT)
