"""Take one step out of a file's history, keeping every later step: what `revert OP` does to a file.

A file's history is its states in order: before a bypass, after it, then what
happened since (a user's edit, another op's bypass, ...). Each step is a set of
byte spans replaced (derived from its two states). Removing step X means
replaying every later step on the state X started from: each later span is
moved across X's spans (the bytes X wrote are taken out, what it replaced put
back), and X's spans are moved across it in turn, for the next step. A later
span that cuts into X's own bytes conflicts; spans that only touch X's at an
edge are placed by a fixed rule, and the result is checked: putting X back in
must give the later state exactly.

So ops bypassed in any order revert in any order, byte for byte: another op's
bypass is a step of its own, never mistaken for a user's edit, and its journal
is rewritten to the state without X (see journal.py).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from codemod.apply import patch

Span = tuple[int, int, bytes]  # [start, end) of the base, and the bytes that replace it


@dataclass(frozen=True)
class Step:
    name: str  # who made it: an op, or "edits since" (a user)
    before: bytes
    after: bytes


@dataclass(frozen=True)
class Clash:
    step: str  # the later step whose span cuts into X's bytes
    index: int  # its place among the later steps
    line: int  # 1-based, in the state that step left
    later_hunk: str  # that step's change there, as a diff


class Conflict(Exception):
    def __init__(self, clash: Clash) -> None:
        super().__init__(f"{clash.step} changed line {clash.line}, inside the bypass's own lines")
        self.clash = clash


def spans(base: bytes, result: bytes) -> list[Span]:
    """Line-aligned spans turning BASE into RESULT."""
    old, new = lines(base), lines(result)
    old_at, new_at = _offsets(old), _offsets(new)
    return [
        (old_at[i1], old_at[i2], result[new_at[j1] : new_at[j2]])
        for _, i1, i2, j1, j2 in changes(old, new)
    ]


def apply(base: bytes, edits: list[Span]) -> bytes:
    pieces, cursor = [], 0
    for start, end, text in sorted(edits, key=lambda s: (s[0], s[1])):
        pieces += [base[cursor:start], text]
        cursor = end
    return b"".join(pieces + [base[cursor:]])


def without(removed: Step, later: list[Step]) -> list[bytes]:
    """The states after each step of LATER when REMOVED had never happened (raises Conflict).

    LATER[0].before is REMOVED.after; each later step starts where the previous one ended."""
    taken_out = spans(removed.after, removed.before)  # X's spans, in the coordinates of the current state
    state, states = removed.before, []
    for index, step in enumerate(later):
        moved, taken_out = _transform(step, index, spans(step.before, step.after), taken_out)
        state = apply(state, moved)
        placed = apply(step.after, taken_out)
        if placed != state:  # the check of every rebase: its spans sit so close to X's that their order is lost
            at = next((i for i, (a, b) in enumerate(zip(placed, state)) if a != b), min(len(placed), len(state)))
            raise Conflict(Clash(step.name, index, state[:at].count(b"\n") + 1, "  (its lines and the bypass's cannot be told apart here)\n"))
        states.append(state)
    return states


def _transform(step: Step, index: int, edits: list[Span], taken_out: list[Span]) -> tuple[list[Span], list[Span]]:
    """EDITS moved to the base without the TAKEN_OUT spans, and TAKEN_OUT moved to the base after EDITS."""
    grown = 0  # how far the edits before this one moved the text after them
    for start, end, text in edits:
        for out_start, out_end, _ in taken_out:
            if _cuts_into(start, end, out_start, out_end):
                raise Conflict(_clash(step, index, start, end, text, start + grown))
        grown += len(text) - (end - start)
    moved = [(start + _shift(taken_out, start, end), end + _shift(taken_out, start, end), text) for start, end, text in edits]
    carried = []
    for out_start, out_end, original in taken_out:
        shift = sum(len(text) - (end - start) for start, end, text in edits if _before(start, end, out_start, out_end))
        carried.append((out_start + shift, out_end + shift, original))
    return moved, carried


def _cuts_into(start: int, end: int, out_start: int, out_end: int) -> bool:
    """Does the later span [start, end) reach inside X's bytes [out_start, out_end) (not just touch an edge)?"""
    if start == end and out_start == out_end:
        return False
    if start == end:
        return out_start < start < out_end
    if out_start == out_end:
        return start < out_start < end
    return max(start, out_start) < min(end, out_end)


def _before(start: int, end: int, out_start: int, out_end: int) -> bool:
    """A later span that does not cut into X's is before or after it; an insertion where X only
    removed bytes goes after what X's removal puts back."""
    return end <= out_start and not (start == end == out_start == out_end)


def _shift(taken_out: list[Span], start: int, end: int) -> int:
    """How far taking X's spans out moves the later span [start, end)."""
    return sum(len(original) - (out_end - out_start) for out_start, out_end, original in taken_out if not _before(start, end, out_start, out_end))


def _offsets(lines: list[bytes]) -> list[int]:
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return offsets


def _clash(step: Step, index: int, start: int, end: int, text: bytes, at: int) -> Clash:
    """The later step's span [START, END) of its base, which it replaced by TEXT, now at AT in the state it left."""
    before, after = lines(step.before[start:end]), lines(text)
    return Clash(step.name, index, step.after[:at].count(b"\n") + 1, unified_diff(before, after, "before", "after", context=0))


def lines(data: bytes) -> list[bytes]:
    return re.findall(rb"[^\n]*\n|[^\n]+$", data)


def changes(a: list[bytes], b: list[bytes]) -> list[tuple[str, int, int, int, int]]:
    """difflib's hunks turning A into B (tag, i1, i2, j1, j2), in A's and B's line numbers."""
    return [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]


def unified_diff(a: list[bytes], b: list[bytes], a_name: str, b_name: str, context: int = 3) -> str:
    text = patch.unified_diff([x.decode(errors="replace") for x in a], [x.decode(errors="replace") for x in b], a_name, b_name, context)
    return "".join(line if line.endswith("\n") else line + "\n" for line in text)
