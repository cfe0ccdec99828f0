"""`codemod`: make a structured PyTorch op bypass the dispatcher, and undo it.

Exit codes: 0 ok, 1 verification failed, 2 bad input.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from codemod.apply import journal, lock, patch, scratch, transaction, unjournaled
from codemod.capture import fromtorch
from codemod.capture.capture import Capture
from codemod.cli import catalog, pipes, report, review
from codemod.cli import explain as explain_step
from codemod.measure import bench as bench_step
from codemod.measure import guarded_bench, guarded_ext
from codemod.measure import hot as hot_step
from codemod.model import op_name, progress
from codemod.model.errors import EXIT_OK, BadInput, CodemodError, VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, Tree, locate
from codemod.plan.plan import Plan, combined_changes, make_plan
from codemod.verify import build as build_step
from codemod.verify import bypass_ext, fixed_point
from codemod.verify.verify import verify

TREE_OPTION = click.option(
    "--tree", "tree_root", default=".", show_default=True, type=click.Path(file_okay=False, path_type=Path),
    help="Root of the PyTorch checkout (or our target_tree/).",
)


def _say(message: str = "") -> None:
    click.echo(message, err=True)


def _run(action, json_command: str | None = None, finishes_transactions: bool = False) -> None:
    """Run ACTION; on a CodemodError say why and exit with its code (as JSON too, for a --json command).

    A command on a tree first refuses (exit 2) while a transaction there is unfinished, unless it is the
    one that FINISHES_TRANSACTIONS (`recover`)."""
    try:
        tree_root = click.get_current_context().params.get("tree_root")
        if tree_root is not None and not finishes_transactions:
            transaction.refuse_if_interrupted(Path(tree_root).resolve())
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


def _validated_ops(_ctx: click.Context, _param: click.Parameter, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """Op names are checked at the edge, before one becomes a file name (`.codemod/OP.json`)."""
    try:
        for name in (value,) if isinstance(value, str) else value:
            op_name.validated(name)
    except BadInput as error:
        raise click.BadParameter(str(error))
    return value


OP_ARGUMENT = click.argument("op", shell_complete=_complete_ops(bypassed=False), callback=_validated_ops)
OPS_ARGUMENT = click.argument("op_names", metavar="OP...", nargs=-1, required=True, shell_complete=_complete_ops(bypassed=False), callback=_validated_ops)
BYPASSED_OPS_ARGUMENT = click.argument("op_names", metavar="[OP]...", nargs=-1, shell_complete=_complete_ops(bypassed=True), callback=_validated_ops)
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
@click.argument("op_names", metavar="OP...", nargs=-1, shell_complete=_complete_ops(bypassed=False), callback=_validated_ops)
@TREE_OPTION
@click.option("--from-hot", "hot_report", type=click.Path(dir_okay=False, path_type=Path),
              help="Instead of OP: the top bypassable ops of a saved `codemod hot --json` report (see --top).")
@click.option("--top", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --from-hot: how many ops, by estimated saving in this mode (plain, or --guarded).")
@click.option("--dry-run", is_flag=True, help="Print the patch on stdout; write nothing.")
@click.option("--patch", "patch_file", type=click.Path(dir_okay=False, path_type=Path), help="Also write the patch to this file.")
@click.option("--no-verify", is_flag=True, help="Skip verification: the compile before applying and the tree's codegen after.")
@click.option("--no-build", is_flag=True, help="Skip only the compile (against the installed libtorch) and its checks.")
@click.option("--no-compile", is_flag=True,
              help="Skip only g++ on the edited sources after applying (the codegen still runs); said as not compiled.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 unless planning OP again after the bypass finds nothing to do.")
@click.option("--guarded", is_flag=True, help="Keep the dispatcher, autograd and every kernel; take the CPU kernel directly only when that is safe.")
@click.option("--interactive", "-i", is_flag=True, help="Review each hunk (y/n/a/q); the accepted ones are applied together at the end.")
@JSON_OPTION
def bypass(
    op_names: tuple[str, ...], tree_root: Path, hot_report: Path | None, top: int, dry_run: bool, patch_file: Path | None,
    no_verify: bool, no_build: bool, no_compile: bool, check: bool, guarded: bool, interactive: bool, as_json: bool,
) -> None:
    """Make each OP (mul, div, ...) call its CPU kernel without the dispatcher; several ops are applied in one
    transaction and verified together."""

    def action() -> None:
        nonlocal op_names
        if bool(op_names) == (hot_report is not None):
            raise BadInput("give OP... or --from-hot REPORT.json, one of the two")
        if hot_report is not None:
            op_names = _ops_from_hot(hot_report, "guarded" if guarded else "plain", top)
        tree = locate(tree_root)
        if patch_file is not None:
            _refuse_patch_into_state(tree, patch_file)
        ops = list(dict.fromkeys(op_names))
        if len(ops) > 1 and (interactive or check or as_json):
            raise BadInput("-i, --check and --json take one op: run them one op at a time")
        with contextlib.nullcontext() if dry_run or check else lock.held(tree):
            ops = [op for op in ops if not _already_bypassed(tree, op, "guarded" if guarded else "plain", as_json)]
            if not ops:
                return
            seconds: dict[str, float] = {}
            with _timed(seconds, "plan"):
                plans = _plans(tree, ops, guarded)
            if interactive:
                _say(f"review: {review.ANSWERS}")
                try:
                    plans = [review.review(plans[0], _ask, _refuse)]
                except review.Quit:
                    _say("quit: nothing written")
                    return
            diff = patch.render(combined_changes(plans))
            if patch_file is not None:
                _write_patch(patch_file, diff, ' '.join(ops))
            verified: list[str] = []
            unchecked: list[str] = []
            if check:
                _check_fixed_point(tree, plans[0])
            elif dry_run and not as_json:
                click.echo(diff, nl=False)
            elif not dry_run:
                if not (no_verify or no_build):  # before writing: a bypass that does not compile is not applied
                    with _timed(seconds, "build"):
                        for plan in plans:
                            _build_and_check(tree, plan.op, check=True, verbose=False, captured=plan.capture, guarded=plan.guarded)
                with _timed(seconds, "apply"):
                    journal.apply(tree, plans)
            applied = not (dry_run or check)
            if not check:
                for plan in plans:
                    _summary(tree, plan, applied)
            if applied and not no_verify:
                step = "verify: the tree's ATen and autograd codegen, then g++ on the edited sources"
                with progress.step(step), _timed(seconds, "verify"):
                    verification = verify(tree, *plans, compile=not no_compile)
                verified, unchecked = verification.verified, verification.unchecked
                for line in verified:
                    _say(f"verified: {line}")
                for line in unchecked:
                    _say(f"not compiled: {line}")
            if as_json:
                click.echo(report.dumps(report.bypass(
                    plans[0], applied=applied, verified=verified, unchecked=unchecked, seconds=seconds, diff=diff if dry_run else None,
                )))

    _run(action, "bypass" if as_json else None)


def _write_patch(patch_file: Path, diff: str, op: str) -> None:
    """Before anything is applied: a patch that cannot be written stops the bypass with nothing written."""
    try:
        patch_file.write_text(diff)
    except OSError as error:
        why = error.strerror if patch_file.parent.is_dir() else f"no directory {patch_file.parent}"
        raise BadInput(f"{patch_file}: cannot write the patch of `bypass {op}` ({why}); nothing was written: pass --patch a writable file")


def _already_bypassed(tree: Tree, op: str, mode: str, as_json: bool) -> bool:
    """Is OP bypassed already? Said, in which mode; in the other mode it is refused (revert it first)."""
    existing = journal.load(tree, op)
    if existing is None:
        return False
    if existing.mode != mode:
        raise BadInput(
            f"{op} is already bypassed in {existing.mode} mode in {tree.root} (see {journal.JOURNAL_DIR}/{op}.json); "
            f"to bypass it {mode}, run `codemod revert {op} --tree {tree.root}` first; nothing was written"
        )
    _say(f"{op} is already bypassed ({existing.mode}) in {tree.root} (see {journal.JOURNAL_DIR}/{op}.json); nothing to do")
    if as_json:
        click.echo(report.dumps(report.already_bypassed(op)))
    return True


def _plans(tree: Tree, ops: list[str], guarded: bool) -> list[Plan]:
    """Each op planned on the tree as the ops before it leave it (in a scratch copy when there are several)."""
    if len(ops) == 1:
        return [make_plan(tree, ops[0], guarded)]
    plans = []
    with scratch.copy_of(tree, "codemod-bypass-") as planned:
        for op in ops:
            plans.append(make_plan(planned, op, guarded))
            scratch.write(planned, plans[-1].changes)
    return plans


def _refuse_patch_into_state(tree: Tree, patch_file: Path) -> None:
    """codemod's own state (the journals, the transaction log, the lock) is never a place for a patch."""
    resolved = patch_file.resolve()
    for state in (tree.root / journal.JOURNAL_DIR, tree.root / lock.LOCK_FILE):
        if resolved == state or resolved.is_relative_to(state):
            raise BadInput(f"--patch {patch_file}: inside {state}, codemod's own state; write the patch elsewhere, nothing was written")


def _ops_from_hot(hot_report: Path, mode: str, top: int) -> tuple[str, ...]:
    """The ops --from-hot picks: the TOP bypassable ones of the report by estimated saving in MODE."""
    ops = hot_step.top_ops(hot_step.read_report(hot_report, json.loads(report.SCHEMA.read_text())), mode, top)
    for op in ops:
        op_name.validated(op)  # a report is input like any other: its names become journal file names
    _say(f"from {hot_report}: top {len(ops)} bypassable op{'s' if len(ops) > 1 else ''} by estimated {mode} saving: {', '.join(ops)}")
    return tuple(ops)


def _ask(hunk: review.Hunk) -> str:
    if hunk.number == 1:
        _say(click.style(f"--- {hunk.path} ({hunk.of} hunk{'s' if hunk.of > 1 else ''})", bold=True))
    for line in hunk.diff.splitlines():
        color = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
        _say(click.style(line, fg=color) if color else line)
    try:
        return click.prompt(
            f"apply hunk {hunk.number}/{hunk.of} of {hunk.path}? [y,n,a,q]",
            type=click.Choice(["y", "n", "a", "q"]), show_choices=False, err=True,
        )
    except click.Abort:  # end of input (or Ctrl-C): no answer is not a yes
        raise BadInput(
            f"{hunk.path}: no answer for hunk {hunk.number}/{hunk.of} (end of input): quit, nothing written; "
            "answer every hunk with y, n, a or q"
        ) from None


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
@BYPASSED_OPS_ARGUMENT
@TREE_OPTION
@click.option("--all", "revert_all", is_flag=True, help="Revert every bypassed op (last bypassed first).")
@click.option("--force", is_flag=True, help="Drop the edits made by hand since the last bypass where they overlap the op's own lines.")
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
                _say(f"reverted {ops[0]} (patched without a journal; {patch_file} checked by planning again): {len(restored)} files")
                return
            if not ops:
                _say(f"no op is bypassed in {tree.root}; nothing to revert")
                return
            _refuse_unjournaled(tree, [op for op in ops if op not in journaled])
            reverted = journal.revert(tree, ops, force)
        for each in reverted:
            _say(f"reverted {each.op} ({each.mode}): {len(each.files)} files")
            for entry in each.files:
                _say(f"  {entry.path}  ({entry.outcome})")
            for entry in (e for e in each.files if e.since):
                _say(f"{entry.path} was edited since the bypass:\n{entry.since}")
        if as_json:
            click.echo(report.dumps(report.revert(reverted[0].op, list(reverted[0].files))))

    _run(action, "revert" if as_json else None)


def _refuse_unjournaled(tree: Tree, ops: list[str]) -> None:
    """An op with markers but no journal was patched outside codemod: say exactly how to undo it."""
    marked = unjournaled.markers(tree) if ops else {}
    for op in ops:
        if op in marked:
            raise BadInput(unjournaled.how_to_undo(tree, op, marked[op]))


@main.command()
@TREE_OPTION
def recover(tree_root: Path) -> None:
    """Finish a bypass or revert that was killed half-way (or drop it if it had not committed)."""

    def action() -> None:
        tree = locate(tree_root)
        with lock.held(tree):
            finished = transaction.recover(tree.root)
        _say(f"recovered: finished `codemod {finished.command}`" if finished else f"nothing to recover in {tree.root}")

    _run(action, finishes_transactions=True)


@main.command()
@TREE_OPTION
@JSON_OPTION
def status(tree_root: Path, as_json: bool) -> None:
    """Which ops are bypassed, and whether their files still hold what the bypass wrote."""

    def action() -> None:
        tree = locate(tree_root)
        everything = journal.bypassed(tree)
        journals = [(entry, entry.mode, journal.changed_since(tree, entry, everything)) for entry in everything]
        unrecorded = {op: where for op, where in unjournaled.markers(tree).items() if op not in {j.op for j in everything}}
        show = _say if as_json else click.echo  # the answer goes to stdout, unless the JSON object does
        if not journals and not unrecorded:
            show(f"no op is bypassed in {tree.root}")
        for op, where in unrecorded.items():
            show(unjournaled.how_to_undo(tree, op, where))
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
@click.option(
    "--torchgen", "torchgen_from", type=click.Path(exists=True, path_type=Path), default=None,
    help="Take torchgen and its packaged inputs from this torch .whl (pip download --no-deps torch==X) "
    "or torchgen directory instead of the installed torch.",
)
def from_torch(dest: Path, sources: Path, torchgen_from: Path | None) -> None:
    """Write a PyTorch-layout tree at DEST from the installed torch 2.13.0 (or --torchgen's release): its yaml,
    templates, torchgen and autograd codegen, plus the native sources of SOURCES."""

    def action() -> None:
        fromtorch.write_tree_from_torch(dest, sources, torchgen_from)
        origin = torchgen_from or "the installed torch"
        _say(f"wrote a PyTorch-layout tree from {origin} at {dest} (native sources from {sources})")

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
        return
    to_edit = [leftover for leftover in plan.leftovers if leftover.needs_edit]
    if to_edit:
        _say("not rewritten (edit by hand):")
        for leftover in to_edit:
            _say(f"  {leftover}")
    else:
        _say("every reference to the removed at::cpu:: / at::redispatch:: functions was rewritten")
    still_dispatched = [leftover for leftover in plan.leftovers if not leftover.needs_edit]
    if still_dispatched:
        _say("left as they are (they compile; check each still wants what it reaches after the bypass):")
        for leftover in still_dispatched:
            _say(f"  {leftover}")


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
    """Compile the bypass (or the GUARDED one) against the installed libtorch, as a harness and, plain, as a Python
    extension (both at once); with CHECK, compare it with the dispatcher: C++ checks for a (self, other) op, OpInfo
    samples for every op of a plain bypass (exit 1 if they disagree). CAPTURED: the plan's capture; without it,
    the tree's, or once OP is bypassed the one its journal recorded."""
    what = "guarded bypass against the installed libtorch (harness)" if guarded else "bypass against the installed libtorch (harness and Python extension)"
    with progress.step(f"build: compile {op}'s {what}"):
        if guarded:
            built, module = guarded_ext.build(tree, op, captured or build_step.bypassed_or_current(tree, op, guarded=True)[1]), None
        else:
            capture = captured or build_step.bypassed_or_current(tree, op)[1]
            with ThreadPoolExecutor(max_workers=2) as pool:  # two compilers, two cores
                harness = pool.submit(build_step.build, tree, op, captured)
                extension = pool.submit(bypass_ext.load, tree, [op], {op: capture})
                built, (module, _) = harness.result(), extension.result()
    how = "cache hit" if built.cached else "compiled"
    _say(f"{op}: {how} in {built.seconds:.2f} s: {built.executable}")
    _say(f"  source: {built.source}")
    if build_step.is_checkout(tree):
        _say(f"  to build the bypassed checkout itself: cd {tree.root} && {build_step.CHECKOUT_BUILD}")
    if not check:
        return
    if built.cpp_checks:
        checked = build_step.run_checks(built.executable)
        for line in checked.output.splitlines():
            if verbose or line.startswith("FAIL") or line.startswith("checks:"):
                _say(f"  {line}")
        if not checked.ok:
            raise VerificationFailed(f"{op}: the bypass disagrees with the dispatcher ({checked.failed} checks failed)")
    if module is None:
        if not built.cpp_checks:
            _say(f"  {op}: the guarded bypass compiles; no C++ checks for this signature (its fast path calls libtorch's own at::cpu:: kernel)")
        return
    from codemod.verify import opinfo_check  # imports torch (seconds): only when checking

    report = opinfo_check.check_op(tree, op, capture, module)
    _say(f"  {report.summary()}")
    for failure in report.failures[:10]:
        _say(f"  FAIL {failure}")
    report.require_ok()


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
            measured = {"op": op, "executable": str(built.executable), "call": built.timed_call, "wall": times,
                        "observed": observed, "callgrind": counts}
            click.echo(report.dumps(report.bench("plain", measured)))
        else:
            click.echo(bench_step.table(op, times, observed, counts, built.timed_call))

    _run(action, "bench" if as_json else None)


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("script_and_args", nargs=-1, type=click.UNPROCESSED, metavar="[SCRIPT.py [ARGS]...]")
@TREE_OPTION
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Read a trace saved with torch.profiler's export_chrome_trace instead of running a script.")
@JSON_OPTION
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a PNG bar chart of the estimated saving (needs the `plot` extra: matplotlib).")
@click.option("--no-measure", is_flag=True, help="Skip the per-call costs (callgrind, ~1 min per op the first time): no estimate.")
def hot(
    script_and_args: tuple[str, ...], tree_root: Path, trace_file: Path | None, as_json: bool, plot_file: Path | None,
    no_measure: bool,
) -> None:
    """Which aten ops of a run are worth bypassing: run SCRIPT.py ARGS under torch.profiler (or read --trace),
    count calls and self CPU time per op, say whether the tree can bypass each and how many calls the guard would
    let through, and rank them by the estimated instructions a bypass saves. Options of codemod's own are taken
    wherever they stand; put the script's after `--` if they clash."""

    def action() -> None:
        if bool(script_and_args) == (trace_file is not None):
            raise BadInput("give SCRIPT.py [ARGS] or --trace TRACE.json, one of the two")
        tree = locate(tree_root)
        pyplot = bench_step.pyplot() if plot_file is not None else None
        if trace_file is not None:
            trace = hot_step.read_trace(trace_file)
            source = {"script": None, "args": [], "trace": str(trace_file)}
        else:
            script, *args = script_and_args
            with progress.step(f"profile: {script} under torch.profiler"):
                trace = hot_step.profile(Path(script), tuple(args))
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
        hot_report = hot_step.report(rows, statuses, costs, {**source, "tree": str(tree.root)})
        if plot_file is not None:
            hot_step.plot(hot_report, plot_file, pyplot)
            _say(f"plot written to {plot_file}")
        click.echo(report.dumps(hot_report) if as_json else hot_step.table(hot_report))

    _run(action, "hot" if as_json else None)
