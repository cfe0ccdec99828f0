"""Standard streams that outlive their reader: `codemod revert mul ... 2>&1 | head -1` still reverts, and exits 0.

A reader that leaves early (`head`, a pager quit) closes the pipe; command-line tools then stop writing,
never stop working. Python ignores SIGPIPE, so a write raises BrokenPipeError wherever it happens, possibly
before the work is done. These streams point the descriptor at /dev/null instead and carry on.
"""
from __future__ import annotations

import io
import os
import sys


class _ReaderMayLeave(io.RawIOBase):
    def __init__(self, descriptor: int):
        super().__init__()
        self._descriptor = descriptor

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._descriptor

    def isatty(self) -> bool:
        return os.isatty(self._descriptor)

    def write(self, data) -> int:
        try:
            return os.write(self._descriptor, data)
        except BrokenPipeError:  # the reader left: what follows goes nowhere, as it would to a closed terminal
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._descriptor)
            os.close(devnull)
            return len(data)


def tolerate_readers_leaving() -> None:
    """Replace sys.stdout and sys.stderr by equivalent streams whose writes never fail on a closed pipe."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            descriptor = stream.fileno()
        except (AttributeError, OSError):  # not a file descriptor (click's test runner, an embedding): left alone
            continue
        stream.flush()
        setattr(sys, name, io.TextIOWrapper(
            io.BufferedWriter(_ReaderMayLeave(descriptor)),
            encoding=stream.encoding, errors=stream.errors, line_buffering=stream.line_buffering,
            write_through=stream.write_through,
        ))
