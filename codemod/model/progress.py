"""Progress on stderr for the steps that take seconds (capture, codegen, compile, callgrind).

On a terminal a step shows a live line with its elapsed time, rewritten in place;
otherwise each step prints one line when it ends. `-q` silences both (and, through
`quiet()`, every summary: only errors are left); `-v` also prints every command the tool runs.
"""
from __future__ import annotations

import shlex
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

QUIET, NORMAL, VERBOSE = 0, 1, 2
_level = NORMAL
_REFRESH_SECONDS = 0.2
_said_kept: set[str] = set()


def set_level(level: int) -> None:
    global _level
    _level = level


def quiet() -> bool:
    return _level == QUIET


def command(args: Sequence[str]) -> None:
    """Show a command about to run (with -v)."""
    if _level >= VERBOSE:
        print(f"$ {shlex.join(str(a) for a in args)}", file=sys.stderr, flush=True)


def kept(what: str) -> None:
    """Say a step the build cache answered (it kept the step's result from an earlier run), in one line as a step that
    ran says itself, so a run says the same steps whatever the cache holds; once, however often it is asked again."""
    if not quiet() and what not in _said_kept:
        _said_kept.add(what)
        print(f"{what}: kept from an earlier run (build cache)", file=sys.stderr, flush=True)


@contextmanager
def step(what: str, passes_output_through: bool = False) -> Iterator[None]:
    """Show WHAT while the block runs (one line when it ends if PASSES_OUTPUT_THROUGH: a live line would
    overwrite what a child prints)."""
    if quiet():
        yield
        return
    start = time.monotonic()
    live = sys.stderr.isatty() and not passes_output_through
    done = threading.Event()
    ticker = threading.Thread(target=_tick, args=(what, start, done), daemon=True) if live else None
    if ticker is not None:
        ticker.start()
    try:
        yield
    finally:
        done.set()
        if ticker is not None:
            ticker.join()
        ending = "\r\033[K" if live else ""
        print(f"{ending}{what}: {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def _tick(what: str, start: float, done: threading.Event) -> None:
    while not done.wait(_REFRESH_SECONDS):
        print(f"\r\033[K{what} ... {time.monotonic() - start:.1f} s", end="", file=sys.stderr, flush=True)
