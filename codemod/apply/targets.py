"""Every path codemod writes, checked in one place before the first write.

- The tree's files a transaction writes or deletes (transaction.py checks them before its commit point, `bypass`
  before it compiles): inside the tree, every directory on the way a directory (not a file where a directory must be
  made), the file itself a regular file or absent (not a directory), the temporary file beside it free, and
  writable. After the commit only what no check can foresee is left: a full disk, a kill.
- codemod's own files, the state directory, the lock and the --patch file: a directory or a file of their own,
  never a symlink (the write would land where it points) nor a hard link (it would change the file's other names).
  The --patch file is a new file or one codemod wrote (its first line is PATCH_HEADER's), never another file.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from codemod.model import paths
from codemod.model.errors import BadInput
from codemod.model.tree import LOCK_FILE, STATE_DIR, inside

# The first line of every --patch file: what codemod writes over (its own earlier patch), and nothing else. `git apply`
# and `patch -p1` read past it, as past an email's text before the diff.
PATCH_HEADER = "# codemod {command}: written by --patch; git apply and patch -p1 read past this line\n"
_OWN_PATCH = re.compile(rb"# codemod (bypass|revert) [\w. ]{1,4000}: written by --patch; git apply and patch -p1 read past this line\n")


def temporary(target: Path) -> Path:
    """Where TARGET's new bytes are written and synced before they are renamed over it."""
    return target.with_name(f".{target.name}.codemod-tmp")


def check_writes(root: Path, writes: Iterable[tuple[str, bytes | None]]) -> None:
    """Refuse, naming the path, a write (bytes) or deletion (None) of the tree that could not be carried out."""
    for rel_path, data in writes:
        path = inside(root, rel_path, "a file to write")
        verb = "deletes" if data is None else "writes"
        for directory in reversed(path.parents):
            if directory.is_relative_to(root) and directory.exists() and not directory.is_dir():
                _refuse(directory, f"a file where a directory must be, to hold {rel_path}")
        if path.exists() and not path.is_file():
            _refuse(path, f"{'a directory' if path.is_dir() else 'not a regular file'} where codemod {verb} a file")
        if temporary(path).is_dir():
            _refuse(temporary(path), f"a directory where codemod writes {rel_path}'s temporary file")
        if data is not None:
            _writable(path)


def check_state_dir(root: Path) -> None:
    """STATE_DIR is a directory of codemod's own or absent: a symlink would send the journals, the log and their
    .gitignore elsewhere (another directory of the tree, or out of it)."""
    state = root / STATE_DIR
    if state.is_symlink():
        raise BadInput(
            f"{state}: a symlink (to {os.readlink(state)}); codemod keeps its journals and transaction log in a "
            "directory of its own: remove the link and run again"
        )
    if state.exists() and not state.is_dir():
        raise BadInput(
            f"{state}: not a directory; codemod keeps its journals and transaction log in this directory: "
            "move the file away and run again"
        )


def check_own_file(path: Path, info: os.stat_result, what: str) -> None:
    """PATH (INFO: its lstat, or the fstat of a descriptor opened without following symlinks) may hold WHAT."""
    problem = _not_own_file(path, info, what)
    if problem:
        _refuse(path, problem)


def _not_own_file(path: Path, info: os.stat_result, what: str) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return f"a symlink (to {os.readlink(path)}) where codemod writes {what}"
    if not stat.S_ISREG(info.st_mode):
        return f"{'a directory' if stat.S_ISDIR(info.st_mode) else 'not a regular file'} where codemod writes {what}"
    if info.st_nlink != 1:
        return f"a hard link ({info.st_nlink} names of one file) where codemod writes {what}; writing it would change the other names too"
    return None


def check_patch_file(root: Path, patch: Path) -> None:
    """The --patch file: a new file, or an earlier patch outside the tree; never a file of the tree, a file that is
    codemod wrote, nor anything in codemod's own state."""
    paths.regular_file(patch, "the patch, a new file or one codemod wrote", missing_ok=True)
    resolved = patch.resolve()
    if resolved.is_relative_to(root / STATE_DIR) or resolved == root / LOCK_FILE:
        _refuse_patch(patch, f"inside {root / STATE_DIR if resolved != root / LOCK_FILE else resolved}, codemod's own state")
    if not resolved.parent.is_dir():
        _refuse_patch(patch, f"no directory {resolved.parent}")
    if os.path.lexists(resolved):
        if resolved.is_relative_to(root):
            _refuse_patch(patch, f"a file of the tree {root}")
        problem = _not_own_file(resolved, resolved.lstat(), "the patch")
        if problem:
            _refuse_patch(patch, problem)
        with resolved.open("rb") as existing:
            head = existing.readline(1 << 13)
        if head and not _OWN_PATCH.fullmatch(head):
            _refuse_patch(patch, "an existing file that codemod did not write (its first line is not codemod's patch header)")
    for candidate in (resolved, resolved.parent) if resolved.exists() else (resolved.parent,):
        if not os.access(candidate, os.W_OK):
            _refuse_patch(patch, f"{candidate} is not writable")


def without_patch_header(text: str) -> str:
    """TEXT, a patch, without the PATCH_HEADER line a --patch file begins with."""
    head, _, rest = text.partition("\n")
    return rest if _OWN_PATCH.fullmatch(f"{head}\n".encode()) else text


def _writable(path: Path) -> None:
    """os.access answers for a read-only file system and an immutable file (chattr +i), even for root.
    The mode bits are checked too: root (tests, CI, containers) may write a file chmod'ed a-w, but
    whoever made it read-only did not want it edited, so it is refused as well."""
    directory = path.parent
    while not directory.exists():
        directory = directory.parent
    for candidate in (path, directory) if path.exists() else (directory,):
        if not os.access(candidate, os.W_OK) or not candidate.stat().st_mode & 0o222:
            raise BadInput(
                f"{candidate}: not writable (read-only file system, chattr +i or no write permission); "
                "nothing was written: make it writable and run again"
            )


def _refuse(path: Path, why: str) -> None:
    raise BadInput(f"{path}: {why}; nothing was written: move it away and run again")


def _refuse_patch(patch: Path, why: str) -> None:
    raise BadInput(f"--patch {patch}: {why}; nothing was written: pass --patch a new file outside the tree, or a patch codemod wrote")
