"""`codemod`: make a structured PyTorch op bypass the dispatcher, and undo it.

Exit codes: 0 ok, 1 verification failed, 2 bad input. This module only wires the commands, one module each (or
one per family) under `cli/commands/`.
"""
from __future__ import annotations

import click

from codemod.cli import pipes
from codemod.cli.commands import bench, build, bypass, hot, ops, revert, state, tree
from codemod.cli.options import CommandGroup
from codemod.model import progress


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-q", "--quiet", is_flag=True, help="Print errors only (no progress lines, no summaries); answers still go to stdout.")
@click.option("-v", "--verbose", is_flag=True, help="Also print every command run (codegen, compiler, valgrind).")
def main(quiet: bool, verbose: bool) -> None:
    """Rewrite a PyTorch tree so a structured op bypasses the dispatcher.

    `bypass OP` makes OP's entries `manual_cpp_binding`, removes its autograd
    formula and writes its C++ function, method and native API by hand from
    what torchgen generated; `revert OP` restores every byte.
    """
    pipes.tolerate_readers_leaving()
    progress.set_level(progress.QUIET if quiet else progress.VERBOSE if verbose else progress.NORMAL)


for command in (
    bypass.bypass, revert.revert, state.recover, state.status, ops.ops, ops.explain, tree.tree, build.build,
    bench.bench, hot.hot,
):
    main.add_command(command)
