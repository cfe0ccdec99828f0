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

Where a span sits is the line diff's choice among equal places: a block
inserted or deleted next to a line equal to its own last line may as well
start one line earlier. In files of neighbouring blocks that end alike
(derivatives.yaml is nothing but entries ending in the same blank line; C++
functions end in `}` and a blank line) the diff may draw a bypass's span
across its neighbour's, making touching hunks overlap, or even a line of the
neighbour the bypass's. So each span is drawn where the same change starts
and ends on block edges (a blank line or the file's edge above each end, an
unindented line below it), as a bypass writes and deletes whole blocks.

So ops bypassed in any order revert in any order, byte for byte: another op's
bypass is a step of its own, never mistaken for a user's edit, and its journal
is rewritten to the state without X (see journal.py).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from codemod.apply import patch
from codemod.model import line_diff

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
    """A step's changes that cut into the bypass's lines: every one of them (CLASH is the first)."""

    def __init__(self, *clashes: Clash) -> None:
        super().__init__(f"{clashes[0].step} changed line {clashes[0].line}, inside the bypass's own lines")
        self.clash, self.clashes = clashes[0], clashes


def spans(base: bytes, result: bytes) -> list[Span]:
    """Line-aligned spans turning BASE into RESULT."""
    old, new = lines(base), lines(result)
    old_at, new_at = _offsets(old), _offsets(new)
    return [
        (old_at[i1], old_at[i2], result[new_at[j1] : new_at[j2]])
        for _, i1, i2, j1, j2 in line_diff.changes(old, new)
    ]


def apply(base: bytes, edits: list[Span]) -> bytes:
    pieces, cursor = [], 0
    for start, end, text in sorted(edits, key=lambda s: (s[0], s[1])):
        pieces += [base[cursor:start], text]
        cursor = end
    return b"".join(pieces + [base[cursor:]])


def without(removed: Step, later: list[Step], drop_last: bool = False) -> tuple[list[bytes], list[Clash]]:
    """The states after each step of LATER when REMOVED had never happened (raises Conflict), and what was dropped.

    LATER[0].before is REMOVED.after; each later step starts where the previous one ended. DROP_LAST (--force): the
    last step's spans that cut into REMOVED's bytes are dropped, each reported as a Clash, and its others kept."""
    taken_out = spans(removed.after, removed.before)  # X's spans, in the coordinates of the current state
    state, states, dropped = removed.before, [], []
    for index, step in enumerate(later):
        edits, taken_out = _on_edges(step.before, spans(step.before, step.after)), _on_edges(step.before, taken_out)
        clashes = _clashes(step, index, edits, taken_out)
        if clashes and not (drop_last and index == len(later) - 1):
            raise Conflict(*(clash for _, clash in clashes))
        after = step.after
        if clashes:
            cut = {edit for edit, _ in clashes}
            edits = [edit for edit in edits if edit not in cut]
            after, dropped = apply(step.before, edits), [clash for _, clash in clashes]
        moved, taken_out = _transform(edits, taken_out)
        state = apply(state, moved)
        placed = apply(after, taken_out)
        if placed != state:  # the check of every rebase: its spans sit so close to X's that their order is lost
            at = next((i for i, (a, b) in enumerate(zip(placed, state)) if a != b), min(len(placed), len(state)))
            raise Conflict(Clash(step.name, index, state[:at].count(b"\n") + 1, "  (its lines and the bypass's cannot be told apart here)\n"))
        states.append(state)
    return states, dropped


def _clashes(step: Step, index: int, edits: list[Span], taken_out: list[Span]) -> list[tuple[Span, Clash]]:
    """The spans of EDITS (STEP's) that cut into X's bytes, each with its Clash."""
    found, grown = [], 0  # grown: how far the edits before this one moved the text after them
    for edit in edits:
        start, end, text = edit
        if any(_cuts_into(edit, out) for out in taken_out):
            found.append((edit, _clash(step, index, start, end, text, start + grown)))
        grown += len(text) - (end - start)
    return found


def _on_edges(base: bytes, drawn: list[Span]) -> list[Span]:
    """DRAWN (spans of one step on BASE), each moved to the equal place whose ends sit best on block edges."""
    drawn = list(drawn)
    for index, span in enumerate(drawn):
        places = [span, *_slides(base, span)]
        drawn[index] = min((p for p in places if _parted_from_rest(p, drawn, index)), key=lambda p: _off_edges(base, p))
    return drawn


def _off_edges(base: bytes, span: Span) -> int:
    """How far SPAN's two ends are from block edges: 0 when a blank line (or the file's start) is above each end and
    an unindented line (or the file's end) below it; a blank line below, or indentation, counts against."""
    start, end, text = span
    inside = lines(text or base[start:end])
    above = base[base.rfind(b"\n", 0, start - 1) + 1 : start] if start else b""
    below = base[end : base.find(b"\n", end) + 1 or len(base)]
    return _edge(above, inside[0]) + _edge(inside[-1], below)


def _edge(above: bytes, below: bytes) -> int:
    if not below:
        return 0
    if not below.strip():
        return 2 + (above.strip() != b"")
    return len(below) - len(below.lstrip(b" \t")) + (above.strip() != b"")


def _parted_from_rest(span: Span, own: list[Span], index: int) -> bool:
    """Is SPAN at least a byte away from every span of OWN but the one at INDEX (the spans of one step never meet)?"""
    return all(span[1] < other[0] or other[1] < span[0] for k, other in enumerate(own) if k != index)


def _slides(base: bytes, span: Span) -> list[Span]:
    """SPAN's change drawn one, two, ... lines up and down (nearest first), as far as BASE's lines allow."""
    ups, downs = [], []
    for move, found in ((_up, ups), (_down, downs)):
        moved = move(base, span)
        while moved is not None:
            found.append(moved)
            moved = move(base, moved)
    return [slid for pair in itertools.zip_longest(ups, downs) for slid in pair if slid is not None]


def _up(base: bytes, span: Span) -> Span | None:
    """SPAN one line up: possible when the line above equals the last line of what it replaces and of its text."""
    start, end, text = span
    line = base[base.rfind(b"\n", 0, start - 1) + 1 : start] if start else b""
    if not line or not all(part in (b"", line) or part.endswith(b"\n" + line) for part in (base[start:end], text)):
        return None
    return start - len(line), end - len(line), line + text[: len(text) - len(line)] if text else b""


def _down(base: bytes, span: Span) -> Span | None:
    """SPAN one line down: possible when the line below equals the first line of what it replaces and of its text."""
    start, end, text = span
    line = base[end : base.find(b"\n", end) + 1]  # empty at the end, or on a last line without a newline
    if not line or not all(part == b"" or part.startswith(line) for part in (base[start:end], text)):
        return None
    return start + len(line), end + len(line), text[len(line) :] + line if text else b""


def _transform(edits: list[Span], taken_out: list[Span]) -> tuple[list[Span], list[Span]]:
    """EDITS moved to the base without the TAKEN_OUT spans, and TAKEN_OUT moved to the base after EDITS."""
    moved = [(start + _shift(taken_out, start, end), end + _shift(taken_out, start, end), text) for start, end, text in edits]
    carried = []
    for out_start, out_end, original in taken_out:
        shift = sum(len(text) - (end - start) for start, end, text in edits if _before(start, end, out_start, out_end))
        carried.append((out_start + shift, out_end + shift, original))
    return moved, carried


def _cuts_into(span: Span, other: Span) -> bool:
    """Does SPAN reach inside OTHER (not just touch an edge), or OTHER inside SPAN?"""
    (start, end, _), (out_start, out_end, _) = span, other
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


def unified_diff(a: list[bytes], b: list[bytes], a_name: str, b_name: str, context: int = 3) -> str:
    text = patch.unified_diff([x.decode(errors="replace") for x in a], [x.decode(errors="replace") for x in b], a_name, b_name, context)
    return "".join(line if line.endswith("\n") else line + "\n" for line in text)
