"""`codemod bench OP`: the dispatcher against the bypass, timed and counted in one run."""
from __future__ import annotations

from pathlib import Path

import click

from codemod.cli import report
from codemod.cli.options import JSON_OPTION, OP_ARGUMENT, TREE_OPTION, run, say
from codemod.measure import bench as bench_step
from codemod.measure import guarded_bench
from codemod.model import progress
from codemod.model.errors import BadInput
from codemod.model.tree import locate
from codemod.verify import build as build_step


@click.command()
@OP_ARGUMENT
@TREE_OPTION
@JSON_OPTION
@click.option("--no-callgrind", is_flag=True, help="Skip the instruction counts (valgrind takes ~30 s).")
@click.option("--size", "sizes", type=click.IntRange(min=1), multiple=True,
              help="Tensor sizes (elements) to time; default 1, 2, 16, 256, 4096, 65536, 1048576.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a PNG of ns/call and ratio against size (needs the `plot` extra: matplotlib).")
@click.option("--guarded", is_flag=True, help="Three paths: dispatcher, plain bypass and guarded bypass; and the share the guard saves.")
def bench(
    op: str, tree_root: Path, as_json: bool, no_callgrind: bool, sizes: tuple[int, ...], plot_file: Path | None, guarded: bool,
) -> None:
    """Time at::OP through the dispatcher against the bypass, in one process; count instructions/call;
    show what the profiler and autograd see on each path."""
    def action() -> None:
        if guarded:
            if plot_file is not None:
                raise BadInput("--plot draws two paths; drop it with --guarded")
            with progress.step(f"bench {op}: dispatcher, plain and guarded paths (compile, time, callgrind)"):
                measured = guarded_bench.measure(locate(tree_root), op, sizes or bench_step.SIZES, not no_callgrind)
            click.echo(report.dumps(report.bench("guarded", measured)) if as_json else guarded_bench.table(measured))
            return
        pyplot = bench_step.pyplot() if plot_file is not None else None
        with progress.step(f"build: compile {op}'s bypass against the installed libtorch"):
            built = build_step.build(locate(tree_root), op)
        with progress.step("time both paths, interleaved"):
            times = bench_step.wall_times(built.executable, sizes or bench_step.SIZES)
        observed = bench_step.observe(built.executable)
        counts = None
        if not no_callgrind:
            with progress.step("callgrind: instructions per call and call paths"):
                counts = bench_step.callgrind(built.executable, op)
        if plot_file is not None:
            bench_step.plot(op, times, plot_file, pyplot)
            say(f"plot written to {plot_file}")
        if as_json:
            measured = {"op": op, "executable": str(built.executable), "call": built.timed_call, "wall": times,
                        "observed": observed, "callgrind": counts}
            click.echo(report.dumps(report.bench("plain", measured)))
        else:
            click.echo(bench_step.table(op, times, observed, counts, built.timed_call))

    run(action, "bench" if as_json else None)
