"""A full PyTorch checkout's own build, for `codemod build --checkout`."""
from __future__ import annotations

import os
import subprocess
import sys

from codemod.model import progress
from codemod.model.errors import VerificationFailed
from codemod.model.tree import Tree

# A real PyTorch checkout builds itself with these (see docs/real-trees.md); the harness needs none of them.
# The lab's flags: per-operator headers off, since the hand-written at::OP is declared in Functions.h.
CHECKOUT_BUILD_ENV = {"REL_WITH_DEB_INFO": "1", "USE_PER_OPERATOR_HEADERS": "0", "USE_DISTRIBUTED": "0", "USE_CUDA": "0"}
CHECKOUT_BUILD = " ".join(f"{name}={value}" for name, value in CHECKOUT_BUILD_ENV.items()) + " python setup.py develop"


def is_checkout(tree: Tree) -> bool:
    """A full PyTorch checkout, not our slim target_tree/ or a tree unpacked from the wheel."""
    return tree.path("setup.py").is_file() and tree.path("CMakeLists.txt").is_file()


def has_build_dir(tree: Tree) -> bool:
    """The checkout was configured and built before (CMake's cache is there): an incremental build is possible."""
    return tree.path("build/CMakeCache.txt").is_file()


def build_checkout(tree: Tree) -> None:
    """The checkout's own incremental build, its output streamed to the terminal."""
    command = [sys.executable, "setup.py", "develop"]
    progress.command(command)
    result = subprocess.run(command, cwd=tree.root, env={**os.environ, **CHECKOUT_BUILD_ENV})
    if result.returncode != 0:
        raise VerificationFailed(f"the checkout's build failed (exit {result.returncode}; its output is above): cd {tree.root} && {CHECKOUT_BUILD}")
