"""Undo a bypass's own hunks in a file edited since: a line-based three-way merge.

BEFORE is the file before the bypass, AFTER what the bypass wrote, CURRENT the
file now. The bypass's hunks (BEFORE -> AFTER) are located in CURRENT through
the unchanged lines of AFTER -> CURRENT; each is undone when no later change
overlaps it. A later change that only touches a hunk's edge (lines right
before or after it) does not overlap, except an insertion at the very place
where the bypass deleted lines: which side they go back to is ambiguous.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from codemod.apply import patch

Opcode = tuple[str, int, int, int, int]  # difflib: tag, i1, i2, j1, j2


@dataclass(frozen=True)
class Conflict:
    line: int  # 1-based, in the current file
    bypass_hunk: str  # what the bypass changed there, as a diff
    later_hunk: str  # the later change overlapping it, as a diff


@dataclass(frozen=True)
class Undone:
    data: bytes | None  # None when there are conflicts
    conflicts: tuple[Conflict, ...]


def lines(data: bytes) -> list[bytes]:
    return re.findall(rb"[^\n]*\n|[^\n]+$", data)


def undo(before: bytes, after: bytes, current: bytes) -> Undone:
    old, new, now = lines(before), lines(after), lines(current)
    own = _changes(old, new)
    later = _changes(new, now)
    for index, op in enumerate(later):
        later[index] = _slid_clear_of(op, later, own, new, now)
    conflicts, splices = [], []
    for _, b1, b2, a1, a2 in own:
        overlapping = [op for op in later if _overlap(a1, a2, op[1], op[2])]
        if overlapping:
            conflicts.extend(_conflict(old, new, now, (b1, b2, a1, a2), op) for op in overlapping)
            continue
        start = _line_in_current(later, a1)
        end = start if a1 == a2 else _line_in_current(later, a2 - 1) + 1
        splices.append((start, end, old[b1:b2]))
    if conflicts:
        return Undone(None, tuple(conflicts))
    for start, end, restored in reversed(splices):
        now[start:end] = restored
    return Undone(b"".join(now), ())


def _changes(a: list[bytes], b: list[bytes]) -> list[Opcode]:
    """The (sorted) hunks turning A into B, in A's and B's line numbers."""
    return [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]


def _slid_clear_of(op: Opcode, later: list[Opcode], own: list[Opcode], new: list[bytes], now: list[bytes]) -> Opcode:
    """A later pure deletion or insertion moved, among the places diff could equally have put it, off the bypass's hunks.

    Removing a block between two equal lines (a blank line, say) can be written as removing either
    the block's first line or the line after it: difflib picks one, which may be a line of a bypass
    hunk next to it. Slide only through unchanged lines, nearest place first."""
    tag, c1, c2, j1, j2 = op
    if tag not in ("delete", "insert") or not any(_overlap(o[3], o[4], c1, c2) for o in own):
        return op
    block = new if tag == "delete" else now
    low, high = (c1, c2) if tag == "delete" else (j1, j2)  # the block's lines in BLOCK
    previous = max((o[2] for o in later if o[2] <= c1 and o is not op), default=0)
    following = min((o[1] for o in later if o[1] >= c2 and o is not op), default=len(new))
    up = 0
    while c1 - up > previous and low - up > 0 and block[low - up - 1] == block[high - up - 1]:
        up += 1
    down = 0
    while c2 + down < following and high + down < len(block) and block[low + down] == block[high + down]:
        down += 1
    for shift in sorted(range(-up, down + 1), key=abs):
        if not any(_overlap(o[3], o[4], c1 + shift, c2 + shift) for o in own):
            return (tag, c1 + shift, c2 + shift, j1 + shift, j2 + shift)
    return op


def _overlap(a1: int, a2: int, c1: int, c2: int) -> bool:
    """Do the AFTER ranges [a1, a2) (the bypass's) and [c1, c2) (a later change's) overlap?"""
    if a1 == a2 and c1 == c2:
        return a1 == c1  # both insert at one place: their order is ambiguous
    if a1 == a2:
        return c1 < a1 < c2
    if c1 == c2:
        return a1 < c1 < a2
    return max(a1, c1) < min(a2, c2)


def _line_in_current(later: list[Opcode], line: int) -> int:
    """Where line LINE of AFTER (or the end, len(AFTER)) is in CURRENT: unchanged, or the first line of a later change."""
    offset = 0
    for _, c1, c2, j1, j2 in later:
        if c1 <= line < c2:
            return j1
        if c2 <= line:
            offset = j2 - c2
    return line + offset


def _conflict(old: list[bytes], new: list[bytes], now: list[bytes], hunk: tuple[int, int, int, int], later: Opcode) -> Conflict:
    b1, b2, a1, a2 = hunk
    _, c1, c2, j1, j2 = later
    return Conflict(
        line=j1 + 1,
        bypass_hunk=unified_diff(old[b1:b2], new[a1:a2], "before the bypass", "what the bypass wrote", context=0),
        later_hunk=unified_diff(new[c1:c2], now[j1:j2], "what the bypass wrote", "now", context=0),
    )


def unified_diff(a: list[bytes], b: list[bytes], a_name: str, b_name: str, context: int = 3) -> str:
    text = patch.unified_diff([x.decode(errors="replace") for x in a], [x.decode(errors="replace") for x in b], a_name, b_name, context)
    return "".join(line if line.endswith("\n") else line + "\n" for line in text)
