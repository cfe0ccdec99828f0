"""Plan a bypass: locate, capture, and collect every file's edits. Writes nothing."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from codemod.capture import capture as capture_step
from codemod.capture.capture import Capture
from codemod.model import exact_text, native_yaml
from codemod.model.edits import Edit, apply_edits
from codemod.model.native_yaml import OpGroup
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, Tree
from codemod.plan import callers as plan_callers
from codemod.plan import cpp as plan_cpp
from codemod.plan import guarded as plan_guarded
from codemod.plan import yaml_edits as plan_yaml
from codemod.plan.callers import Leftover


@dataclass(frozen=True)
class FileChange:
    path: str
    before: bytes | None  # None: the bypass creates the file
    after: bytes


@dataclass(frozen=True)
class Plan:
    op: str
    overloads: tuple[str, ...]
    changes: tuple[FileChange, ...]
    foreach_ops: tuple[str, ...]  # foreach ops that lose autograd with the formulas
    leftovers: tuple[Leftover, ...]
    losses: tuple[str, ...]
    capture: Capture
    guarded: bool = False  # the op keeps the dispatcher; the API takes a fast path when safe
    independent_paths: tuple[str, ...] = ()  # files whose hunks the rest does not need (callers)
    reaching: tuple[str, ...] = ()  # files that reached a removed function before the bypass: compiled after it


@dataclass(frozen=True)
class OpEntries:
    """The op's structured groups in native_functions.yaml, and the edit that makes them manual."""

    doc: native_yaml.NativeYaml
    groups: tuple[OpGroup, ...]
    yaml_edits: tuple[Edit, ...]
    after: native_yaml.NativeYaml  # the file as the edits leave it

    @property
    def overloads(self) -> tuple[str, ...]:
        return tuple(name for group in self.groups for name in group.names)

    def capture_inputs(self) -> tuple[str, str]:
        """The groups' entries as they are, and as the bypass leaves them."""
        return capture_step.group_yaml(self.doc, list(self.groups)), _groups_after(self.after, self.groups)


def op_entries(tree: Tree, op: str, guarded: bool = False, native_functions: str | None = None) -> OpEntries:
    """NATIVE_FUNCTIONS: the yaml's text to read instead of the tree's (what a journal recorded before a bypass)."""
    text = exact_text.read(tree, NATIVE_FUNCTIONS) if native_functions is None else native_functions
    doc = native_yaml.load(NATIVE_FUNCTIONS, text)
    groups = native_yaml.op_groups(doc, op)
    edits, after = plan_yaml.native_functions_edits(doc, groups, guarded)
    return OpEntries(doc, tuple(groups), tuple(edits), after)


def make_plan(tree: Tree, op: str, guarded: bool = False) -> Plan:
    entries = op_entries(tree, op, guarded)
    groups, overloads, yaml_edits = list(entries.groups), entries.overloads, list(entries.yaml_edits)
    captured = capture_step.capture(tree, op, *entries.capture_inputs(), overloads)
    if guarded:
        return _guarded_plan(tree, op, overloads, [*yaml_edits, *plan_guarded.template_edits(tree, captured)], captured)

    derivatives = exact_text.read(tree, DERIVATIVES)
    formula_edits, removed = plan_yaml.derivatives_edits(derivatives, overloads)
    foreach_ops, foreach_edits = _foreach_cascade(tree, op, apply_edits(derivatives.encode(), formula_edits).decode())
    callers = plan_callers.caller_edits(tree, captured)
    needed = [
        *yaml_edits,
        *formula_edits,
        *foreach_edits,
        *plan_cpp.template_edits(tree, captured),
        *plan_cpp.native_source_edits(tree, captured),
    ]
    edits = [*needed, *callers.edits]
    return Plan(
        op=op,
        overloads=overloads,
        changes=_changes(tree, edits),
        foreach_ops=tuple(foreach_ops),
        leftovers=tuple(callers.leftovers),
        losses=_losses(groups, removed, foreach_ops, captured.other_native_structs),
        capture=captured,
        independent_paths=tuple(sorted({edit.path for edit in callers.edits} - {edit.path for edit in needed})),  # not a kernel's file
        reaching=tuple(callers.reaching),
    )


def _groups_after(after: native_yaml.NativeYaml, groups: tuple[OpGroup, ...]) -> str:
    """The groups' entries as the bypass leaves them, for the second capture run."""
    by_name = after.by_name()
    return "\n".join(after.entry_text(by_name[member.name]) for group in groups for member in group.members)


def _guarded_plan(tree: Tree, op: str, overloads: tuple[str, ...], edits: list[Edit], captured: Capture) -> Plan:
    """Only the yaml key and the templates change: formulas, kernels and callers stay."""
    return Plan(
        op=op,
        overloads=overloads,
        changes=_changes(tree, edits),
        foreach_ops=(),
        leftovers=(),
        losses=(
            "nothing: when the guard refuses the fast path (autograd metadata, another device or layout, "
            "Python or functorch keys, a profiler), the call goes through the dispatcher as before",
        ),
        capture=captured,
        guarded=True,
    )


def _foreach_cascade(tree: Tree, op: str, edited_derivatives: str) -> tuple[list[str], list[Edit]]:
    """Foreach ops that reuse a removed formula, and the autograd codegen edit that exempts them."""
    from codemod.plan import foreach  # the tree's autograd loader, and libcst where its edit is not kept

    return foreach.cascade(tree, op, edited_derivatives)


def _changes(tree: Tree, edits: list[Edit]) -> tuple[FileChange, ...]:
    by_path: dict[str, list[Edit]] = defaultdict(list)
    for edit in edits:
        by_path[edit.path].append(edit)
    changes = []
    for path in sorted(by_path):
        target = tree.path(path)
        before = target.read_bytes() if target.is_file() else None  # anything else there is refused before writing
        if before is not None:
            exact_text.decode(path, before)  # refuse a file that would not be written back byte-identical
        changes.append(FileChange(path, before, apply_edits(before or b"", by_path[path])))
    return tuple(changes)


def _losses(groups: list[OpGroup], removed: list[str], foreach_ops: list[str], other_native_structs: tuple[str, ...]) -> tuple[str, ...]:
    kernels: dict[str, set[str]] = defaultdict(set)
    for group in groups:
        for member in group.members:
            for keys in (member.values.get("dispatch") or {}):
                for key in str(keys).split(","):
                    kernels[key.strip()].add(member.name)
    losses = [
        f"{key} kernel of {', '.join(sorted(names))} is no longer registered"
        for key, names in sorted(kernels.items())
        if key != "CPU"
    ]
    for group in groups:
        if "ufunc_inner_loop" in group.out.values:
            losses.append(
                f"kernels the ufunc codegen generated for {group.out.name} on other backends (CUDA) are no longer generated; "
                "its CPU kernel is carried over as hand-written sources"
            )
    if other_native_structs:
        losses.append(
            f"torchgen no longer declares at::native::{', at::native::'.join(other_native_structs)} (other backends' "
            "structured kernels): their TORCH_IMPL_FUNC definitions, not carried over, stop compiling in builds with those backends"
        )
    losses.append("Meta kernels of the structured group are no longer registered (no shape inference on meta tensors)")
    if removed:
        losses.append(f"autograd: the formula of {', '.join(removed)} is removed; results carry no grad_fn")
    if foreach_ops:
        losses.append(f"autograd of {', '.join(foreach_ops)}, which reused that formula")
    losses.append("profiler: at:: calls no longer pass through the dispatcher, so RecordFunction does not see them")
    losses.append("the hand-written API runs the CPU kernel whatever the tensors' device")
    return tuple(losses)


def combined_changes(plans: Sequence[Plan]) -> tuple[FileChange, ...]:
    """What PLANS, applied one after another, change together: each file from before the first to after the last."""
    changes: dict[str, FileChange] = {}
    for plan in plans:
        for change in plan.changes:
            first = changes.get(change.path, change)
            changes[change.path] = FileChange(change.path, first.before, change.after)
    return tuple(changes[path] for path in sorted(changes))
