"""One validator for op names, before a name becomes a file name (`.codemod/OP.json`) or reaches the planner.

An op name is an identifier, optionally with one `.overload` (which the planner then
refuses with the op name to use instead); nothing that could be a path.
"""
from __future__ import annotations

import re

from codemod.model.errors import BadInput

MAX_LENGTH = 128  # PyTorch's longest op names are under 70 characters; a file name may hold 255 bytes
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?")


def validated(name: str, where: str = "") -> str:
    """NAME, or BadInput naming WHERE (a journal, say) when it is not an op name."""
    if len(name) <= MAX_LENGTH and _OP_NAME.fullmatch(name):
        return name
    shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
    prefix = f"{where}: " if where else ""
    raise BadInput(
        f"{prefix}{shown} is not an op name (letters, digits and _, at most {MAX_LENGTH} characters, like mul or div); "
        "nothing was written"
    )
