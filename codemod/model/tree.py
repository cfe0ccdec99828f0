"""Locate a PyTorch-layout tree and the codegen that belongs to it.

A real checkout carries its own `torchgen/` and `tools/autograd/`; those are
used, never the installed ones. A slim tree (our `target_tree/`) falls back to
the installed torchgen and its packaged autograd codegen.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from codemod.model import paths
from codemod.model.errors import BadInput

NATIVE_FUNCTIONS = "aten/src/ATen/native/native_functions.yaml"
TAGS = "aten/src/ATen/native/tags.yaml"
TEMPLATES = "aten/src/ATen/templates"
NATIVE_SOURCES = "aten/src/ATen/native"
DERIVATIVES = "tools/autograd/derivatives.yaml"
GEN_VARIABLE_TYPE = "tools/autograd/gen_variable_type.py"
STATE_DIR = ".codemod"  # codemod's own: the journals, the transaction log
LOCK_FILE = ".codemod.lock"
_OWN_TORCHGEN = "torchgen/gen.py"
_OWN_AUTOGRAD = "tools/autograd/gen_autograd.py"

_REQUIRED = {
    NATIVE_FUNCTIONS: "the operator schema file torchgen reads",
    TAGS: "the operator tags file torchgen reads",
    TEMPLATES: "the codegen templates directory",
    DERIVATIVES: "the autograd formulas file",
}


@dataclass(frozen=True)
class Tree:
    root: Path
    has_own_torchgen: bool  # root/torchgen exists: run the tree's codegen
    has_own_autograd: bool  # root/tools/autograd/gen_autograd.py exists

    def path(self, relative: str) -> Path:
        return self.root / relative

    def rel(self, path: Path) -> str:
        """PATH under the root, named by its place in the tree: a symlink leading out of it keeps its own name."""
        return Path(os.path.abspath(path)).relative_to(self.root).as_posix()

    @property
    def aten_source_dir(self) -> Path:
        """The `-s` argument of `torchgen.gen`: the dir holding native/ and templates/."""
        return self.root / "aten/src/ATen"

    def python_env(self) -> dict[str, str]:
        """Environment for codegen subprocesses: the tree's own packages first."""
        env = dict(os.environ)
        if self.has_own_torchgen or self.has_own_autograd:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(self.root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            )
        return env

    @property
    def python(self) -> str:
        return sys.executable


def locate(root: str | os.PathLike[str]) -> Tree:
    """The tree holding ROOT: ROOT itself or its nearest parent with the operator schema file, as git finds
    its work tree from a subdirectory. Validated at the edge: every file the pipeline reads must exist."""
    given = paths.name_checked(Path(root).absolute(), "--tree").resolve()
    if not given.is_dir():
        raise BadInput(f"{root}: no such directory; pass --tree the root of a PyTorch checkout")
    # os.path's probes, not pathlib's: a symlink there leading to an over-long name is refused below, not raised
    resolved = next((d for d in (given, *given.parents) if os.path.lexists(d / NATIVE_FUNCTIONS)), None)  # a directory there is refused below
    if resolved is None:
        raise BadInput(_where_a_tree_is(given))
    for relative, what in _REQUIRED.items():
        path = resolved / relative
        if not os.path.lexists(path):
            raise BadInput(
                f"{path}: missing ({what}); "
                "--tree must point at the root of a PyTorch checkout"
            )
        if relative == TEMPLATES and not os.path.isdir(path):
            raise BadInput(f"{path}: not a directory, but it must be {what}; put the real one there and run again")
        if relative != TEMPLATES:
            paths.regular_file(path, what)
    own = _own_codegen(resolved)
    return Tree(root=resolved, has_own_torchgen=own, has_own_autograd=own)


def _own_codegen(root: Path) -> bool:
    """Whether the tree's codegen is its own (torchgen/ and tools/autograd/, of one release: a checkout, or what `tree
    from-torch` writes) or the installed torch's (neither). One without the other would run one release's code on the
    other's inputs (the installed autograd codegen on the tree's torchgen, the tree's on the installed one's): refused."""
    own = {relative: os.path.isfile(root / relative) for relative in (_OWN_TORCHGEN, _OWN_AUTOGRAD)}
    if own[_OWN_TORCHGEN] == own[_OWN_AUTOGRAD]:
        return own[_OWN_TORCHGEN]
    missing = next(relative for relative, present in own.items() if not present)
    other = "torchgen/" if missing == _OWN_AUTOGRAD else "tools/autograd/'s Python code (keep derivatives.yaml)"
    raise BadInput(
        f"{root / missing}: missing, but the tree has {other.split(' (')[0]}: its codegen is either its own (torchgen/ and "
        "tools/autograd/'s codegen, of one release) or the installed torch's (neither); restore the missing file from that "
        f"release, or remove {other} to run the installed torch's"
    )


def trees_below(directory: Path) -> list[Path]:
    """The trees directly below DIRECTORY (`./target_tree` in a clone of codemod)."""
    return [d for d in sorted(directory.iterdir()) if d.is_dir() and (d / NATIVE_FUNCTIONS).is_file()]


def _where_a_tree_is(given: Path) -> str:
    """Why GIVEN is in no tree, and where one is: a tree directly below it, or for an installed torch (which ships
    no native_functions.yaml), the tree `codemod tree from-torch` writes from it."""
    missing = f"no {NATIVE_FUNCTIONS} in {given} or any directory above it"
    below = trees_below(given)
    if below:
        return f"{missing}; {' or '.join(f'--tree {_as_typed(d)}' for d in below)} is a tree directly below it: pass that"
    installed = next((d for d in (given / "torch", given, *given.parents) if _is_installed_torch(d)), None)
    if installed is not None:
        return (f"{given} is in the installed torch package {installed}, which ships no {NATIVE_FUNCTIONS}; write a "
                "PyTorch-layout tree from it with `codemod tree from-torch DEST`, then pass --tree DEST")
    return f"{missing}; run codemod inside a PyTorch checkout or pass --tree its root"


def _is_installed_torch(directory: Path) -> bool:
    """A torch package as pip installs it: its version.py and its libraries (a checkout's torch/ has neither until built,
    and a built one is found as a tree from its root)."""
    return directory.name == "torch" and (directory / "version.py").is_file() and (directory / "lib").is_dir()


def _as_typed(path: Path) -> str:
    """PATH as the user would type it from here: `./target_tree` below the current directory, else absolute."""
    relative = os.path.relpath(path)
    return f"./{relative}" if not relative.startswith("..") else str(path)


def inside(root: Path, rel_path: object, where: str) -> Path:
    """ROOT/REL_PATH with its symlinks resolved, which must lie inside ROOT: a path read from a journal or a
    transaction log is data, never an instruction to touch anything else (no absolute path, no `..`, no
    symlink leading out). WHERE names the entry in the error."""
    if not isinstance(rel_path, str) or not rel_path or "\0" in rel_path:
        raise BadInput(f"{where}: {rel_path!r} is not a tree-relative path; nothing was written")
    relative = Path(rel_path)
    if relative.is_absolute() or ".." in relative.parts:
        raise BadInput(f"{where}: {rel_path!r} points outside the tree {root}; nothing was written")
    resolved = (root / relative).resolve()
    if not resolved.is_relative_to(root):
        raise BadInput(f"{where}: {rel_path!r} resolves to {resolved}, outside the tree {root} (a symlink?); nothing was written")
    return resolved
