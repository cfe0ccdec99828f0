"""An op's capture (two torchgen runs) for build and bench: from the tree, or as its journal recorded it.

Cached by the hash of everything the capture reads."""
from __future__ import annotations

import os
from pathlib import Path

from codemod.apply import journal
from codemod.capture import capture as capture_step
from codemod.capture import codegen
from codemod.capture.capture import Capture
from codemod.model import native_yaml
from codemod.model.cache import cache_dir, digest
from codemod.model.tree import TAGS, TEMPLATES, Tree
from codemod.plan import yaml_edits as plan_yaml
from codemod.plan.plan import OpEntries, op_entries


def codegen_fingerprint(tree: Tree) -> list[bytes | str]:
    """Everything besides the yaml that decides what torchgen generates, and the code that captures it."""
    code = [Path(module.__file__) for module in (capture_step, codegen, native_yaml, plan_yaml)]
    return [*codegen.files(tree.path(TAGS), tree.path(TEMPLATES), *code), *codegen.torchgen_code(tree)]


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
    """The op's Capture, as make_plan computes it, cached by the hash of all its inputs."""
    (before, after), overloads = entries.capture_inputs(), entries.overloads
    key = digest(op, before, after, "\0".join(overloads), *codegen_fingerprint(tree))[:20]
    cached = cache_dir() / f"capture-{op}-{key}.json"
    if cached.is_file():
        return Capture.from_json(cached.read_text())
    captured = capture_step.capture(tree, op, before, after, overloads)
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(captured.to_json())
    tmp.replace(cached)
    return captured
