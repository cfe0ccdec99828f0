"""`codemod`: make a structured PyTorch op bypass the dispatcher, and undo it.

Exit codes: 0 ok, 1 verification failed, 2 bad input, 3 internal error (group.py: one line, never a traceback).
This module only wires the commands, one module each (or one per family) under `cli/commands/`, each imported only
when its command runs (group.LazyCommands): `codemod --help`, `status`, `ops` and `explain` do not pay for the
imports of `bypass`, `build` and `bench`.
"""
from __future__ import annotations

import click

from codemod.cli import pipes, report
from codemod.cli.group import LazyCommand, LazyCommandGroup
from codemod.model import progress

COMMANDS = {  # name -> where it is defined, and its line in `codemod --help`
    "bench": LazyCommand("codemod.cli.commands.bench:bench", "Time and count at::OP through the dispatcher and the bypass."),
    "build": LazyCommand("codemod.cli.commands.build:build", "Compile OP's bypass into a checking and timing harness."),
    "cache": LazyCommand("codemod.cli.commands.cache:cache_command", "Where the build cache is, how big, and pruning it."),
    "bypass": LazyCommand("codemod.cli.commands.bypass:bypass", "Make each OP call its CPU kernel without the dispatcher."),
    "explain": LazyCommand("codemod.cli.commands.ops:explain", "OP's call path today and after a bypass; writes nothing."),
    "hot": LazyCommand("codemod.cli.commands.hot:hot", "Which aten ops of a run are worth bypassing."),
    "ops": LazyCommand("codemod.cli.commands.ops:ops", "Every op of the tree's yaml: can `bypass` take it, and if not, why."),
    "recover": LazyCommand("codemod.cli.commands.state:recover", "Finish a bypass or revert that was killed half-way."),
    "revert": LazyCommand("codemod.cli.commands.revert:revert", "Restore every byte `bypass OP` changed, for each OP."),
    "status": LazyCommand("codemod.cli.commands.state:status", "Which ops are bypassed, and whether their files still match."),
    "tree": LazyCommand("codemod.cli.commands.tree:tree", "Trees to run codemod on."),
}

COLOR = {"auto": None, "always": True, "never": False}  # --color WHEN: click's color setting (None: on a terminal)


@click.group(cls=LazyCommandGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-q", "--quiet", is_flag=True, help="Print errors only (no progress lines, no summaries); answers still go to stdout.")
@click.option("-v", "--verbose", is_flag=True, help="Also print every command run (codegen, compiler, valgrind).")
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object on stdout (documented by {report.SCHEMA_PATH}).")
@click.option("--color", type=click.Choice(COLOR), default="auto", show_default=True, metavar="WHEN",
              help="Color the -i hunks and the --dry-run patch: auto (on a terminal), always or never.")
def main(quiet: bool, verbose: bool, as_json: bool, color: str) -> None:
    """Rewrite a PyTorch tree so a structured op bypasses the dispatcher.

    `bypass OP` makes OP's entries `manual_cpp_binding`, removes its autograd
    formula and writes its C++ function, method and native API by hand from
    what torchgen generated; `revert OP` restores every byte.
    """
    pipes.tolerate_readers_leaving()
    click.get_current_context().color = COLOR[color]  # every command's context inherits it
    progress.set_level(progress.QUIET if quiet else progress.VERBOSE if verbose else progress.NORMAL)
