"""What every command shares: the --tree option, OP arguments checked at the edge, --json, -q, and how a
command ends: a CodemodError said in one line (`codemod: what (the fix)`, as group.py says a usage error), with
its exit code, and as the JSON error object too when the command was asked for --json."""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click

from codemod.apply import journal, transaction
from codemod.cli import children, report
from codemod.cli.group import complain
from codemod.model import op_name, progress
from codemod.model.errors import EXIT_OK, BadInput, CodemodError
from codemod.model.tree import NATIVE_FUNCTIONS, Tree, locate

TREE_OPTION = click.option(
    "--tree", "tree_root", default=".", show_default=True, type=click.Path(file_okay=False, path_type=Path),
    help="Root of the PyTorch checkout (or our target_tree/).",
)


def say(message: str = "") -> None:
    """Progress and summaries, on stderr; `-q` keeps only errors."""
    if not progress.quiet():
        click.echo(message, err=True)


def prompt_text(message: str = "") -> None:
    """Part of a question the user answers (`bypass -i`'s hunks): on stderr whatever -q."""
    click.echo(message, err=True)


def run(action, json_command: str | None = None, finishes_transactions: bool = False) -> None:
    """Run ACTION, owning its child processes (children.owned); on a CodemodError say why and exit with its code
    (as JSON too, for a --json command); on SIGINT or SIGTERM, end its children and exit 128 + the signal.

    A command on a tree first refuses (exit 2) while a transaction there is unfinished, unless it is the
    one that FINISHES_TRANSACTIONS (`recover`)."""
    try:
        with children.owned():
            tree_root = click.get_current_context().params.get("tree_root")
            if tree_root is not None and not finishes_transactions:
                transaction.refuse_if_interrupted(Path(tree_root).resolve())
            action()
    except (CodemodError, children.Interrupted) as error:
        message = str(error) if isinstance(error, CodemodError) else (
            f"interrupted by {error}: its child processes ended, its temporary files removed")
        complain(message, json_command, error.exit_code)
        sys.exit(error.exit_code)
    sys.exit(EXIT_OK)


def _completion_tree() -> Tree:
    """The tree OP is completed from: --tree wherever it is on the line (bash, zsh and fish pass the words after
    the cursor too: the README puts OP first), else the tree holding the current directory, else the one tree
    directly below it (`./target_tree` in a clone of codemod)."""
    words = shlex.split(os.environ.get("COMP_WORDS", ""))
    given = next((after for word, after in zip(words, words[1:]) if word == "--tree"), None)
    given = given or next((w.removeprefix("--tree=") for w in words if w.startswith("--tree=")), None)
    if given:
        return locate(given)
    try:
        return locate(".")
    except BadInput:
        below = [d for d in sorted(Path(".").iterdir()) if d.is_dir() and d.joinpath(NATIVE_FUNCTIONS).is_file()]
        if len(below) != 1:
            raise
        return locate(below[0])


def complete_ops(bypassed: bool):
    """Shell completion of OP from the tree's yaml (see _completion_tree)."""

    def complete(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
        from codemod.cli import catalog  # the yaml model, ~50 ms: only completing an op name reads the catalogue

        try:
            tree = _completion_tree()
            names = [j.op for j in journal.bypassed(tree)] if bypassed else [s.op for s in catalog.catalog(tree) if s.bypassable]
        except CodemodError:
            return []
        return [name for name in names if name.startswith(incomplete)]

    return complete


def validated_ops(_ctx: click.Context, _param: click.Parameter, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """Op names are checked at the edge, before one becomes a file name (`.codemod/OP.json`)."""
    try:
        for name in (value,) if isinstance(value, str) else value:
            op_name.validated(name)
    except BadInput as error:
        raise click.BadParameter(str(error))
    return value


OP_ARGUMENT = click.argument("op", shell_complete=complete_ops(bypassed=False), callback=validated_ops)
OPS_ARGUMENT = click.argument("op_names", metavar="OP...", nargs=-1, required=True, shell_complete=complete_ops(bypassed=False), callback=validated_ops)
BYPASSED_OPS_ARGUMENT = click.argument("op_names", metavar="[OP]...", nargs=-1, shell_complete=complete_ops(bypassed=True), callback=validated_ops)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object on stdout (documented by {report.SCHEMA_PATH}).")
