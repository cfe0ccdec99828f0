"""`codemod build OP`: the bypass compiled against the installed libtorch and checked against the dispatcher."""
from __future__ import annotations

from pathlib import Path

import click

from codemod.capture.capture import Capture
from codemod.cli import report
from codemod.cli.options import OP_ARGUMENT, TREE_OPTION, run, say, wants_json
from codemod.measure import guarded_ext
from codemod.model import progress
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import Tree, locate
from codemod.verify import build as build_step
from codemod.verify import bypass_ext, check_process, checkout, checks
from codemod.verify.captured import bypassed_or_current, current_entries
from codemod.verify.compiler import Built


@click.command()
@OP_ARGUMENT
@TREE_OPTION
@click.option("--no-check", is_flag=True, help="Only compile; do not run the harness's correctness checks.")
@click.option("--show-checks", is_flag=True, help="Print every check, not only the failures.")
@click.option("--checkout", "in_checkout", is_flag=True,
              help="On a full checkout already built once (build/CMakeCache.txt), run its own incremental build instead.")
def build(op: str, tree_root: Path, no_check: bool, show_checks: bool, in_checkout: bool) -> None:
    """Compile OP's bypass scaffolding outside libtorch into a checking/timing harness."""

    as_json = wants_json()

    def action() -> None:
        tree = locate(tree_root)
        command = f"cd {tree.root} && {checkout.CHECKOUT_BUILD}"
        if not in_checkout:
            built = build_and_check(tree, op, check=not no_check, show_checks=show_checks)
        elif not checkout.is_checkout(tree):
            raise BadInput(f"{tree.root} is not a full PyTorch checkout (no setup.py and CMakeLists.txt); drop --checkout")
        elif checkout.has_build_dir(tree):
            checkout.build_checkout(tree)
            say(f"built the checkout: {tree.root}")
            built = {"checkout": {"built": True, "command": command}}
        else:
            say(f"{tree.root} has not been built yet (no build/CMakeCache.txt); build it with:")
            say(f"  {command}")
            built = {"checkout": {"built": False, "command": command}}
        if as_json:
            click.echo(report.dumps(report.build(op, built)))

    run(action)


def build_and_check(
    tree: Tree, op: str, check: bool, show_checks: bool, captured: Capture | None = None, guarded: bool = False,
) -> dict:
    """Compile the bypass (or the GUARDED one) against the installed libtorch, as a harness and, plain, in the same
    compile, as a Python extension; with CHECK, compare it with the dispatcher: C++ checks for a (self, other) op,
    OpInfo samples for every op of a plain bypass (exit 1 if they disagree). CAPTURED: the plan's capture; without
    it, the tree's, or once OP is bypassed the one its journal recorded. Returns what `build --json` reports."""
    what = "guarded bypass against the installed libtorch (harness)" if guarded else "bypass against the installed libtorch (harness and Python extension, one compile)"
    capture = captured or bypassed_or_current(tree, op, guarded)[1]
    refusal = None if guarded else bypass_ext.unbindable(capture)
    if refusal is not None:  # before compiling anything
        raise refusal
    with check_process.Checker() as checker:
        with progress.step(f"build: compile {op}'s {what}"):
            # the check's process imports torch (seconds) beside the compiler
            built = guarded_ext.build(tree, op, capture) if guarded else build_step.build(
                tree, op, captured, compiling=checker.start if check else lambda: None)
        return _report_and_check(tree, op, capture, built, checker, check, show_checks, guarded)


def _report_and_check(tree: Tree, op: str, capture: Capture, built: Built, checker: check_process.Checker,
                      check: bool, show_checks: bool, guarded: bool) -> dict:
    how = "cache hit" if built.cached else "compiled"
    say(f"{op}: {how} in {built.seconds:.2f} s: {built.executable}")
    say(f"  source: {built.source}")
    outcome = {"mode": "guarded" if guarded else "plain", "executable": str(built.executable), "source": str(built.source),
               "cached": built.cached, "seconds": round(built.seconds, 3), "cpp_checks": None, "torch_comparisons": None}
    if checkout.is_checkout(tree):
        say(f"  to build the bypassed checkout itself: cd {tree.root} && {checkout.CHECKOUT_BUILD}")
    if not check:
        return outcome
    kept = checks.kept_verdicts(built, op)
    verdicts = kept or _run_checks(tree, op, built, checker, show_checks)
    if verdicts["cpp_output"] is not None:
        _say_cpp_checks(verdicts["cpp_output"], show_checks)
        passed, failed = checks.tally(verdicts["cpp_output"])
        outcome["cpp_checks"] = {"passed": passed, "failed": failed}
    elif built.module is None:
        say(f"  {op}: the guarded bypass compiles; no C++ checks for this signature (its fast path calls libtorch's own at::cpu:: kernel)")
    if verdicts["torch_summary"] is not None:
        say(f"  {verdicts['torch_summary']}")
        outcome["torch_comparisons"] = verdicts["torch_comparisons"]
    if kept is not None:
        say("  these checks passed before on the same build, samples and torch (build cache), not run again")
    elif any(verdict is not None for verdict in verdicts.values()):
        checks.keep_verdicts(built, op, verdicts)
    outcome["checks_kept"] = kept is not None
    return outcome


def _say_cpp_checks(output: str, show_checks: bool) -> None:
    """The harness's checks as it printed them: the failures and the count, or with SHOW_CHECKS every one."""
    for line in output.splitlines():
        if show_checks or line.startswith("FAIL") or line.startswith("checks:"):
            say(f"  {line}")


def _run_checks(tree: Tree, op: str, built: Built, checker: check_process.Checker, show_checks: bool) -> checks.Verdicts:
    """Run BUILT's C++ checks and, where it binds the bypass, the comparisons with torch; VerificationFailed on the
    first that disagrees, naming it, after what it printed."""
    cpp_output = torch_summary = torch_comparisons = None
    if built.cpp_checks:
        with progress.step(f"check: {op}'s bypass against the dispatcher, the harness's checks"):  # its seconds: they ran
            checked = checks.run_checks(built.executable)
        cpp_output = checked.output
        if not checked.ok:
            _say_cpp_checks(checked.output, show_checks)
            raise VerificationFailed(f"{op}: the bypass disagrees with the dispatcher ({checked.failed} checks failed)")
    if built.module is not None:
        with progress.step(f"check: {op}'s bypass against torch on OpInfo samples, generated calls and edge cases"):
            compared = checker.check(op, built.module, current_entries(tree, op).groups)
        if not compared.ok:
            say(f"  {compared.summary()}")
            for failure in compared.failures[:10]:
                say(f"  FAIL {failure}")
            compared.require_ok()
        torch_summary = compared.summary()
        torch_comparisons = {"by_overload": dict(compared.checked), "both_raise": compared.both_raise, "dtypes": compared.dtypes}
    return {"cpp_output": cpp_output, "torch_summary": torch_summary, "torch_comparisons": torch_comparisons}
