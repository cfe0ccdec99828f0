"""An op's capture (two torchgen runs) for build and bench: from the tree, or as its journal recorded it."""
from __future__ import annotations

from codemod.apply import journal
from codemod.capture import capture as capture_step
from codemod.capture.capture import Capture
from codemod.model.tree import Tree
from codemod.plan.plan import OpEntries, op_entries


def bypassed_or_current(tree: Tree, op: str, guarded: bool = False) -> tuple[OpEntries, Capture]:
    """OP's structured groups and capture, for the plain or GUARDED bypass: from the tree, or, once OP is bypassed
    (its entries are no longer structured), as its journal recorded them, so build and bench measure what was bypassed."""
    recorded = journal.load(tree, op)
    entries = current_entries(tree, op, guarded)
    if recorded is not None and recorded.capture is not None and (recorded.mode == "guarded") == guarded:
        return entries, recorded.capture
    return entries, capture_for(tree, op, entries)  # the tree's, the other mode's, or a journal older than captures


def current_entries(tree: Tree, op: str, guarded: bool = False) -> OpEntries:
    """OP's structured groups, as bypassed_or_current finds them, without capturing."""
    recorded = journal.load(tree, op)
    return op_entries(tree, op, guarded) if recorded is None else journal.recorded_entries(tree, recorded, guarded)


def capture_for(tree: Tree, op: str, entries: OpEntries) -> Capture:
    """The op's Capture, as make_plan computes it (kept in the build cache by all its inputs)."""
    return capture_step.capture(tree, op, *entries.capture_inputs(), entries.overloads)
