"""One codemod process per tree: an advisory lock on `TREE/.codemod.lock`.

The lock is `flock` on the file, which the kernel drops when its holder dies:
a lock file left by a killed process (a stale lock, its pid dead) is simply
taken over. The file holds the holder's pid, for the message the second
process prints before it exits 2; the holder deletes the file when it is done.
Taking the lock removes the temporary files a killed run left (transaction.strays).
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from codemod.apply import transaction
from codemod.apply.targets import LOCK_FILE, check_own_file
from codemod.model.errors import BadInput
from codemod.model.tree import Tree


@contextmanager
def held(tree: Tree) -> Iterator[None]:
    """The tree's lock, for the block; taking it removes the temporary files a killed run left (transaction.strays)."""
    path = tree.root / LOCK_FILE
    descriptor = _acquire(path)
    try:
        _write_pid(path, descriptor)
        transaction.remove_strays(tree.root)
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(descriptor)


def _write_pid(path: Path, descriptor: int) -> None:
    try:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
    except OSError as error:  # a full disk: nothing was changed yet
        raise BadInput(f"{path}: cannot write the lock file ({error.strerror}); nothing was changed: fix that and run again") from None


def _acquire(path: Path) -> int:
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # a planted symlink is not followed
        except OSError as error:
            raise BadInput(f"{path}: cannot create the lock file ({error.strerror}); is the tree writable?")
        try:
            check_own_file(path, os.fstat(descriptor), "its lock")  # a hard link to a file elsewhere: not written
        except BadInput:
            os.close(descriptor)
            raise
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 32).decode(errors="replace").strip() or "not written yet"
            os.close(descriptor)
            raise BadInput(
                f"{path}: another codemod (pid {holder}) is changing this tree; "
                "wait until it finishes and run again"
            )
        if _still_at(path, descriptor):
            return descriptor
        os.close(descriptor)  # the previous holder deleted the file between our open and our lock: lock the new one


def _still_at(path: Path, descriptor: int) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(descriptor))
    except FileNotFoundError:
        return False
