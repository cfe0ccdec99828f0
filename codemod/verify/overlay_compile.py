"""Compile a slim tree's bypass against the headers of a full tree in the same state.

A slim tree (a subset of the installed torch's operators, its own slim templates, like target_tree/)
regenerates headers that cannot replace the installed torch's generated ones. Its files are compiled as they
are on disk, in place, against headers regenerated from the installed wheel's codegen inputs (every operator's
yaml, the tags, the header templates) with every op bypassed in the tree applied to them: the earlier ones
(from their journals), then this run's, each from its captured API, as the plan made it (nothing is planned
again). The headers before this run (the earlier ops only) are what a file that does not compile is compiled
against again, to tell the bypass's errors from those it had. An op whose entries in the tree declare another
C++ API than the wheel's cannot be stood for: every file is then named as not compiled, with the entry.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from codemod.apply import journal
from codemod.capture import fromtorch
from codemod.capture.capture import Capture
from codemod.model import progress
from codemod.model.edits import apply_edits
from codemod.model.errors import BadInput
from codemod.model.tree import NATIVE_FUNCTIONS, Tree
from codemod.plan import cpp as plan_cpp
from codemod.plan import guarded as plan_guarded
from codemod.plan.plan import OpEntries, Plan, op_entries
from codemod.verify import compile_check
from codemod.verify.compile_check import Before, CodegenInputs, CompileReport, NotCompiled, Unit

# Entry keys that shape the C++ API torchgen generates for an operator (its declarations, defaults, methods).
API_KEYS = ("func", "variants", "cpp_no_default_args", "manual_cpp_binding")


@dataclass(frozen=True)
class _Step:
    """One op bypassed in the tree, as the wheel's codegen inputs take it."""

    op: str
    guarded: bool
    capture: Capture | None
    native_functions: str  # the tree's yaml before this op's bypass


def check(tree: Tree, plans: Sequence[Plan], units: Sequence[Unit] = ()) -> CompileReport:
    """Compile what PLANS wrote in the slim TREE (and what reached a function they remove), and UNITS, against a full
    tree's headers; raise VerificationFailed at TREE's file:line."""
    targets, templates = compile_check.targets_of(plans)
    version = importlib.metadata.version("torch")
    against = f"against the headers of a full tree built from the installed torch {version} with the same bypasses"
    own_templates = [NotCompiled(t, _template_not_compiled(t)) for t in templates]
    if not targets and not units:
        return CompileReport((), (), (), tuple(own_templates), 0.0, against)
    with progress.step(f"compile check: the full tree's codegen inputs from the installed torch {version}, with the bypasses applied"):
        try:
            before, after = _full_tree_inputs(tree, plans)
        except _CannotStandFor as refused:
            reason = f"the full tree cannot stand for this tree: {refused}"
            unbuilt = [*(t.path for t in targets), *(u.path for u in units)]
            return CompileReport((), (), (), (*(NotCompiled(path, reason) for path in unbuilt), *own_templates), 0.0, against)
    headers = compile_check.regenerate_headers(tree, after)
    report = compile_check.check(tree, headers, plans, Before.of(tree, plans, before), against, units)
    # the tree's own header templates are not what the full tree's headers come from; its source templates are what
    # the units generated from them (generated_units.py) were generated from
    through_units = tuple(t for t in report.templates_compiled if t.endswith(compile_check.SOURCE_SUFFIXES))
    not_compiled = [n for n in report.not_compiled if n.path not in templates]
    own_templates = [n for n in own_templates if n.path not in through_units]
    return dataclasses.replace(report, templates_compiled=through_units, not_compiled=(*not_compiled, *own_templates))


def full_tree_headers(tree: Tree, plans: Sequence[Plan]) -> tuple[compile_check.Headers, Before] | None:
    """The full tree's headers with PLANS applied, and the files PLANS write as they were with the full tree's headers
    before PLANS (generated when first needed), as check regenerates them (None: the full tree cannot stand for TREE):
    before writing, the runs check then finds in the build cache."""
    try:
        before, after = _full_tree_inputs(tree, plans)
    except _CannotStandFor:
        return None
    return compile_check.regenerate_headers(tree, after), Before.of(tree, plans, before)


def _full_tree_inputs(tree: Tree, plans: Sequence[Plan]) -> list[CodegenInputs]:
    """The wheel's codegen inputs with the ops bypassed in TREE before PLANS applied, then with PLANS' too."""
    ops = {plan.op for plan in plans}
    earlier = [_Step(j.op, j.mode == "guarded", j.capture, _yaml_before(j)) for j in journal.bypassed(tree) if j.op not in ops]
    planned = [_Step(p.op, p.guarded, p.capture, _plan_yaml_before(tree, p)) for p in plans]
    return _inputs_after(tree, [earlier, planned])


class _CannotStandFor(Exception):
    """The wheel's entries of an op declare another API than the tree's."""


def _inputs_after(tree: Tree, batches: list[list[_Step]]) -> list[CodegenInputs]:
    """The wheel's codegen inputs after each batch of steps, applied in order."""
    wheel = fromtorch.installed_torchgen()
    states = []
    with tempfile.TemporaryDirectory(prefix="codemod-overlay-") as scratch:
        overlay_root = Path(scratch)
        fromtorch.write_codegen_inputs(overlay_root, wheel)
        overlay = Tree(overlay_root, has_own_torchgen=False, has_own_autograd=False)
        for batch in batches:
            for step in batch:
                _apply(tree, overlay, step)
            states.append(CodegenInputs.read(overlay_root))
    return states


def _apply(tree: Tree, overlay: Tree, step: _Step) -> None:
    """STEP's yaml edit (on the wheel's entries) and template edits (from its capture) in OVERLAY."""
    if step.capture is None:
        raise _CannotStandFor(f"{journal.JOURNAL_DIR}/{step.op}.json records no capture of {step.op}'s API")
    theirs = op_entries(overlay, step.op, step.guarded)
    ours = op_entries(tree, step.op, step.guarded, step.native_functions)
    if theirs.overloads != ours.overloads:
        raise _CannotStandFor(
            f"{step.op}'s structured groups are {', '.join(ours.overloads)} here, {', '.join(theirs.overloads)} in the installed torch"
        )
    wheel_apis = _apis(theirs)
    for name, mine in _apis(ours).items():
        wheel = wheel_apis[name]
        if mine != wheel:
            key = next(k for k in API_KEYS if mine.get(k) != wheel.get(k))
            raise _CannotStandFor(f"{NATIVE_FUNCTIONS}: {name}'s {key} is {mine.get(key)!r} here, {wheel.get(key)!r} in the installed torch")
    edits = [*theirs.yaml_edits, *(plan_guarded if step.guarded else plan_cpp).template_edits(overlay, step.capture)]
    for path in {edit.path for edit in edits}:
        target = overlay.path(path)
        target.write_bytes(apply_edits(target.read_bytes(), [edit for edit in edits if edit.path == path]))


def _apis(entries: OpEntries) -> dict[str, dict]:
    """Each overload's keys that shape its C++ API."""
    return {m.name: {k: m.values[k] for k in API_KEYS if k in m.values} for group in entries.groups for m in group.members}


def _yaml_before(entry: journal.Journal) -> str:
    recorded = entry.file(NATIVE_FUNCTIONS)
    if recorded is None or recorded.before is None:
        raise BadInput(f"{journal.JOURNAL_DIR}/{entry.op}.json: records no {NATIVE_FUNCTIONS}; restore the files from version control")
    return recorded.before.decode()


def _plan_yaml_before(tree: Tree, plan: Plan) -> str:
    change = next((c for c in plan.changes if c.path == NATIVE_FUNCTIONS and c.before is not None), None)
    return change.before.decode() if change is not None else tree.path(NATIVE_FUNCTIONS).read_text()


def _template_not_compiled(template: str) -> str:
    if template.endswith(compile_check.SOURCE_SUFFIXES):
        return compile_check.template_not_compiled(template)
    return "this tree's own header template: the full tree it is compile-checked in generates its headers from the installed torch's"
