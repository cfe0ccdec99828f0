"""Render a plan as one unified diff that `git apply` (and `patch -p1`) accept."""
from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemod.model import line_diff
from codemod.model.line_diff import Opcode

if TYPE_CHECKING:  # annotations only: rendering a diff needs none of the planner
    from codemod.plan.plan import FileChange

CONTEXT_LINES = 3
_NO_NEWLINE = "\\ No newline at end of file\n"


def render(changes: tuple[FileChange, ...]) -> str:
    return "".join(_file_diff(change) for change in changes if change.before != change.after)


def lines(change: FileChange) -> tuple[list[str], list[str]]:
    """The file's lines before and after, with their line ends."""
    return (change.before or b"").decode().splitlines(keepends=True), change.after.decode().splitlines(keepends=True)


@dataclass(frozen=True)
class Hunk:
    text: str  # "@@ -a,b +c,d @@" and its lines, as in the rendered diff
    opcodes: tuple[Opcode, ...]  # what it changes: difflib's non-equal opcodes, in line numbers of the two sides


def _grouped_opcodes(old: list[str], new: list[str], context: int) -> list[list[Opcode]]:
    """difflib's hunks of line_diff's opcodes."""
    whole = difflib.SequenceMatcher(None, old, new, autojunk=False)
    whole.opcodes = line_diff.opcodes(old, new)  # get_opcodes() returns what it holds: difflib groups these into hunks
    return list(whole.get_grouped_opcodes(context))


def unified_diff(old: list[str], new: list[str], from_name: str, to_name: str, context: int = CONTEXT_LINES) -> Iterator[str]:
    """difflib.unified_diff's lines, from the matcher every hunk of ours comes from (patch, -i, three-way revert)."""
    groups = _grouped_opcodes(old, new, context)
    if not groups:
        return
    yield f"--- {from_name}\n"
    yield f"+++ {to_name}\n"
    for group in groups:
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        yield f"@@ -{_line_range(i1, i2)} +{_line_range(j1, j2)} @@\n"
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                yield from (" " + line for line in old[a1:a2])
                continue
            yield from ("-" + line for line in old[a1:a2])
            yield from ("+" + line for line in new[b1:b2])


def _line_range(start: int, stop: int) -> str:
    """A hunk side as unified diffs write it: first line (1-based; the line before an empty side) and count."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def hunks(change: FileChange) -> list[Hunk]:
    """The hunks of the file's diff, each with the opcodes it applies (the grouping unified_diff itself makes)."""
    old, new = lines(change)
    groups = _grouped_opcodes(old, new, CONTEXT_LINES)
    texts = re.split(r"(?m)^(?=@@ )", _file_diff(change))[1:]  # hunk bodies start with " ", "+" or "-"
    return [Hunk(text, tuple(op for op in group if op[0] != "equal")) for text, group in zip(texts, groups, strict=True)]


@functools.lru_cache(maxsize=64)  # a command renders, counts (stat) and reports one change: one diff (seconds on the yaml)
def _file_diff(change: FileChange) -> str:
    old, new = lines(change)
    created = change.before is None
    rendered = unified_diff(old, new, "/dev/null" if created else f"a/{change.path}", f"b/{change.path}")
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
