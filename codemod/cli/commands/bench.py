"""`codemod bench OP`: the dispatcher against the bypass, timed and counted in one run."""
from __future__ import annotations

from pathlib import Path

import click

from codemod.cli import report
from codemod.cli.options import OP_ARGUMENT, TREE_OPTION, run, say, wants_json
from codemod.measure import bench as bench_step
from codemod.measure import guarded_bench
from codemod.model import paths, progress
from codemod.model.tree import locate
from codemod.verify import build as build_step


class _Values(click.Option):
    """A `multiple` option that also takes the numbers after it: `--size 2 1000` is `--size 2 --size 1000`, the
    form the usage line shows (`[--size N ...]`)."""

    def add_to_parser(self, parser, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        for name in self.opts:
            option = parser._long_opt.get(name) or parser._short_opt.get(name)
            take_one = option.process

            def take_all(value, state, take_one=take_one) -> None:
                take_one(value, state)
                while state.rargs and state.rargs[0].isdigit():
                    take_one(state.rargs.pop(0), state)

            option.process = take_all


@click.command()
@OP_ARGUMENT
@TREE_OPTION
@click.option("--no-callgrind", is_flag=True, help="Skip the instruction counts (callgrind: the harness run under valgrind).")
@click.option("--format", "shown_as", type=click.Choice(bench_step.FORMATS), default="table", show_default=True,
              help="table: for a terminal, 100 columns; markdown: to paste into a pull request.")
@click.option("--size", "sizes", cls=_Values, type=click.IntRange(min=1), multiple=True, metavar="N ...",
              help="Tensor sizes (elements) to time: `--size 2 1000` or `--size 2 --size 1000`; "
                   "default 1, 2, 16, 256, 4096, 65536, 1048576.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a PNG of ns/call and ratio against size (needs the `plot` extra: matplotlib).")
@click.option("--guarded", is_flag=True, help="Three paths: dispatcher, plain bypass and guarded bypass; and the share of the dispatcher's "
                   "instructions the guard removes.")
def bench(
    op: str, tree_root: Path, no_callgrind: bool, shown_as: str, sizes: tuple[int, ...], plot_file: Path | None, guarded: bool,
) -> None:
    """Time at::OP through the dispatcher against the bypass, in one process; count instructions/call;
    show what the profiler and autograd see on each path."""

    as_json = wants_json()
    if as_json and shown_as != "table":
        raise click.UsageError(f"--json and --format {shown_as} say the same in two forms: give one")

    def action() -> None:
        pyplot = bench_step.pyplot() if plot_file is not None else None
        if plot_file is not None:
            paths.regular_file(plot_file, "the plot, an image file", missing_ok=True)
        tree = locate(tree_root)
        if guarded:
            with progress.step(f"build: compile {op}'s plain and guarded bypasses against the installed libtorch"):
                built = guarded_bench.build(tree, op)
        else:
            with progress.step(f"build: compile {op}'s bypass against the installed libtorch"):
                built = build_step.build(tree, op)
        mode = "guarded" if guarded else "plain"
        measured = bench_step.measure(built.executable, op, mode, built.timed_call, sizes or bench_step.SIZES, not no_callgrind)
        if plot_file is not None:
            bench_step.plot(measured, plot_file, pyplot)
            say(f"plot written to {plot_file}")
        shown = bench_step.markdown(measured) if shown_as == "markdown" else bench_step.table(measured)
        click.echo(report.dumps(report.bench(measured)) if as_json else shown)

    run(action)
