"""`codemod bypass OP...`: plan, review, compile and check, apply in one transaction, verify."""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import click

from codemod.apply import journal, lock, patch, scratch, targets
from codemod.capture import codegen
from codemod.cli import report, review
from codemod.cli.commands.build import build_and_check
from codemod.cli.options import TREE_OPTION, NeedsOption, complete_ops, prompt_text, run, say, validated_ops, wants_json
from codemod.measure import hot as hot_step
from codemod.model import op_name, progress
from codemod.model.errors import BadInput, CodemodError, VerificationFailed
from codemod.model.tree import Tree, locate
from codemod.plan.plan import Plan, combined_changes, make_plan
from codemod.verify import compile_check, fixed_point
from codemod.verify.verify import Ahead, codegen_ahead, verify


@click.command()
@click.argument("op_names", metavar="OP...", nargs=-1, shell_complete=complete_ops(bypassed=False), callback=validated_ops)
@TREE_OPTION
@click.option("--from-hot", "hot_report", type=click.Path(dir_okay=False, path_type=Path),
              help="Instead of OP: the top bypassable ops of a saved `codemod hot --json` report (see --top).")
@click.option("--top", cls=NeedsOption, needs="hot_report", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --from-hot: how many ops, by estimated saving in this mode (plain, or --guarded).")
@click.option("--dry-run", is_flag=True, help="Print the patch on stdout once the tree's codegen accepts it; write nothing.")
@click.option("--patch", "patch_file", type=click.Path(dir_okay=False, path_type=Path), help="Also write the patch to this file.")
@click.option("--no-verify", is_flag=True, help="Skip verification: the compile and the tree's codegen, before applying and after.")
@click.option("--no-build", is_flag=True, help="Skip only the compile (against the installed libtorch) and its checks.")
@click.option("--no-compile", is_flag=True,
              help="Skip only g++ on the edited sources after applying (the codegen still runs); said as not compiled.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 unless planning OP again after the bypass finds nothing to do.")
@click.option("--guarded", is_flag=True, help="Keep the dispatcher, autograd and every kernel; take the CPU kernel directly only when that is safe.")
@click.option("--interactive", "-i", is_flag=True, help="Review each hunk (y/n/a/q); the accepted ones are applied together at the end.")
def bypass(
    op_names: tuple[str, ...], tree_root: Path, hot_report: Path | None, top: int, dry_run: bool, patch_file: Path | None,
    no_verify: bool, no_build: bool, no_compile: bool, check: bool, guarded: bool, interactive: bool,
) -> None:
    """Make each OP (mul, div, ...) call its CPU kernel without the dispatcher; several ops are applied in one
    transaction and verified together."""

    as_json = wants_json()

    def action() -> None:
        nonlocal op_names
        if bool(op_names) == (hot_report is not None):
            raise BadInput("give OP... or --from-hot REPORT.json, one of the two")
        if hot_report is not None:
            op_names = _ops_from_hot(hot_report, "guarded" if guarded else "plain", top)
        tree = locate(tree_root)
        if patch_file is not None:
            targets.check_patch_file(tree.root, patch_file)
        ops = list(dict.fromkeys(op_names))
        if len(ops) > 1 and (interactive or check):
            raise BadInput("-i and --check take one op: run them one op at a time")
        with contextlib.nullcontext() if dry_run or check else lock.held(tree):
            skipped = [op for op in ops if _already_bypassed(tree, op, "guarded" if guarded else "plain")]
            ops = [op for op in ops if op not in skipped]
            if not ops:
                if as_json:
                    click.echo(report.dumps(report.bypass(
                        [], already_bypassed=skipped, applied=False, verified=[], unchecked=[], seconds={}, diff=None,
                    )))
                return
            seconds: dict[str, float] = {}
            ahead: Ahead | None = None
            with _the_trees_refusal_first(tree):
                with _timed(seconds, "plan"):
                    plans = _planned(tree, ops, guarded)
                if interactive:
                    prompt_text(f"review: {review.ANSWERS}")
                    try:
                        plans = [review.review(plans[0], _ask, _refuse)]
                    except review.Quit:
                        prompt_text("quit: nothing written")
                        return
                if not (dry_run or check or no_verify or no_compile):  # what the compile after writing reads, checked first
                    compile_check.preflight(tree, plans)
                building = not (dry_run or check or no_verify or no_build)
                # the codegen's verdicts on the planned bytes, on the core the build or the fixed point leaves free
                compile_first = not (dry_run or check or no_compile)  # what verify compiles after writing
                ahead_runs = codegen_ahead(tree, plans, threads=1 if building or check else 2, compile_first=compile_first)
                with ahead_runs if not no_verify else contextlib.nullcontext() as verdicts:
                    if check:
                        _check_fixed_point(tree, plans[0])
                    if building:  # before writing: a bypass that does not compile is not applied
                        with _timed(seconds, "build"):
                            for plan in plans:
                                build_and_check(tree, plan.op, check=True, show_checks=False, captured=plan.capture, guarded=plan.guarded)
                    if verdicts is not None:  # before the first write
                        step = "codegen: the tree's autograd codegen and torchgen on the bytes the bypass would write"
                        if compile_first:
                            step += ", g++ on the edited sources and the code they generate for the op"
                        with progress.step(step), _timed(seconds, "codegen"):
                            ahead = verdicts()
                        if dry_run or check:
                            say("checked: the tree's autograd codegen and torchgen accept the bypass's result")
            diff = patch.render(combined_changes(plans))
            verified: list[str] = []
            unchecked: list[str] = []
            if dry_run and not check and not as_json:
                click.echo(_colored(diff), nl=False)
            elif not (dry_run or check):
                with _timed(seconds, "apply"):
                    journal.apply(tree, plans)
            applied = not (dry_run or check)
            if not check:
                for plan in plans:
                    _summary(tree, plan, applied)
            if applied and not no_verify:
                step = "verify: the tree's ATen and autograd codegen, then g++ on the edited sources"
                with progress.step(step), _timed(seconds, "verify"):
                    verification = verify(tree, *plans, compile=not no_compile, ahead=ahead)
                verified, unchecked = verification.verified, verification.unchecked
                for line in verified:
                    say(f"verified: {line}")
                for line in unchecked:
                    say(f"not compiled: {line}")
            if applied and (no_verify or no_compile):  # g++ was to judge the spellings the tool does not rewrite
                for line in _not_judged(plans, "--no-verify" if no_verify else "--no-compile"):
                    say(f"not compiled: {line}")
                    unchecked.append(line)
            if patch_file is not None:  # last: a failure above leaves no patch behind, and no file it was written over
                _write_patch(patch_file, diff, " ".join(ops))
            if as_json:
                click.echo(report.dumps(report.bypass(
                    plans, already_bypassed=skipped, applied=applied, verified=verified, unchecked=unchecked, seconds=seconds,
                    diff=diff if dry_run else None,
                )))

    run(action)


def _write_patch(patch_file: Path, diff: str, op: str) -> None:
    """After everything succeeded, to a place targets.check_patch_file accepted before anything was done."""
    try:
        patch_file.write_text(targets.PATCH_HEADER.format(command=f"bypass {op}") + diff)
    except OSError as error:  # a full disk
        raise BadInput(f"{patch_file}: cannot write the patch of `bypass {op}` ({error.strerror}); write it again with `--dry-run --patch`")


def _already_bypassed(tree: Tree, op: str, mode: str) -> bool:
    """Is OP bypassed already? Said, in which mode; in the other mode it is refused (revert it first)."""
    existing = journal.load(tree, op)
    if existing is None:
        return False
    if existing.mode != mode:
        raise BadInput(
            f"{op} is already bypassed in {existing.mode} mode in {tree.root} (see {journal.JOURNAL_DIR}/{op}.json); "
            f"to bypass it {mode}, run `codemod revert {op} --tree {tree.root}` first; nothing was written"
        )
    say(f"{op} is already bypassed ({existing.mode}) in {tree.root} (see {journal.JOURNAL_DIR}/{op}.json); nothing to do")
    return True


@contextlib.contextmanager
def _the_trees_refusal_first(tree: Tree) -> Iterator[None]:
    """A failure before writing (but a bad input met on the way, which names its file) is the tree's when its autograd
    codegen refuses the tree as it is: that refusal is said instead (bad input). Run only then, so a bypass whose result
    the codegen accepts runs it once, on the planned bytes."""
    try:
        yield
    except BadInput:
        raise
    except CodemodError:
        codegen.check_autograd(tree)
        raise


def _planned(tree: Tree, ops: list[str], guarded: bool) -> list[Plan]:
    """Each op planned on the tree as the ops before it leave it (in a scratch copy when there are several), and
    every file it writes checked (a directory where a file goes, ...), before anything is compiled or written."""
    if len(ops) == 1:
        return [_writable(tree, make_plan(tree, ops[0], guarded))]
    plans = []
    with scratch.copy_of(tree, "codemod-bypass-") as planned:
        for op in ops:
            plans.append(_writable(tree, make_plan(planned, op, guarded)))
            scratch.write(planned, plans[-1].changes)
    return plans


def _writable(tree: Tree, plan: Plan) -> Plan:
    targets.check_writes(tree.root, [(change.path, change.after) for change in plan.changes])
    return plan


def _ops_from_hot(hot_report: Path, mode: str, top: int) -> tuple[str, ...]:
    """The ops --from-hot picks: the TOP bypassable ones of the report by estimated saving in MODE."""
    hot = hot_step.read_report(hot_report, json.loads(report.SCHEMA.read_text()))
    ops = hot_step.top_ops(hot, mode, top)
    for op in ops:
        op_name.validated(op)  # a report is input like any other: its names become journal file names
    say(f"from {hot_report}: top {len(ops)} bypassable op{'s' if len(ops) > 1 else ''} {hot_step.ranked(hot, mode, ops)}: {', '.join(ops)}")
    return tuple(ops)


def _ask(hunk: review.Hunk) -> str:
    if hunk.number == 1:
        prompt_text(click.style(f"--- {hunk.path} ({hunk.of} hunk{'s' if hunk.of > 1 else ''})", bold=True))
    prompt_text(_colored(hunk.diff).rstrip("\n"))
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


def _colored(diff: str) -> str:
    """DIFF's lines colored as git colors a diff: file headers bold, hunk headers cyan, removed lines red, added green.
    click.echo drops the colors unless --color (auto: on a terminal) keeps them; the bytes are otherwise the same."""
    colored, in_header = [], False
    for line in diff.split("\n"):
        in_header = line.startswith("diff --git ") or in_header and not line.startswith("@@")
        color = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
        colored.append(click.style(line, bold=True) if in_header else click.style(line, fg=color) if color else line)
    return "\n".join(colored)


def _refuse(hunk: review.Hunk) -> None:
    prompt_text(f"hunk {hunk.number}/{hunk.of} of {hunk.path} cannot be left out: {hunk.needed_because}")


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
    say(f"checked: planning {plan.op} again after the bypass finds {', '.join(plan.overloads)} manual, nothing to do")


def _not_judged(plans: list[Plan], flag: str) -> list[str]:
    """The files only g++ can judge (a spelling the tool does not rewrite may reach a removed function), when FLAG
    skips g++."""
    paths = sorted({leftover.path for plan in plans for leftover in plan.leftovers if leftover.judged_by_compile})
    return [f"{', '.join(paths)}: {flag}: g++ did not judge whether they still reach a removed function"] if paths else []


def _summary(tree: Tree, plan: Plan, applied: bool) -> None:
    verb = "changed" if applied else "would change"
    say(f"bypass {plan.op} ({', '.join(plan.overloads)}) {verb} {len(plan.changes)} files in {tree.root}:")
    for row in patch.stat(plan.changes):
        say(f"  {row.path}  +{row.added} -{row.removed}" + ("  (new file)" if row.created else ""))
    say(f"{plan.op} loses:")
    for loss in plan.losses:
        say(f"  - {loss}")
    if plan.guarded:
        renamed = ", ".join(snippet.name for snippet in plan.capture.renamed_inside_at)
        kept = f"; torchgen renames {renamed} __dispatch_, so the bypass writes them again as generated" if renamed else ""
        say(f"no caller needs rewriting: at::cpu:: functions are still generated in guarded mode{kept}")
        return
    to_edit = [leftover for leftover in plan.leftovers if leftover.needs_edit and not leftover.judged_by_compile]
    judged = [leftover for leftover in plan.leftovers if leftover.judged_by_compile]
    if to_edit:
        say("not rewritten (edit by hand):")
        for leftover in to_edit:
            say(f"  {leftover}")
    if judged:
        say("may reach them by a spelling the tool does not rewrite (g++ judges each file after the bypass):")
        for leftover in judged:
            say(f"  {leftover}")
    if not to_edit and not judged:
        say("every reference to the removed at::cpu:: / at::redispatch:: functions was rewritten")
    still_dispatched = [leftover for leftover in plan.leftovers if not leftover.needs_edit]
    if still_dispatched:
        say("left as they are (they compile; check each still wants what it reaches after the bypass):")
        for leftover in still_dispatched:
            say(f"  {leftover}")
