"""`codemod`: make a structured PyTorch op bypass the dispatcher, and undo it.

Exit codes: 0 ok, 1 verification failed, 2 bad input.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from codemod import journal, patch
from codemod.errors import EXIT_OK, CodemodError
from codemod.plan import Plan, make_plan
from codemod.tree import Tree, locate
from codemod.verify import verify

TREE_OPTION = click.option(
    "--tree", "tree_root", default=".", show_default=True, type=click.Path(file_okay=False, path_type=Path),
    help="Root of the PyTorch checkout (or our target_tree/).",
)


def _say(message: str = "") -> None:
    click.echo(message, err=True)


def _run(action) -> None:
    try:
        action()
    except CodemodError as error:
        _say(f"codemod: {error}")
        sys.exit(error.exit_code)
    sys.exit(EXIT_OK)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Rewrite a PyTorch tree so a structured op bypasses the dispatcher.

    `bypass OP` makes OP's entries `manual_cpp_binding`, removes its autograd
    formula and writes its C++ function, method and native API by hand from
    what torchgen generated; `revert OP` restores every byte.
    """


@main.command()
@click.argument("op")
@TREE_OPTION
@click.option("--dry-run", is_flag=True, help="Print the patch on stdout; write nothing.")
@click.option("--patch", "patch_file", type=click.Path(dir_okay=False, path_type=Path), help="Also write the patch to this file.")
@click.option("--no-verify", is_flag=True, help="Skip re-running the tree's codegen after applying.")
def bypass(op: str, tree_root: Path, dry_run: bool, patch_file: Path | None, no_verify: bool) -> None:
    """Make OP (e.g. mul) call its CPU kernel directly, without the dispatcher."""

    def action() -> None:
        tree = locate(tree_root)
        if journal.load(tree, op) is not None:
            _say(f"{op} is already bypassed in {tree.root} (see {journal.JOURNAL_DIR}/{op}.json); nothing to do")
            return
        plan = make_plan(tree, op)
        diff = patch.render(plan.changes)
        if patch_file is not None:
            patch_file.write_text(diff)
        if dry_run:
            click.echo(diff, nl=False)
            _summary(tree, plan, applied=False)
            return
        journal.apply(tree, plan)
        _summary(tree, plan, applied=True)
        if not no_verify:
            for line in verify(tree, plan):
                _say(f"verified: {line}")

    _run(action)


@main.command()
@click.argument("op")
@TREE_OPTION
def revert(op: str, tree_root: Path) -> None:
    """Restore every file `bypass OP` changed, byte for byte."""

    def action() -> None:
        tree = locate(tree_root)
        restored = journal.revert(tree, op)
        _say(f"reverted {op}: restored {len(restored.files)} files")
        for entry in restored.files:
            _say(f"  {entry.path}")

    _run(action)


def _summary(tree: Tree, plan: Plan, applied: bool) -> None:
    verb = "changed" if applied else "would change"
    _say(f"bypass {plan.op} ({', '.join(plan.overloads)}) {verb} {len(plan.changes)} files in {tree.root}:")
    for path, added, removed in patch.stat(plan.changes):
        _say(f"  {path}  +{added} -{removed}")
    _say(f"{plan.op} loses:")
    for loss in plan.losses:
        _say(f"  - {loss}")
    if plan.leftovers:
        _say("not rewritten (edit by hand):")
        for leftover in plan.leftovers:
            _say(f"  {leftover}")
    else:
        _say("every reference to the removed at::cpu:: / at::redispatch:: functions was rewritten")
