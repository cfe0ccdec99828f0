"""`codemod hot SCRIPT.py`: which aten ops of a run are worth bypassing, by estimated saving."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from codemod.cli import catalog, report
from codemod.cli.options import TREE_OPTION, run, say, wants_json
from codemod.measure import bench as bench_step
from codemod.measure import hot as hot_step
from codemod.model import paths, progress
from codemod.model.errors import BadInput
from codemod.model.tree import locate


def _script_first(ctx: click.Context, _param: click.Parameter, script_and_args: tuple[str, ...]) -> tuple[str, ...]:
    """The script's own options follow it: an unknown option before it is a typo of ours (`--tre`), said as one."""
    if script_and_args and script_and_args[0].startswith("-"):
        raise click.NoSuchOption(script_and_args[0].partition("=")[0], ctx=ctx)
    return script_and_args


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("script_and_args", nargs=-1, type=click.UNPROCESSED, metavar="[SCRIPT.py [ARGS]...]", callback=_script_first)
@TREE_OPTION
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Read a trace saved with torch.profiler's export_chrome_trace instead of running a script.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a PNG bar chart of the estimated saving (needs the `plot` extra: matplotlib).")
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True,
              help="How many ops, by estimated saving, the total and the closing sentence are about.")
@click.option("--no-measure", is_flag=True, help="Skip the per-call costs (callgrind, ~1 min per op the first time): no estimate.")
def hot(
    script_and_args: tuple[str, ...], tree_root: Path, trace_file: Path | None, plot_file: Path | None,
    top: int, no_measure: bool,
) -> None:
    """Which aten ops of a run are worth bypassing: run SCRIPT.py ARGS under torch.profiler (or read --trace),
    count calls and self CPU time per op, say whether the tree can bypass each and how many calls the guard would
    let through, and rank them by the estimated instructions a bypass saves. Options of codemod's own are taken
    wherever they stand; put the script's after `--` if they clash."""

    as_json = wants_json()

    def action() -> None:
        if bool(script_and_args) == (trace_file is not None):
            raise BadInput("give SCRIPT.py [ARGS] or --trace TRACE.json, one of the two")
        tree = locate(tree_root)
        pyplot = bench_step.pyplot() if plot_file is not None else None
        if plot_file is not None:
            paths.regular_file(plot_file, "the plot, an image file", missing_ok=True)
        if trace_file is not None:
            trace = hot_step.read_trace(trace_file)
            source = {"script": None, "args": [], "trace": str(trace_file)}
        else:
            script, *args = script_and_args
            with progress.step(f"profile: {script} under torch.profiler", passes_output_through=True):
                trace = hot_step.profile(Path(script), tuple(args), sys.stderr if as_json else sys.stdout)
            source = {"script": script, "args": args, "trace": None}
        rows = hot_step.aggregate(trace)
        statuses = {status.op: status for status in catalog.catalog(tree)}
        costs = {}
        for op in hot_step.ops_to_measure(rows, statuses):
            if no_measure:
                costs[op] = {"not_measured": "--no-measure"}
                continue
            with progress.step(f"cost: {op}'s instructions per call, dispatcher and bypasses (callgrind once per op and torch version)"):
                costs[op] = hot_step.measured_cost(tree, op)
        hot_report = hot_step.report(rows, statuses, costs, {**source, "tree": str(tree.root)}, hot_step.run_span_us(trace), top)
        if plot_file is not None:
            hot_step.plot(hot_report, plot_file, pyplot)
            say(f"plot written to {plot_file}")
        click.echo(report.dumps(hot_report) if as_json else hot_step.table(hot_report))

    run(action)
