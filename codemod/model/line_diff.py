"""Line diffs, the one matcher every diff of ours comes from (the patch, revert's rebase, the compile check).

difflib's SequenceMatcher without its autojunk heuristic, which on files of 200+ lines treats frequent lines (blank
lines, `}`) as junk and inflates a 2-line change into a +6/-6 hunk. The lines both sides begin and end with are
equal before difflib looks, as git's xdiff does: its matcher pairs each line with every copy of it (seconds on
native_functions.yaml), and a bypass changes a few entries of a file.
"""
from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence

Opcode = tuple[str, int, int, int, int]  # difflib: tag, i1, i2, j1, j2


def opcodes(old: Sequence[Hashable], new: Sequence[Hashable]) -> list[Opcode]:
    """difflib's opcodes turning OLD into NEW, equal stretches included, as SequenceMatcher.get_opcodes() gives them."""
    shorter = min(len(old), len(new))
    same = next((i for i in range(shorter) if old[i] != new[i]), shorter)
    tail = next((i for i in range(shorter - same) if old[-1 - i] != new[-1 - i]), shorter - same)
    middle = difflib.SequenceMatcher(None, old[same : len(old) - tail], new[same : len(new) - tail], autojunk=False)
    # the middle begins and ends with a difference, so its opcodes need no merging with the equal ends
    return [
        *([("equal", 0, same, 0, same)] if same else []),
        *((tag, i1 + same, i2 + same, j1 + same, j2 + same) for tag, i1, i2, j1, j2 in middle.get_opcodes()),
        *([("equal", len(old) - tail, len(old), len(new) - tail, len(new))] if tail else []),
    ]


def changes(old: Sequence[Hashable], new: Sequence[Hashable]) -> list[Opcode]:
    """The opcodes that change something: difflib's hunks turning OLD into NEW."""
    return [op for op in opcodes(old, new) if op[0] != "equal"]
