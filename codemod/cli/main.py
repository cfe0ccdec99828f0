"""`codemod`: make a structured PyTorch op bypass the dispatcher, and undo it.

Exit codes: 0 ok, 1 verification failed, 2 bad input.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from pathlib import Path

import click

from codemod.measure import bench as bench_step
from codemod.verify import build as build_step
from codemod.cli import catalog
from codemod.cli import pipes
from codemod.verify import fixed_point
from codemod.capture import fromtorch
from codemod.measure import guarded_bench
from codemod.measure import guarded_ext
from codemod.apply import journal
from codemod.apply import lock
from codemod.apply import patch
from codemod.model import progress
from codemod.cli import report
from codemod.cli import review
from codemod.apply import transaction
from codemod.cli import explain as explain_step
from codemod.capture.capture import Capture
from codemod.model.errors import EXIT_OK, BadInput, CodemodError, VerificationFailed
from codemod.plan.plan import Plan, make_plan
from codemod.model.tree import NATIVE_FUNCTIONS, Tree, locate
from codemod.verify.verify import verify

TREE_OPTION = click.option(
    "--tree", "tree_root", default=".", show_default=True, type=click.Path(file_okay=False, path_type=Path),
    help="Root of the PyTorch checkout (or our target_tree/).",
)


def _say(message: str = "") -> None:
    click.echo(message, err=True)


def _run(action, json_command: str | None = None) -> None:
    """Run ACTION; on a CodemodError say why and exit with its code (as JSON too, for a --json command)."""
    try:
        action()
    except CodemodError as error:
        _say(f"codemod: {error}")
        if json_command is not None:
            click.echo(report.dumps(report.error(json_command, str(error), error.exit_code)))
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


def _complete_ops(bypassed: bool):
    """Shell completion of OP from the tree's yaml (see _completion_tree)."""

    def complete(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
        try:
            tree = _completion_tree()
            names = [j.op for j in journal.bypassed(tree)] if bypassed else [s.op for s in catalog.catalog(tree) if s.bypassable]
        except CodemodError:
            return []
        return [name for name in names if name.startswith(incomplete)]

    return complete


OP_ARGUMENT = click.argument("op", shell_complete=_complete_ops(bypassed=False))
BYPASSED_OP_ARGUMENT = click.argument("op", shell_complete=_complete_ops(bypassed=True))
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout (see codemod/output.schema.json).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@click.option("-v", "--verbose", is_flag=True, help="Also print every command run (codegen, compiler, valgrind).")
def main(quiet: bool, verbose: bool) -> None:
    """Rewrite a PyTorch tree so a structured op bypasses the dispatcher.

    `bypass OP` makes OP's entries `manual_cpp_binding`, removes its autograd
    formula and writes its C++ function, method and native API by hand from
    what torchgen generated; `revert OP` restores every byte.
    """
    pipes.tolerate_readers_leaving()
    progress.set_level(progress.QUIET if quiet else progress.VERBOSE if verbose else progress.NORMAL)


@main.command()
@OP_ARGUMENT
@TREE_OPTION
@click.option("--dry-run", is_flag=True, help="Print the patch on stdout; write nothing.")
@click.option("--patch", "patch_file", type=click.Path(dir_okay=False, path_type=Path), help="Also write the patch to this file.")
@click.option("--no-verify", is_flag=True, help="Skip verification: the compile before applying and the tree's codegen after.")
@click.option("--no-build", is_flag=True, help="Skip only the compile (against the installed libtorch) and its checks.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 unless planning OP again after the bypass finds nothing to do.")
@click.option("--guarded", is_flag=True, help="Keep the dispatcher, autograd and every kernel; take the CPU kernel directly only when that is safe.")
@click.option("--interactive", "-i", is_flag=True, help="Review each hunk (y/n/a/q); the accepted ones are applied together at the end.")
@JSON_OPTION
def bypass(
    op: str, tree_root: Path, dry_run: bool, patch_file: Path | None, no_verify: bool, no_build: bool, check: bool,
    guarded: bool, interactive: bool, as_json: bool,
) -> None:
    """Make OP (mul, div, ...) call its CPU kernel without the dispatcher."""

    def action() -> None:
        tree = locate(tree_root)
        with contextlib.nullcontext() if dry_run or check else lock.held(tree):
            if journal.load(tree, op) is not None:
                _say(f"{op} is already bypassed in {tree.root} (see {journal.JOURNAL_DIR}/{op}.json); nothing to do")
                if as_json:
                    click.echo(report.dumps(report.already_bypassed(op)))
                return
            seconds: dict[str, float] = {}
            with _timed(seconds, "plan"):
                plan = make_plan(tree, op, guarded)
            if interactive:
                _say(f"review: {review.ANSWERS}")
                try:
                    plan = review.review(plan, _ask, _refuse)
                except review.Quit:
                    _say("quit: nothing written")
                    return
            diff = patch.render(plan.changes)
            if patch_file is not None:
                patch_file.write_text(diff)
            verified: list[str] = []
            if check:
                _check_fixed_point(tree, plan)
            elif dry_run and not as_json:
                click.echo(diff, nl=False)
            elif not dry_run:
                if not (no_verify or no_build):  # before writing: a bypass that does not compile is not applied
                    with _timed(seconds, "build"):
                        _build_and_check(tree, op, check=True, verbose=False, captured=plan.capture, guarded=plan.guarded)
                with _timed(seconds, "apply"):
                    journal.apply(tree, plan)
            applied = not (dry_run or check)
            if not check:
                _summary(tree, plan, applied)
            if applied and not no_verify:
                with progress.step("verify: the tree's ATen and autograd codegen"), _timed(seconds, "verify"):
                    verified = verify(tree, plan)
                for line in verified:
                    _say(f"verified: {line}")
            if as_json:
                click.echo(report.dumps(report.bypass(plan, applied=applied, verified=verified, seconds=seconds, diff=diff if dry_run else None)))

    _run(action, "bypass" if as_json else None)


def _ask(hunk: review.Hunk) -> str:
    if hunk.number == 1:
        _say(click.style(f"--- {hunk.path} ({hunk.of} hunk{'s' if hunk.of > 1 else ''})", bold=True))
    for line in hunk.diff.splitlines():
        color = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
        _say(click.style(line, fg=color) if color else line)
    return click.prompt(
        f"apply hunk {hunk.number}/{hunk.of} of {hunk.path}? [y,n,a,q]",
        type=click.Choice(["y", "n", "a", "q"]), show_choices=False, err=True,
    )


def _refuse(hunk: review.Hunk) -> None:
    _say(f"hunk {hunk.number}/{hunk.of} of {hunk.path} cannot be left out: {hunk.needed_because}")


@contextlib.contextmanager
def _timed(seconds: dict[str, float], step: str):
    start = time.monotonic()
    try:
        yield
    finally:
        seconds[step] = round(time.monotonic() - start, 3)


def _check_fixed_point(tree: Tree, plan: Plan) -> None:
    problem = fixed_point.second_plan_problem(tree, plan)
    if problem is not None:
        raise VerificationFailed(f"bypass {plan.op} is not a fixed point: {problem}")
    _say(f"checked: planning {plan.op} again after the bypass finds {', '.join(plan.overloads)} manual, nothing to do")


@main.command()
@BYPASSED_OP_ARGUMENT
@TREE_OPTION
@click.option("--force", is_flag=True, help="Restore the recorded bytes even where files were edited since the bypass.")
@JSON_OPTION
def revert(op: str, tree_root: Path, force: bool, as_json: bool) -> None:
    """Restore what `bypass OP` changed; keep later edits of those files (three-way), or refuse (exit 1) where
    they overlap the bypass's own hunks."""

    def action() -> None:
        tree = locate(tree_root)
        with lock.held(tree):
            reverted = journal.revert(tree, op, force)
        _say(f"reverted {op}: {len(reverted)} files")
        for entry in reverted:
            _say(f"  {entry.path}  ({entry.outcome})")
        for entry in (e for e in reverted if e.since):
            _say(f"{entry.path} was edited since the bypass:\n{entry.since}")
        if as_json:
            click.echo(report.dumps(report.revert(op, reverted)))

    _run(action, "revert" if as_json else None)


@main.command()
@TREE_OPTION
def recover(tree_root: Path) -> None:
    """Finish a bypass or revert that was killed half-way (or drop it if it had not committed)."""

    def action() -> None:
        tree = locate(tree_root)
        with lock.held(tree):
            finished = transaction.recover(tree.root)
        _say(f"recovered: finished `codemod {finished.command}`" if finished else f"nothing to recover in {tree.root}")

    _run(action)


@main.command()
@TREE_OPTION
@JSON_OPTION
def status(tree_root: Path, as_json: bool) -> None:
    """Which ops are bypassed, and whether their files still hold what the bypass wrote."""

    def action() -> None:
        tree = locate(tree_root)
        journals = [
            (entry, "guarded" if journal.is_guarded(tree, entry) else "plain", journal.changed_since(tree, entry))
            for entry in journal.bypassed(tree)
        ]
        show = _say if as_json else click.echo  # the answer goes to stdout, unless the JSON object does
        if not journals:
            show(f"no op is bypassed in {tree.root}")
        for entry, mode, changed in journals:
            state = f"changed since: {', '.join(changed)}" if changed else "matches the journal"
            command = f"bypass {entry.op}" + (" --guarded" if mode == "guarded" else "")
            show(f"{entry.op} ({', '.join(entry.overloads)}): {mode} (`{command}`), {len(entry.files)} files, {state}")
        if as_json:
            click.echo(report.dumps(report.status(tree.root, journals)))

    _run(action, "status" if as_json else None)


@main.command()
@TREE_OPTION
@JSON_OPTION
@click.option("--bypassable", "only_bypassable", is_flag=True, help="List only the ops `bypass` can take.")
def ops(tree_root: Path, as_json: bool, only_bypassable: bool) -> None:
    """Every op of the tree's yaml: can `bypass` take it, and if not, why."""

    def action() -> None:
        statuses = catalog.catalog(locate(tree_root))
        shown = [s for s in statuses if s.bypassable or not only_bypassable]
        if as_json:
            click.echo(report.dumps(report.ops(shown)))
            return
        for status in shown:
            detail = ", ".join(status.overloads) if status.bypassable else "; ".join(filter(None, (status.reason, status.detail)))
            click.echo(f"{status.op:<40} {'yes' if status.bypassable else 'no':<4} {detail}")
        _say(catalog.summary(statuses))

    _run(action, "ops" if as_json else None)


@main.command()
@OP_ARGUMENT
@TREE_OPTION
def explain(op: str, tree_root: Path) -> None:
    """OP's call path today and after each kind of bypass, and what a bypass writes by hand. Writes nothing."""
    _run(lambda: click.echo(explain_step.explain(locate(tree_root), op)))


@main.group()
def tree() -> None:
    """Trees to run codemod on."""


@tree.command("from-torch")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--sources", type=click.Path(file_okay=False, path_type=Path), default=fromtorch.REPO_TARGET_TREE, show_default=True,
    help="The native .cpp sources and callers to add (the wheel ships none).",
)
def from_torch(dest: Path, sources: Path) -> None:
    """Write a PyTorch-layout tree at DEST from the installed torch 2.13.0: its yaml, templates, torchgen and
    autograd codegen, plus the native sources of SOURCES."""

    def action() -> None:
        fromtorch.write_tree_from_torch(dest, sources)
        _say(f"wrote a PyTorch-layout tree from the installed torch at {dest} (native sources from {sources})")

    _run(action)


def _summary(tree: Tree, plan: Plan, applied: bool) -> None:
    verb = "changed" if applied else "would change"
    _say(f"bypass {plan.op} ({', '.join(plan.overloads)}) {verb} {len(plan.changes)} files in {tree.root}:")
    for row in patch.stat(plan.changes):
        _say(f"  {row.path}  +{row.added} -{row.removed}" + ("  (new file)" if row.created else ""))
    _say(f"{plan.op} loses:")
    for loss in plan.losses:
        _say(f"  - {loss}")
    if plan.guarded:
        _say("no caller needs rewriting: at::cpu:: and at::redispatch:: functions are still generated in guarded mode")
    elif plan.leftovers:
        _say("not rewritten (edit by hand):")
        for leftover in plan.leftovers:
            _say(f"  {leftover}")
    else:
        _say("every reference to the removed at::cpu:: / at::redispatch:: functions was rewritten")


@main.command()
@OP_ARGUMENT
@TREE_OPTION
@click.option("--no-check", is_flag=True, help="Only compile; do not run the harness's correctness checks.")
@click.option("-v", "--verbose", is_flag=True, help="Print every check, not only the failures.")
@click.option("--checkout", "in_checkout", is_flag=True,
              help="On a full checkout already built once (build/CMakeCache.txt), run its own incremental build instead.")
def build(op: str, tree_root: Path, no_check: bool, verbose: bool, in_checkout: bool) -> None:
    """Compile OP's bypass scaffolding outside libtorch into a checking/timing harness."""

    def action() -> None:
        tree = locate(tree_root)
        if not in_checkout:
            _build_and_check(tree, op, check=not no_check, verbose=verbose)
        elif not build_step.is_checkout(tree):
            raise BadInput(f"{tree.root} is not a full PyTorch checkout (no setup.py and CMakeLists.txt); drop --checkout")
        elif build_step.has_build_dir(tree):
            build_step.build_checkout(tree)
            _say(f"built the checkout: {tree.root}")
        else:
            _say(f"{tree.root} has not been built yet (no build/CMakeCache.txt); build it with:")
            _say(f"  cd {tree.root} && {build_step.CHECKOUT_BUILD}")

    _run(action)


def _build_and_check(
    tree: Tree, op: str, check: bool, verbose: bool, captured: Capture | None = None, guarded: bool = False,
) -> None:
    """Compile the bypass (or the GUARDED one, from CAPTURED) against the installed libtorch; with CHECK, compare it
    with the dispatcher (exit 1 if not equal)."""
    with progress.step(f"build: compile {op}'s {'guarded ' if guarded else ''}bypass against the installed libtorch"):
        built = guarded_ext.build(tree, op, captured) if guarded else build_step.build(tree, op, captured)
    how = "cache hit" if built.cached else "compiled"
    _say(f"{op}: {how} in {built.seconds:.2f} s: {built.executable}")
    _say(f"  source: {built.source}")
    if build_step.is_checkout(tree):
        _say(f"  to build the bypassed checkout itself: cd {tree.root} && {build_step.CHECKOUT_BUILD}")
    if not check:
        return
    checked = build_step.run_checks(built.executable)
    for line in checked.output.splitlines():
        if verbose or line.startswith("FAIL") or line.startswith("checks:"):
            _say(f"  {line}")
    if not checked.ok:
        raise VerificationFailed(f"{op}: the bypass disagrees with the dispatcher ({checked.failed} checks failed)")


@main.command()
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
            _say(f"plot written to {plot_file}")
        if as_json:
            measured = {"op": op, "executable": str(built.executable), "wall": times, "observed": observed, "callgrind": counts}
            click.echo(report.dumps(report.bench("plain", measured)))
        else:
            click.echo(bench_step.table(op, times, observed, counts))

    _run(action, "bench" if as_json else None)
