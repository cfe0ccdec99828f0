"""An op's capture (two torchgen runs) for build and bench: from the tree, or as its journal recorded it.

Cached by the hash of everything the capture reads."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from codemod.apply import journal
from codemod.capture import capture as capture_step
from codemod.capture.capture import Capture
from codemod.model import native_yaml
from codemod.model.tree import TAGS, TEMPLATES, Tree
from codemod.plan import yaml_edits as plan_yaml
from codemod.plan.plan import OpEntries, op_entries
from codemod.model.cache import cache_dir, digest


def _codegen_fingerprint(tree: Tree) -> list[bytes | str]:
    """Everything besides the yaml that decides what torchgen generates, and the code that captures it."""
    parts: list[bytes | str] = [tree.path(TAGS).read_bytes()]
    for path in sorted(tree.path(TEMPLATES).rglob("*")):
        if path.is_file():
            parts += [path.name, path.read_bytes()]
    torchgen = tree.root / "torchgen" if tree.has_own_torchgen else None
    if torchgen is None:
        spec = importlib.util.find_spec("torchgen")
        torchgen = Path(spec.origin).parent if spec and spec.origin else None
    if torchgen is not None:
        for path in sorted(torchgen.rglob("*.py")):
            if "packaged" not in path.parts:
                parts += [str(path.relative_to(torchgen)), path.read_bytes()]
    for module in (capture_step, native_yaml, plan_yaml):
        parts.append(Path(module.__file__).read_bytes())
    return parts


def bypassed_or_current(tree: Tree, op: str, guarded: bool = False) -> tuple[OpEntries, Capture]:
    """OP's structured groups and capture, for the plain or GUARDED bypass: from the tree, or, once OP is bypassed
    (its entries are no longer structured), as its journal recorded them, so build and bench measure what was bypassed."""
    recorded = journal.load(tree, op)
    if recorded is None:
        entries = op_entries(tree, op, guarded)
        return entries, capture_for(tree, op, entries)
    entries = journal.recorded_entries(tree, recorded, guarded)
    if recorded.capture is not None and (recorded.mode == "guarded") == guarded:
        return entries, recorded.capture
    return entries, capture_for(tree, op, entries)  # the other mode's capture, or a journal older than captures


def capture_for(tree: Tree, op: str, entries: OpEntries) -> Capture:
    """The op's Capture, as make_plan computes it, cached by the hash of all its inputs."""
    (before, after), overloads = entries.capture_inputs(), entries.overloads
    key = digest(op, before, after, "\0".join(overloads), *_codegen_fingerprint(tree))[:20]
    cached = cache_dir() / f"capture-{op}-{key}.json"
    if cached.is_file():
        return Capture.from_json(cached.read_text())
    captured = capture_step.capture(tree, op, before, after, overloads)
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(captured.to_json())
    tmp.replace(cached)
    return captured
