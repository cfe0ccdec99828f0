"""The one edit type every planner returns, and the splice that applies it.

An edit replaces a byte span of the original file with new text; bytes outside
the spans are never touched, so a plan's diff is exactly its edits.
"""
from __future__ import annotations

from dataclasses import dataclass

from codemod.model.errors import BadInput


@dataclass(frozen=True)
class Edit:
    path: str  # tree-relative, POSIX separators
    start: int  # byte offset into the original file
    end: int  # byte offset, exclusive; start == end inserts
    text: str  # replacement
    why: str  # one line shown in the summary

    @property
    def is_insertion(self) -> bool:
        return self.start == self.end


def apply_edits(original: bytes, edits: list[Edit]) -> bytes:
    """Splice non-overlapping edits of one file into its original bytes."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    pieces: list[bytes] = []
    cursor = 0
    for edit in ordered:
        if edit.start < cursor:
            raise BadInput(
                f"{edit.path}: two edits overlap at byte {edit.start} ({edit.why!r}); "
                "this is a planner bug, please report it"
            )
        pieces.append(original[cursor : edit.start])
        pieces.append(edit.text.encode())
        cursor = edit.end
    pieces.append(original[cursor:])
    return b"".join(pieces)


def line_starts(data: bytes) -> list[int]:
    """Byte offset where each line starts, plus the end of the data as a last sentinel."""
    starts = [0]
    position = data.find(b"\n")
    while position != -1:
        starts.append(position + 1)
        position = data.find(b"\n", position + 1)
    if starts[-1] != len(data):
        starts.append(len(data))
    return starts
