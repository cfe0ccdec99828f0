"""`codemod bypass OP --check`: is the bypass a fixed point of the planner?

The plan's changes are written into a scratch copy of the tree (hard links for
the files it does not change, so a real checkout copies in seconds; changed
files are replaced, never written through a link) and OP is planned again there.

The second plan is empty when the planner, finding every entry of OP now
`manual_cpp_binding` with no structured key left, refuses with "no structured
kernel" (for a bypassed op that refusal is the empty plan), or when it plans
no change. Anything else (a structured entry left, a plan with edits, another
refusal) means a second bypass would not leave the tree as the first did.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from codemod.model import exact_text

from codemod.model import native_yaml
from codemod.model.errors import BadInput
from codemod.apply.lock import LOCK_FILE
from codemod.plan.plan import Plan, make_plan
from codemod.apply.transaction import STATE_DIR
from codemod.model.tree import NATIVE_FUNCTIONS, Tree, locate


def second_plan_problem(tree: Tree, plan: Plan) -> str | None:
    """None when planning again after PLAN is empty, else what the second plan found."""
    with tempfile.TemporaryDirectory(prefix=f"codemod-check-{plan.op}-") as scratch_dir:
        scratch = Path(scratch_dir) / "tree"
        ignored = shutil.ignore_patterns(".git", STATE_DIR, LOCK_FILE)
        shutil.copytree(tree.root, scratch, symlinks=True, ignore=ignored, copy_function=_link_or_copy)
        for change in plan.changes:
            target = scratch / change.path
            target.unlink(missing_ok=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(change.after)
        bypassed = locate(scratch)
        try:
            again = make_plan(bypassed, plan.op, plan.guarded)
        except BadInput as refusal:
            not_manual = _not_manual(bypassed, plan.overloads, keeps_structured=plan.guarded)
            return f"{', '.join(not_manual)} not manual after the bypass; planning again: {refusal}" if not_manual else None
        changed = [c.path for c in again.changes if c.before != c.after]
        return f"a second bypass of {plan.op} would change {', '.join(changed)}" if changed else None


def _not_manual(tree: Tree, overloads: tuple[str, ...], keeps_structured: bool) -> list[str]:
    """The overloads that are not `manual_cpp_binding: True` (without any structured key, unless a guarded bypass kept them)."""
    doc = native_yaml.load(NATIVE_FUNCTIONS, exact_text.read(tree, NATIVE_FUNCTIONS))
    entries = doc.by_name()
    not_manual = []
    for name in overloads:
        values = native_yaml.parse_entry(doc, entries[name]).values if name in entries else {}
        structured_left = not keeps_structured and set(native_yaml.STRUCTURED_KEYS) & values.keys()
        if values.get("manual_cpp_binding") is not True or structured_left:
            not_manual.append(name)
    return not_manual


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, destination)
