"""Compile a slim tree's bypass in a full tree built around its sources.

A slim tree (a subset of the installed torch's operators, its own slim templates, like target_tree/)
regenerates headers that cannot replace the installed torch's generated ones. So its edited sources
are compiled in an overlay: `tree from-torch`'s layout of the installed wheel (every operator's yaml,
tags, header templates, torchgen, autograd codegen) with the slim tree's files laid over it, as they
were before this bypass and every earlier one (its journals). The templates of generated sources stay
the tree's own: the plan reads the CPU wrappers (and their includes) from them, and no header comes
from them. The earlier ops, in their order, then this run's are planned and applied there by the same
planner; the overlay's headers are regenerated once, and a file is compiled only when the overlay's
bypass wrote it byte for byte as the slim tree's did. Clean outcomes are recorded by their inputs.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from codemod.apply import journal, scratch
from codemod.apply.lock import LOCK_FILE
from codemod.apply.transaction import STATE_DIR
from codemod.capture import fromtorch
from codemod.model import cache, progress
from codemod.model.errors import CodemodError, VerificationFailed
from codemod.model.tree import TEMPLATES, Tree, locate
from codemod.plan.plan import FileChange, Plan, combined_changes, make_plan
from codemod.verify import compile_check
from codemod.verify.compile_check import CompileReport, NotCompiled, Source

_NOT_SOURCES = (".git", STATE_DIR, LOCK_FILE, "__pycache__")
SHOWN_LINE_CHARS = 60


def check(tree: Tree, plans: Sequence[Plan]) -> CompileReport:
    """Compile what PLANS wrote in the slim TREE, in one overlay; raise VerificationFailed at TREE's file:line."""
    started = time.monotonic()
    changes = combined_changes(plans)
    sources, templates = compile_check.sources_of(changes)
    not_compiled = [NotCompiled(t, _template_not_compiled(t)) for t in templates]
    if not sources:
        return CompileReport((), (), (), tuple(not_compiled), 0.0)
    where = f"a full tree built from the installed torch {importlib.metadata.version('torch')} around this tree's sources"
    against = f"in {where} (the same bypass applied there), against the headers its torchgen regenerated"
    ops = {plan.op for plan in plans}
    earlier = [j for j in journal.bypassed(tree) if j.op not in ops]
    replayed = [(j.op, j.mode == "guarded") for j in earlier]
    planned = [(p.op, p.guarded) for p in plans]
    files = _overlay_files(tree, [*(f for j in earlier for f in j.files), *changes])
    record = cache.cache_dir() / "overlay" / f"{_key(files, replayed + planned, sources)}.json"
    if record.is_file():  # the same inputs checked clean before: the same outcome
        with progress.step(f"compile check: the same bypass in {where}, recorded clean from the same inputs"):
            recorded = json.loads(record.read_text())
        compiled = tuple(recorded["compiled"])
        unchecked = tuple(NotCompiled(*item) for item in recorded["not_compiled"])
        return CompileReport(compiled, compiled, (), unchecked, time.monotonic() - started, against)
    with tempfile.TemporaryDirectory(prefix="codemod-overlay-") as scratch_dir:
        with progress.step(f"compile check: the same bypass in {where}"):
            overlay = _write_overlay(files, Path(scratch_dir, "tree"))
            _, refused = _plan_again(overlay, replayed, where)
            overlay_plans, refused_now = _plan_again(overlay, planned, where)
            refused += refused_now
        written = {change.path: change for change in combined_changes(overlay_plans)}
        same = []
        for source in sources:
            difference = _difference(source, written.get(source.path))
            if difference is None:
                same.append(source)
            else:
                not_compiled.append(NotCompiled(source.path, f"the full tree's bypass writes it differently ({difference})"))
        if same:
            headers = compile_check.regenerate_headers(overlay, Path(scratch_dir, "headers"))
            try:
                report = compile_check.check(overlay, headers, same, against=against)
            except VerificationFailed as failed:  # the overlay's own paths named as the tree's (same relative paths)
                raise VerificationFailed(str(failed).replace(f"{overlay.root}/", "")) from None
        else:
            report = CompileReport((), (), (), (), 0.0, against)
    report = dataclasses.replace(report, not_compiled=(*refused, *report.not_compiled, *not_compiled))
    _record(record, report)
    return report


def _overlay_files(tree: Tree, changes: Sequence[FileChange | journal.JournalFile]) -> dict[str, bytes]:
    """TREE's files for the overlay, as they were before the first of CHANGES (its generated-source templates too)."""
    before: dict[str, bytes | None] = {}
    for change in changes:
        before.setdefault(change.path, change.before)
    files = {}
    for path in sorted(tree.root.rglob("*")):
        relative = path.relative_to(tree.root).as_posix()
        if not path.is_file() or any(part in _NOT_SOURCES for part in Path(relative).parts) or not _from_tree(relative):
            continue
        text = before[relative] if relative in before else path.read_bytes()
        if text is not None:  # None: the bypass created it
            files[relative] = text
    return files


def _write_overlay(files: dict[str, bytes], dest: Path) -> Tree:
    """The wheel's codegen inputs, with FILES laid over them."""
    fromtorch.write_codegen_inputs(dest, fromtorch.installed_torchgen())
    for relative, text in files.items():
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        (dest / relative).write_bytes(text)
    return locate(dest)


def _key(files: dict[str, bytes], ops: Sequence[tuple[str, bool]], sources: Sequence[Source]) -> str:
    """Everything the outcome depends on besides the wheel (its version is in the key): the overlay's files, the
    ops, what the bypass wrote in the tree, and codemod's own code (the planner that runs again)."""
    own_code = sorted(Path(__file__).resolve().parents[1].rglob("*.py"))
    return compile_check.result_key(
        *(part for relative, text in files.items() for part in (relative, text)),
        *(f"{op} guarded={guarded}" for op, guarded in ops),
        *(part for s in sources for part in (s.path, s.before or b"\0absent", s.text)),
        *(path.read_bytes() for path in own_code),
    )


def _record(record: Path, report: CompileReport) -> None:
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"compiled": report.compiled, "not_compiled": [[n.path, n.why] for n in report.not_compiled]}))
    tmp.replace(record)


def _from_tree(relative: str) -> bool:
    """The tree's own sources, and its templates of generated sources (the headers come from the wheel's)."""
    if relative.startswith(TEMPLATES + "/"):
        return not relative.endswith(".h")
    return not fromtorch.is_wheel_provided(relative)


def _plan_again(overlay: Tree, ops: Sequence[tuple[str, bool]], where: str) -> tuple[list[Plan], list[NotCompiled]]:
    """Each (op, guarded) planned and written in OVERLAY in order, as the CLI plans several ops; an op it cannot plan
    is named."""
    planned, refused = [], []
    for op, guarded in ops:
        try:
            again = make_plan(overlay, op, guarded)
        except CodemodError as error:
            refused.append(NotCompiled(op, f"the bypass cannot be planned in {where}: {error}"))
            continue
        scratch.write(overlay, again.changes)
        planned.append(again)
    return planned, refused


def _difference(source: Source, written: FileChange | None) -> str | None:
    """Where the overlay's bypass wrote SOURCE's file differently (before or after), or None if byte-identical."""
    if written is None:
        return "it does not edit it"
    for when, ours, theirs in (("before", source.before, written.before), ("after", source.text, written.after)):
        if ours != theirs:
            return f"{when} the bypass, {_first_differing_line(ours or b'', theirs or b'')}"
    return None


def _first_differing_line(ours: bytes, theirs: bytes) -> str:
    ours_lines, theirs_lines = ours.splitlines(), theirs.splitlines()
    for number, (mine, other) in enumerate(zip(ours_lines, theirs_lines), 1):
        if mine != other:
            return f"line {number}: {_shown(mine)} here, {_shown(other)} there"
    number = min(len(ours_lines), len(theirs_lines)) + 1
    return f"line {number}: {'here' if len(ours_lines) < len(theirs_lines) else 'there'} the file ends"


def _shown(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    return repr(text if len(text) <= SHOWN_LINE_CHARS else text[:SHOWN_LINE_CHARS] + "...")


def _template_not_compiled(template: str) -> str:
    if template.endswith(compile_check.SOURCE_SUFFIXES):
        return compile_check.template_not_compiled(template)
    return "this tree's own header template: the full tree it is compile-checked in generates its headers from the installed torch's"
