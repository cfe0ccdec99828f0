"""`codemod revert OP... | --all`: every byte a bypass wrote restored, in one transaction, in any order."""
from __future__ import annotations

from pathlib import Path

import click

from codemod.apply import journal, lock, unjournaled
from codemod.cli import report
from codemod.cli.options import BYPASSED_OPS_ARGUMENT, JSON_OPTION, TREE_OPTION, run, say
from codemod.model.errors import BadInput
from codemod.model.tree import Tree, locate


@click.command()
@BYPASSED_OPS_ARGUMENT
@TREE_OPTION
@click.option("--all", "revert_all", is_flag=True, help="Revert every bypassed op (last bypassed first).")
@click.option("--force", is_flag=True, help="Drop each edit made by hand since the last bypass that cuts into the op's own lines "
              "(named by file:line); every other edit is kept.")
@click.option("--patch", "patch_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="OP was patched with this `bypass --dry-run` patch through `git apply` (no journal): check it is OP's and undo it.")
@JSON_OPTION
def revert(op_names: tuple[str, ...], tree_root: Path, revert_all: bool, force: bool, patch_file: Path | None, as_json: bool) -> None:
    """Restore what `bypass OP` changed, for each OP in one transaction, in any order: the ops bypassed since and the
    edits made by hand are kept; an edit overlapping the op's own lines is refused (exit 1)."""

    def action() -> None:
        if bool(op_names) == revert_all:
            raise BadInput("name the ops to revert, or pass --all (not both)")
        if as_json and (revert_all or len(op_names) > 1):
            raise BadInput("--json reports one op: revert the ops one at a time with --json")
        tree = locate(tree_root)
        with lock.held(tree):
            journaled = [j.op for j in reversed(journal.bypassed(tree))]
            ops = journaled if revert_all else list(dict.fromkeys(op_names))
            if patch_file is not None:
                if len(ops) != 1 or ops[0] in journaled:
                    raise BadInput("--patch undoes one op patched without a journal; revert journaled ops without it")
                restored = unjournaled.revert_with_patch(tree, ops[0], patch_file)
                say(f"reverted {ops[0]} (patched without a journal; {patch_file} checked by planning again): {len(restored)} files")
                return
            if not ops:
                say(f"no op is bypassed in {tree.root}; nothing to revert")
                return
            _refuse_unjournaled(tree, [op for op in ops if op not in journaled])
            reverted = journal.revert(tree, ops, force)
        for each in reverted:
            say(f"reverted {each.op} ({each.mode}): {len(each.files)} files")
            for entry in each.files:
                say(f"  {entry.path}  ({entry.outcome})")
            for entry in (e for e in each.files if e.since):
                say(f"{entry.path} was edited since the bypass:\n{entry.since}")
        if as_json:
            click.echo(report.dumps(report.revert(reverted[0].op, list(reverted[0].files))))

    run(action, "revert" if as_json else None)


def _refuse_unjournaled(tree: Tree, ops: list[str]) -> None:
    """An op with markers but no journal was patched outside codemod: say exactly how to undo it."""
    marked = unjournaled.markers(tree) if ops else {}
    for op in ops:
        if op in marked:
            raise BadInput(unjournaled.how_to_undo(tree, op, marked[op]))
