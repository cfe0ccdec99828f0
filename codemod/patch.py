"""Render a plan as one unified diff that `git apply` (and `patch -p1`) accept."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from codemod.plan import FileChange

_NO_NEWLINE = "\\ No newline at end of file\n"


def render(changes: tuple[FileChange, ...]) -> str:
    return "".join(_file_diff(change) for change in changes if change.before != change.after)


def _file_diff(change: FileChange) -> str:
    old = (change.before or b"").decode().splitlines(keepends=True)
    new = change.after.decode().splitlines(keepends=True)
    created = change.before is None
    lines = difflib.unified_diff(old, new, "/dev/null" if created else f"a/{change.path}", f"b/{change.path}", n=3)
    out = [f"diff --git a/{change.path} b/{change.path}\n"]
    if created:
        out.append("new file mode 100644\n")
    for line in lines:
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
        lines = _file_diff(change).splitlines()
        rows.append(
            FileStat(
                change.path,
                added=sum(line.startswith("+") and not line.startswith("+++") for line in lines),
                removed=sum(line.startswith("-") and not line.startswith("---") for line in lines),
                hunks=sum(line.startswith("@@") for line in lines),
                created=change.before is None,
            )
        )
    return rows
