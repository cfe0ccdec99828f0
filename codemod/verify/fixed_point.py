"""`codemod bypass OP --check`: is the bypass a fixed point of the planner?

The plan's changes are written into a scratch copy of the tree (codemod/apply/scratch.py)
and OP is planned again there.

The second plan is empty when the planner, finding every entry of OP now
`manual_cpp_binding` with no structured key left, refuses with "no structured
kernel" (for a bypassed op that refusal is the empty plan), or when it plans
no change. Anything else (a structured entry left, a plan with edits, another
refusal) means a second bypass would not leave the tree as the first did.
"""
from __future__ import annotations

from codemod.apply import scratch
from codemod.model import exact_text, native_yaml
from codemod.model.errors import BadInput
from codemod.model.tree import NATIVE_FUNCTIONS, Tree
from codemod.plan.plan import Plan, make_plan


def second_plan_problem(tree: Tree, plan: Plan) -> str | None:
    """None when planning again after PLAN is empty, else what the second plan found."""
    with scratch.copy_of(tree, f"codemod-check-{plan.op}-") as bypassed:
        scratch.write(bypassed, plan.changes)
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

