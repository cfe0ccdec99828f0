"""A scratch copy of a tree to plan on without writing the tree: hard links for the files left alone (a real
checkout copies in seconds), and changed files replaced, never written through a link."""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from codemod.apply.lock import LOCK_FILE
from codemod.apply.transaction import STATE_DIR
from codemod.model.tree import Tree, locate

if TYPE_CHECKING:
    from codemod.plan.plan import FileChange


@contextmanager
def copy_of(tree: Tree, prefix: str) -> Iterator[Tree]:
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch_dir:
        scratch = Path(scratch_dir) / "tree"
        ignored = shutil.ignore_patterns(".git", STATE_DIR, LOCK_FILE)
        shutil.copytree(tree.root, scratch, symlinks=True, ignore=ignored, copy_function=_link_or_copy)
        yield locate(scratch)


def write(scratch: Tree, changes: tuple[FileChange, ...]) -> None:
    for change in changes:
        target = scratch.path(change.path)
        target.unlink(missing_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(change.after)


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, destination)
