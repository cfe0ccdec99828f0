"""The one check of every path codemod reads or writes, at the boundary where a path comes in (the tree's files,
compile_commands.json and what it names, a report or trace, a journal, --patch): refused in one line, before it is
opened, when its name is too long, or when it is not a regular file (a FIFO, which would block the read forever, a
device, a socket, a directory) or a file of the kernel's (/proc, /sys, /dev: regular to stat, but no file's bytes).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from codemod.model.errors import BadInput

NAME_MAX = 255  # bytes of one path component (Linux's file systems)
PATH_MAX = 4096  # bytes of a whole path
_KERNELS = ("/proc", "/sys", "/dev")


def name_checked(path: Path, what: str) -> Path:
    """PATH, unless its name or a component of it is longer than the system takes (WHAT names it in the error)."""
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            _refuse(path, f"a component of its name is {len(os.fsencode(part))} bytes, more than the {NAME_MAX} a file name may have ({what})", _SHORTER)
    if len(os.fsencode(str(path))) > PATH_MAX:
        _refuse(path, f"{len(os.fsencode(str(path)))} bytes long, more than the {PATH_MAX} a path may have ({what})", _SHORTER)
    return path


def regular_file(path: Path, what: str, missing_ok: bool = False) -> Path:
    """PATH, a regular file (or, with MISSING_OK, nothing yet: a file codemod creates), checked before anything opens
    it; else BadInput naming PATH and WHAT it should be."""
    name_checked(path, what)
    resolved = os.path.realpath(path)
    if _in_kernels(resolved):
        _refuse(path, f"a file of the kernel's ({resolved}), but it must be {what}", _REGULAR)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if missing_ok:
            return path
        _refuse(path, f"no such file, but it must be {what}", _REGULAR)
    except OSError as error:
        _refuse(path, f"cannot be read ({error.strerror}), but it must be {what}", _REGULAR)
    if not stat.S_ISREG(info.st_mode):
        _refuse(path, f"{_kind(info.st_mode)}, but it must be {what}", _REGULAR)
    return path


def walked_file(path: Path) -> bool:
    """Whether PATH, met walking the tree, is a file to read (a regular file, or a symlink to one) rather than a
    directory. Anything else is refused in one line naming it, before it is read: a FIFO or a device (a read would block
    or never end), a file of the kernel's, or one whose kind cannot be told (a symlink leading nowhere, or to an
    over-long name)."""
    try:  # most are: a walk meets every file of the tree, and resolving each costs ten times the lstat
        if stat.S_ISREG(os.lstat(path).st_mode) and not _in_kernels(os.path.abspath(path)):
            return True
    except OSError:
        pass  # told below, in the words of the path it names
    resolved = os.path.realpath(path)
    if _in_kernels(resolved):
        _refuse(path, f"a file of the kernel's ({resolved}), and codemod reads the tree's files", _FIX_WALKED)
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        _refuse(path, f"cannot be read ({error.strerror}), and codemod reads the tree's files", _FIX_WALKED)
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        _refuse(path, f"{_kind(mode)}, and codemod reads the tree's files", _FIX_WALKED)
    return stat.S_ISREG(mode)


_FIX_WALKED = "fix or remove it and run again"


def _in_kernels(path: str) -> bool:
    """Whether the absolute PATH is a kernel's file (string tests: pathlib's cost more than the lstat)."""
    return any(path == kernel or path.startswith(kernel + "/") for kernel in _KERNELS)


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


_SHORTER = "give a shorter path"
_REGULAR = "put a regular file there and run again"


def _refuse(path: Path, why: str, advice: str) -> None:
    raise BadInput(f"{path}: {why}; nothing was read or written: {advice}")
