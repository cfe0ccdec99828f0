"""A command's child processes and temporary directories end with it, on SIGINT and SIGTERM too.

While `owned()` holds (options.run wraps every command in it), each child process (subprocess.Popen,
so subprocess.run, torch.utils.cpp_extension's builds, g++ in the compile check's threads, valgrind,
the script `hot` profiles) starts in a process group of its own: a Ctrl-C at the terminal reaches
codemod alone, and codemod ends each group, grandchildren included (g++'s cc1plus, the processes a
profiled script starts). On SIGINT or SIGTERM it sends SIGTERM to every running child's group,
SIGKILL after GRACE_SECONDS, refuses to start another, and raises Interrupted in the main thread:
unwinding it removes the temporary directories (every one is a context manager) and waits for the
worker threads, whose children have ended.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import weakref
from collections.abc import Iterator

GRACE_SECONDS = 3.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A signal ended the command. Not an Exception, so no `except Exception` on the way up swallows it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum  # the shell's convention for a process a signal ended


_POPEN = subprocess.Popen
_running: weakref.WeakSet = weakref.WeakSet()
_received: list[int] = []  # the signal that started the ending, once one has


class _OwnedPopen(_POPEN):
    """subprocess.Popen, the child leading a session, so a process group, of its own (unless the caller chose its
    group or session), and known to `_end` until it exits."""

    def __init__(self, *args, **kwargs):
        if _received:
            raise Interrupted(_received[0])
        if not kwargs.get("start_new_session") and kwargs.get("process_group") is None:
            kwargs["start_new_session"] = True  # a session of its own, so a group: process_group needs Python 3.11
        super().__init__(*args, **kwargs)
        _running.add(self)
        if _received:  # the signal came while it started
            _signal_group(self, signal.SIGKILL)


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum)


def _end(signum: int, _frame) -> None:
    if _received:
        return  # already ending: let the unwinding finish
    _received.append(signum)
    for child in list(_running):
        _signal_group(child, signal.SIGTERM)
    timer = threading.Timer(GRACE_SECONDS, lambda: [_signal_group(c, signal.SIGKILL) for c in list(_running)])
    timer.daemon = True
    timer.start()
    raise Interrupted(signum)


@contextlib.contextmanager
def owned() -> Iterator[None]:
    """Own the command's children (see the module's doc) until the block ends; in the main thread only."""
    previous = {signum: signal.signal(signum, _end) for signum in SIGNALS}
    subprocess.Popen = _OwnedPopen
    try:
        yield
    finally:
        subprocess.Popen = _POPEN
        for signum, handler in previous.items():
            signal.signal(signum, handler)
