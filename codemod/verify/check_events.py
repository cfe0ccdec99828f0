"""What the check's child process says as it goes (check_process): each step (a call, all its variants) before it
runs, and each side (torch's kernel, or the bypass) before it runs, a JSON line each, flushed before the call; and,
read by the parent after a signal or a hang, the last thing said.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

TORCH, BYPASS, STEP = "torch", "bypass", "step"


class Witness:
    """The child's side: says each step and side to EVENTS; the steps the parent names as SKIPPED are not run but
    reported. Without EVENTS (the check run in-process, as tests do) it says nothing and skips nothing."""

    def __init__(self, events: TextIO | None = None, skipped: dict[int, list[str]] | None = None) -> None:
        self._events = events
        self._skipped = skipped or {}
        self._step = 0

    def step(self, description: str) -> str | None:
        """Start the next step; None to run it, or why it is skipped (the step ran before and torch's kernel died)."""
        self._step += 1
        if self._step in self._skipped:
            said, why = self._skipped[self._step]
            if said != description:  # the calls were not made again the same: a skip would hide another call
                raise RuntimeError(f"step {self._step} of the check was {said!r}, is now {description!r}")
            return why
        self._say(STEP, description)
        return None

    def side(self, who: str, variant: str) -> None:
        """WHO (TORCH or BYPASS) is about to run VARIANT ("mul.out out= (resized)") of the step's call."""
        self._say(who, variant)

    def _say(self, what: str, description: str) -> None:
        if self._events is not None:
            self._events.write(json.dumps([self._step, what, description]) + "\n")
            self._events.flush()


def last_event(events: Path) -> tuple[int, str, str, str]:
    """The step the child died in, the side it was running, the step's description and the side's variant."""
    step, who, description, variant = 0, STEP, "", ""
    if events.is_file():
        for line in events.read_text().splitlines():
            try:
                step, who, said = json.loads(line)
            except ValueError:  # a line cut short by the signal
                continue
            if who == STEP:
                description = said
            else:
                variant = said
    return step, who, description, variant
