"""Render a plan as one unified diff that `git apply` (and `patch -p1`) accept."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from codemod.plan.plan import FileChange

CONTEXT_LINES = 3
_NO_NEWLINE = "\\ No newline at end of file\n"
Opcode = tuple[str, int, int, int, int]  # difflib: tag, i1, i2, j1, j2


def render(changes: tuple[FileChange, ...]) -> str:
    return "".join(_file_diff(change) for change in changes if change.before != change.after)


def lines(change: FileChange) -> tuple[list[str], list[str]]:
    """The file's lines before and after, with their line ends."""
    return (change.before or b"").decode().splitlines(keepends=True), change.after.decode().splitlines(keepends=True)


@dataclass(frozen=True)
class Hunk:
    text: str  # "@@ -a,b +c,d @@" and its lines, as in the rendered diff
    opcodes: tuple[Opcode, ...]  # what it changes: difflib's non-equal opcodes, in line numbers of the two sides


def hunks(change: FileChange) -> list[Hunk]:
    """The hunks of the file's diff, each with the opcodes it applies (the grouping unified_diff itself makes)."""
    old, new = lines(change)
    groups = difflib.SequenceMatcher(None, old, new).get_grouped_opcodes(CONTEXT_LINES)
    texts = re.split(r"(?m)^(?=@@ )", _file_diff(change))[1:]  # hunk bodies start with " ", "+" or "-"
    return [Hunk(text, tuple(op for op in group if op[0] != "equal")) for text, group in zip(texts, groups, strict=True)]


def _file_diff(change: FileChange) -> str:
    old, new = lines(change)
    created = change.before is None
    rendered = difflib.unified_diff(old, new, "/dev/null" if created else f"a/{change.path}", f"b/{change.path}", n=CONTEXT_LINES)
    out = [f"diff --git a/{change.path} b/{change.path}\n"]
    if created:
        out.append("new file mode 100644\n")
    for line in rendered:
        out.append(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE)
    return "".join(out)


@dataclass(frozen=True)
class FileStat:
    path: str
    added: int  # lines
    removed: int
    hunks: int
    created: bool


def stat(changes: tuple[FileChange, ...]) -> list[FileStat]:
    """Lines added and removed, and hunks, per changed file."""
    rows = []
    for change in changes:
        diff_lines = _file_diff(change).splitlines()
        rows.append(
            FileStat(
                change.path,
                added=sum(line.startswith("+") and not line.startswith("+++") for line in diff_lines),
                removed=sum(line.startswith("-") and not line.startswith("---") for line in diff_lines),
                hunks=sum(line.startswith("@@") for line in diff_lines),
                created=change.before is None,
            )
        )
    return rows
