"""The one boundary for the unexpected: an exception no command expected becomes one line, never a traceback.

The line names the command and the error, the state the tree is left in (read from its journals and transaction
log, compared with what they were when the command started: "mul is bypassed and unverified: `codemod revert mul
--tree T` undoes it") and the log file that keeps the traceback; the exit code is EXIT_INTERNAL (3). Imported
only on that path (group.py), and by options.run for the journals' state at the start, which costs a directory
listing.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from codemod.apply import transaction
from codemod.apply.targets import STATE_DIR

Snapshot = dict[str, tuple[int, int, int]]  # a journal's op -> its (inode, size, mtime_ns)


def snapshot(root: Path) -> Snapshot | None:
    """ROOT's journals as they are now, by their file status only (no content read); None when unreadable."""
    try:
        with os.scandir(root / STATE_DIR) as entries:
            return {e.name.removesuffix(".json"): _status(e.stat(follow_symlinks=False)) for e in entries
                    if e.name.endswith(".json") and not e.name.startswith(".")}
    except FileNotFoundError:
        return {}
    except OSError:
        return None


def _status(info: os.stat_result) -> tuple[int, int, int]:
    return info.st_ino, info.st_size, info.st_mtime_ns


def tree_state(root: Path, before: Snapshot | None) -> str:
    """What the failed command left ROOT in, from its journals and log against BEFORE (snapshot at its start)."""
    after = snapshot(root)
    status = f"`codemod status --tree {root}` says what it holds"
    if before is None or after is None:
        return f"the state of {root} could not be read: {status}"
    try:
        log = root / transaction.LOG
        if log.is_file():
            return f"{root} is part-way through a change: `codemod recover --tree {root}` finishes it"
    except OSError:
        return f"the state of {root} could not be read: {status}"
    written = sorted(op for op, info in after.items() if before.get(op) != info)
    reverted = sorted(op for op in before if op not in after)
    said = []
    if written:
        ops = " ".join(written)
        verb = "is" if len(written) == 1 else "are"
        said.append(f"{', '.join(written)} {verb} bypassed and unverified: `codemod revert {ops} --tree {root}` undoes it")
    if reverted:
        said.append(f"{', '.join(reverted)} {'was' if len(reverted) == 1 else 'were'} reverted")
    return "; ".join(said) if said else f"{root} was not changed"


def keep_traceback(error: BaseException, command: str) -> Path | None:
    """ERROR's traceback, with the command line, in a new log file in the temporary directory; None if none can be written."""
    try:
        descriptor, name = tempfile.mkstemp(prefix=f"codemod-internal-error-{time.strftime('%Y%m%dT%H%M%S')}-", suffix=".log")
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace") as log:
            log.write(f"`{command}` failed unexpectedly\nargv: {sys.argv!r}\npython: {sys.version}\n\n")
            log.write("".join(traceback.format_exception(error)))
        return Path(name)
    except OSError:
        return None


def one_line(error: BaseException, command: str, root: Path | None, before: Snapshot | None) -> str:
    """The line said for ERROR, which COMMAND (`codemod bypass`) did not expect; ROOT: its tree, if it has one."""
    what = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
    state = f"; {tree_state(root, before)}" if root is not None else ""
    log = keep_traceback(error, command)
    kept = f"the traceback is in {log}" if log is not None else "no log could be written (the temporary directory is not writable)"
    return f"internal error in `{command}` ({what}){state}; {kept}: please report it"
