"""`codemod revert OP... | --all`: every byte a bypass wrote restored, in one transaction, in any order."""
from __future__ import annotations

from pathlib import Path

import click

from codemod.apply import journal, lock, unjournaled
from codemod.cli import report
from codemod.cli.options import BYPASSED_OPS_ARGUMENT, TREE_OPTION, run, say, wants_json
from codemod.model import exact_text, native_yaml
from codemod.model.errors import BadInput
from codemod.model.tree import NATIVE_FUNCTIONS, Tree, locate


@click.command()
@BYPASSED_OPS_ARGUMENT
@TREE_OPTION
@click.option("--all", "revert_all", is_flag=True, help="Revert every bypassed op (last bypassed first).")
@click.option("--force", is_flag=True, help="Drop each edit made by hand since the last bypass that cuts into the op's own lines "
              "(named by file:line); every other edit is kept.")
@click.option("--patch", "patch_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="OP was patched with this `bypass --dry-run` patch through `git apply` (no journal): check it is OP's and undo it.")
def revert(op_names: tuple[str, ...], tree_root: Path, revert_all: bool, force: bool, patch_file: Path | None) -> None:
    """Restore what `bypass OP` changed, for each OP in one transaction, in any order: the ops bypassed since and the
    edits made by hand are kept; an edit overlapping the op's own lines is refused (exit 1)."""

    as_json = wants_json()

    def action() -> None:
        if bool(op_names) == revert_all:
            raise BadInput("name the ops to revert, or pass --all (not both)")
        tree = locate(tree_root)
        with lock.held(tree):
            journaled = [j.op for j in reversed(journal.bypassed(tree))]
            ops = journaled if revert_all else list(dict.fromkeys(op_names))
            not_bypassed: list[str] = []
            if patch_file is not None:
                if len(ops) != 1 or ops[0] in journaled:
                    raise BadInput("--patch undoes one op patched without a journal; revert journaled ops without it")
                restored = unjournaled.revert_with_patch(tree, ops[0], patch_file)
                reverted = [journal.Reverted(ops[0], "unjournaled", tuple(journal.RevertedFile(path, "restored", "") for path in restored))]
            else:
                not_bypassed = _not_bypassed(tree, [op for op in ops if op not in journaled])
                bypassed = [op for op in ops if op in journaled]
                reverted = journal.revert(tree, bypassed, force) if bypassed else []
        _say_reverted(tree, reverted, not_bypassed, revert_all)
        if as_json:
            click.echo(report.dumps(report.revert(reverted, not_bypassed)))

    run(action)


def _not_bypassed(tree: Tree, ops: list[str]) -> list[str]:
    """OPS, none of them journaled, as ops with nothing to revert: as `bypass` skips an op already bypassed, `revert`
    skips an op that is not (exit 0, said). Refused (exit 2, nothing written): an op the tree's yaml does not have (a
    typo, with the closest names), and one patched without a journal (how to undo it)."""
    if ops:
        doc = native_yaml.load(NATIVE_FUNCTIONS, exact_text.read(tree, NATIVE_FUNCTIONS))
        for op in ops:
            native_yaml.entries_named(doc, op)
    _refuse_unjournaled(tree, ops)
    return ops


def _say_reverted(tree: Tree, reverted: list[journal.Reverted], not_bypassed: list[str], revert_all: bool) -> None:
    if revert_all and not reverted:
        say(f"no op is bypassed in {tree.root}; nothing to revert")
    for op in not_bypassed:
        say(f"{op} is not bypassed in {tree.root} (no {journal.JOURNAL_DIR}/{op}.json); nothing to revert")
    for each in reverted:
        mode = "patched without a journal; the patch checked by planning again" if each.mode == "unjournaled" else each.mode
        say(f"reverted {each.op} ({mode}): {len(each.files)} files")
        for entry in each.files:
            say(f"  {entry.path}  ({entry.outcome})")
        for entry in (e for e in each.files if e.since):
            say(f"{entry.path} was edited since the bypass:\n{entry.since}")


def _refuse_unjournaled(tree: Tree, ops: list[str]) -> None:
    """An op with markers but no journal was patched outside codemod: say exactly how to undo it."""
    marked = unjournaled.markers(tree) if ops else {}
    for op in ops:
        if op in marked:
            raise BadInput(unjournaled.how_to_undo(tree, op, marked[op]))
