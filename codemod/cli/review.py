"""`bypass --interactive`: review the plan hunk by hunk; the accepted hunks are applied together.

Only the caller rewrites are independent of the rest: a rejected one leaves its call
for a human (it is reported like any reference the tool could not rewrite). Every
other hunk is needed by the others (the yaml change, the hand-written API and
kernels, the formula removal and the foreach exemption): rejecting one is refused
with the reason, and the question is asked once more: a second "n" quits, nothing written.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from codemod.apply import patch
from codemod.model.errors import BadInput
from codemod.model.tree import DERIVATIVES, GEN_VARIABLE_TYPE, NATIVE_FUNCTIONS
from codemod.plan.callers import Leftover
from codemod.plan.plan import FileChange, Plan

ANSWERS = "y: apply this hunk, n: leave it out, a: apply this and every remaining hunk, q: quit without writing"


@dataclass(frozen=True)
class Hunk:
    path: str
    number: int  # 1-based, within its file
    of: int  # hunks in the file
    diff: str  # "@@ ... @@" and its lines, as in the patch
    needed_because: str | None  # why the rest of the plan depends on it; None for an independent hunk


class Quit(Exception):
    """The reviewer quit: nothing is written."""


def review(plan: Plan, ask: Callable[[Hunk], str], refuse: Callable[[Hunk], None]) -> Plan:
    """The plan with the hunks ASK accepted; ASK returns y, n, a or q (Quit)."""
    accept_rest = False
    changes, leftovers = [], list(plan.leftovers)
    for change in plan.changes:
        old, new = patch.lines(change)
        file_hunks = patch.hunks(change)
        needed_because = _needed_because(plan, change.path)
        accepted: list[patch.Opcode] = []
        for number, diff_hunk in enumerate(file_hunks, 1):
            hunk = Hunk(change.path, number, len(file_hunks), diff_hunk.text, needed_because)
            answer = "y" if accept_rest else ask(hunk)
            if answer == "n" and needed_because is not None:
                refuse(hunk)
                answer = ask(hunk)
                if answer == "n":
                    raise BadInput(
                        f"{hunk.path}: hunk {hunk.number}/{hunk.of} of `bypass {plan.op}` refused again, but it cannot be "
                        "left out: quit, nothing written; run again and answer y (or a, or q to quit)"
                    )
            if answer == "q":
                raise Quit
            accept_rest = accept_rest or answer == "a"
            if answer in ("y", "a"):
                accepted.extend(diff_hunk.opcodes)
            else:
                leftovers += [
                    Leftover(change.path, line + 1, old[line].rstrip("\n"), "left out in review; rewrite it by hand")
                    for _, i1, i2, _, _ in diff_hunk.opcodes
                    for line in range(i1, i2)
                ]
        if accepted:
            changes.append(FileChange(change.path, change.before, _apply(old, new, accepted)))
    return dataclasses.replace(plan, changes=tuple(changes), leftovers=tuple(leftovers))


def _needed_because(plan: Plan, path: str) -> str | None:
    if path in plan.independent_paths:
        return None
    if path == NATIVE_FUNCTIONS:
        return f"without it torchgen keeps generating at::{plan.op}, and the hand-written API would collide with it"
    if path in (DERIVATIVES, GEN_VARIABLE_TYPE):
        return "without it the tree's autograd codegen fails on the op's formula or the foreach ops that reuse it"
    return f"the yaml change makes torchgen stop generating what this hunk writes by hand; {plan.op} would not build without it"


def _apply(old: list[str], new: list[str], accepted: list[patch.Opcode]) -> bytes:
    """OLD with only the ACCEPTED replacements from NEW (non-overlapping opcodes of one diff)."""
    pieces, cursor = [], 0
    for _, i1, i2, j1, j2 in sorted(accepted, key=lambda op: op[1]):
        pieces += old[cursor:i1] + new[j1:j2]
        cursor = i2
    return "".join(pieces + old[cursor:]).encode()
