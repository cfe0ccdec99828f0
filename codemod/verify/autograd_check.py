"""The tree's own autograd codegen accepts the tree as it is: checked while a bypass plans, before it writes.

What it refuses (an empty or `{}` derivatives.yaml) is bad input, not something the verification after writing
should find. The verdict is cached by the digest of everything the codegen reads, so the codegen runs once per
state of the tree: the verification after a bypass records the tree it leaves, where the next bypass starts, and a
`--dry-run` records the tree the bypass after it starts from.
"""
from __future__ import annotations

from pathlib import Path

import torchgen.packaged.autograd as packaged

from codemod.capture import codegen
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, Tree
from codemod.verify.cache import cache_dir, digest
from codemod.verify.captured import codegen_fingerprint


def check(tree: Tree) -> None:
    """BadInput when the tree's autograd codegen refuses the tree as it is."""
    verdict = _verdict(tree)
    if not verdict.is_file():
        codegen.check_autograd(tree)
        _publish(verdict)


def accepted(tree: Tree) -> None:
    """The tree's autograd codegen has just run clean on the tree as it is (the verification after a bypass)."""
    _publish(_verdict(tree))


def _verdict(tree: Tree) -> Path:
    autograd_dir = tree.path("tools/autograd") if tree.has_own_autograd else Path(packaged.__path__[0])
    parts: list[bytes | str] = [tree.path(NATIVE_FUNCTIONS).read_bytes(), tree.path(DERIVATIVES).read_bytes()]
    deprecated = tree.path("tools/autograd/deprecated.yaml")
    parts.append(deprecated.read_bytes() if deprecated.is_file() else b"")
    for path in sorted(p for p in autograd_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        parts += [path.relative_to(autograd_dir).as_posix(), path.read_bytes()]
    return cache_dir() / f"autograd-accepts-{digest(*parts, *codegen_fingerprint(tree))[:20]}"


def _publish(verdict: Path) -> None:
    verdict.parent.mkdir(parents=True, exist_ok=True)
    verdict.touch()  # empty: its name is the verdict
