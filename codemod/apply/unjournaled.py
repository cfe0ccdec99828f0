"""A tree patched with `bypass --dry-run`'s patch through `git apply`: the markers are there, the journal is not.

`status` names such ops (their markers, file:line). `revert OP --patch FILE` undoes one: the patch is
reverse-applied to a scratch copy, and OP is planned again on that candidate; only when the plan renders
exactly FILE (the patch is deterministic from the untouched tree) and the tree holds exactly what FILE
wrote are the candidate's files written back, in one transaction.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from codemod.apply import patch, scratch, targets, transaction
from codemod.model import paths as model_paths
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import NATIVE_SOURCES, TEMPLATES, Tree, inside
from codemod.plan.cpp import MARKED_OP

if TYPE_CHECKING:
    from codemod.plan.plan import FileChange

_SCANNED = (TEMPLATES, NATIVE_SOURCES)  # where every bypass leaves its markers
_PATCHED_FILE = re.compile(r"^diff --git a/(\S+) b/", re.M)


def markers(tree: Tree) -> dict[str, list[str]]:
    """Each op with a marker in the tree, and where (file:line)."""
    found: dict[str, list[str]] = {}
    for directory in _SCANNED:
        for path in sorted(p for p in tree.path(directory).rglob("*") if p.suffix in (".h", ".cpp", ".cu") and model_paths.walked_file(p)):
            data = path.read_bytes()
            for match in MARKED_OP.finditer(data):
                line = data.count(b"\n", 0, match.start()) + 1
                found.setdefault(match.group(1).decode(), []).append(f"{tree.rel(path)}:{line}")
    return found


def how_to_undo(tree: Tree, op: str, where: list[str]) -> str:
    shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
    return (
        f"{op} is patched in {tree.root} without a journal (markers at {shown}): the --dry-run patch applied with "
        f"`git apply`? Undo it with `codemod revert {op} --patch PATCH --tree {tree.root}` (checks PATCH is the bypass's "
        f"own patch, then restores every file), or `git apply -R PATCH` in the tree"
    )


def revert_with_patch(tree: Tree, op: str, patch_file: Path) -> list[str]:
    """Undo OP's patch PATCH_FILE in TREE after checking it is exactly the bypass of OP; the files restored."""
    from codemod.plan.plan import FileChange  # the planner and the yaml model: only this path of `status` needs them

    model_paths.regular_file(patch_file, "the patch of a bypass")
    try:
        text = targets.without_patch_header(patch_file.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"--patch {patch_file}: cannot read it ({error}); nothing was written")
    paths = _PATCHED_FILE.findall(text)
    if not paths:
        raise BadInput(f"--patch {patch_file}: not a patch (no `diff --git` header); nothing was written")
    for path in paths:
        inside(tree.root, path, f"--patch {patch_file}: file")
    with scratch.copy_of(tree, f"codemod-unpatch-{op}-") as candidate:
        scratch.write(candidate, tuple(FileChange(p, None, tree.path(p).read_bytes()) for p in paths if tree.path(p).is_file()))
        undone = subprocess.run(["git", "apply", "-R", str(patch_file.resolve())], cwd=candidate.root, capture_output=True, text=True, check=False)
        if undone.returncode != 0:
            raise VerificationFailed(f"--patch {patch_file} does not reverse-apply to {tree.root}: {undone.stderr.strip()}; nothing was written")
        plan = _plan_rendering(candidate, op, text)
        if plan is None:
            raise VerificationFailed(
                f"--patch {patch_file}: planning {op} on the tree without it does not give this patch (edited, or another "
                f"codemod version?); undo it with `git apply -R {patch_file}` in the tree; nothing was written"
            )
    edited = [c.path for c in plan if (tree.path(c.path).read_bytes() if tree.path(c.path).is_file() else None) != c.after]
    if edited:
        raise VerificationFailed(f"{', '.join(edited)}: changed since the patch was applied; undo it by hand; nothing was written")
    transaction.run(tree.root, transaction.Transaction(f"revert {op} --patch", tuple((c.path, c.before) for c in plan)))
    return [c.path for c in plan]


def _plan_rendering(candidate: Tree, op: str, text: str) -> tuple[FileChange, ...] | None:
    """The plain or guarded plan of OP on CANDIDATE whose patch is TEXT, if one is."""
    from codemod.plan.plan import make_plan

    for guarded in (False, True):
        try:
            changes = make_plan(candidate, op, guarded).changes
        except BadInput:
            continue
        if patch.render(changes) == text:
            return changes
    return None
