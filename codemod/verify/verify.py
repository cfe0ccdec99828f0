"""Verify a bypassed tree with its own codegen: both codegens run clean, and
torchgen no longer generates the op's dispatcher entry under its public name.

The ATen side is two runs of the tree's torchgen instead of one full generation
(about a minute here, nearly all of it writing the sources of the thousands of
functions the bypass did not touch):

- `torchgen.gen --generate headers` on the whole edited yaml: torchgen's own entry
  point parses it, validates every entry and the checks across entries (structured
  delegates, groups, views), and writes the headers, which the compile check
  (compile_check.py) compiles every edited source and rewritten caller against;
- full generation (headers and sources) of the op's entries as they now are in the
  tree, where the renamed `at::__dispatch_` entries are checked.

The trade-off: the untouched functions' code is not regenerated. Their entries are
byte-identical, and what torchgen generates for a function depends on its entry
and its group only (capture relies on the same), so that code is what it was.
The autograd codegen runs in full: the foreach cascade is a cross-entry effect.

All three run first on the bytes the bypass plans to write (codegen_ahead), before
the first write: a result they refuse is never written. So does every compile verify
makes: of the edited sources and the callers that reach a removed function, and of the
units beside them (the op's generated code, generated_units.py; in guarded mode, the
unit that uses every guarded function, guarded_unit.py): code the bypass writes or
torchgen generates for it that g++ rejects is never written either (but a call left
behind at a removed function, named after writing as the place to rewrite by hand), and
the compile after writing finds their records. After writing, verify
looks each run up again by its inputs as they are on disk, and finds the same
build-cache entries only if the tree holds exactly those bytes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from codemod.capture import codegen
from codemod.capture.capture import generated_functions
from codemod.model import native_yaml
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, Tree
from codemod.plan.plan import Plan, combined_changes
from codemod.verify import compile_check, generated_units, guarded_unit, overlay_compile

# What verify says of the codegen runs it found in the build cache instead of running them.
_PLANNED = "ran clean on the planned bytes before writing; the tree now holds exactly those bytes, not run again"
_KEPT = "ran clean before on the same inputs (build cache), not run again"
_Result = TypeVar("_Result")


@dataclass(frozen=True)
class Verification:
    verified: list[str]  # what was checked and passed
    unchecked: list[str]  # what could not be checked, and why


@dataclass(frozen=True)
class Ahead:
    """The codegen runs on the bytes the plans leave, all clean, before writing: each one's build-cache entry (named by
    its inputs) and whether an earlier run had made it."""

    headers: tuple[Path, bool]  # torchgen's headers of the whole yaml
    entries: tuple[Path, bool]  # torchgen on the op's entries
    autograd: tuple[Path, bool]


def verify(tree: Tree, plan: Plan, *more: Plan, compile: bool = True, ahead: Ahead | None = None) -> Verification:
    """Run the autograd codegen beside the two torchgen runs and (with COMPILE) the compile of the edited sources,
    on two cores; once for PLAN and MORE applied together. The autograd codegen's failure is said first. AHEAD: the
    same runs on the planned bytes (codegen_ahead), which each run here finds in the build cache when the tree holds
    those bytes."""
    plans = (plan, *more)
    overloads = tuple(name for each in plans for name in each.overloads)
    with tempfile.TemporaryDirectory(prefix="codemod-verify-") as scratch:
        with ThreadPoolExecutor(max_workers=1) as pool:
            autograd_run = pool.submit(codegen.autograd, tree, Path(scratch, "autograd"))
            try:
                headers = compile_check.regenerate_headers(tree)
                codegen_checks, entries = _entries_renamed(tree, overloads, Path(scratch, "aten"))
                compiled = _compiled(tree, plans, headers, entries[0]) if compile else None
            finally:
                autograd = autograd_run.result()  # raises the autograd codegen's failure, before the others'
    codegen_checks += _not_run_again((
        ("torchgen on the whole yaml", (headers.root, headers.from_cache), ahead and ahead.headers),
        ("torchgen on the op's entries", entries, ahead and ahead.entries),
        ("the autograd codegen", autograd, ahead and ahead.autograd),
    ))
    if compiled is None:
        return Verification(codegen_checks, ["the edited sources: --no-compile"])
    return Verification(codegen_checks + compiled.verified(), compiled.unchecked())


def _entries_renamed(tree: Tree, overloads: tuple[str, ...], out_dir: Path) -> tuple[list[str], tuple[Path, bool]]:
    """torchgen on the op's entries as the tree holds them, into OUT_DIR: what it verified (the dispatcher entries
    generated under new names only), and the run's build-cache entry and whether it was kept."""
    ran = codegen.aten_on_entries(tree, entries_in_tree(tree, overloads), out_dir)
    ops_names = {name.replace(".", "_"): name for name in overloads}
    return _renamed_entries(generated_functions(out_dir / "Functions.h", ops_names), overloads), ran


def _not_run_again(runs: Sequence[tuple[str, tuple[Path, bool], tuple[Path, bool] | None]]) -> list[str]:
    """Of RUNS (what, its build-cache entry and whether it was kept, the same run on the planned bytes if any), those
    taken from the cache: the ones run on the planned bytes before writing (the same entry: the tree holds exactly those
    bytes), and those an earlier run kept."""
    by_wording: dict[str, list[str]] = {_PLANNED: [], _KEPT: []}
    for what, (entry, cached), ahead in runs:
        if cached:
            by_wording[_PLANNED if ahead == (entry, False) else _KEPT].append(what)
    return [f"{', '.join(whats)}: {wording}" for wording, whats in by_wording.items() if whats]


def _renamed_entries(generated: list, overloads: tuple[str, ...]) -> list[str]:
    """What the codegen checks verified, once torchgen generates the op's dispatcher entries under new names only."""
    if not generated:
        raise VerificationFailed(f"torchgen generates no at:: function for {', '.join(overloads)}")
    public = sorted({f.name for f in generated if not f.name.startswith("__dispatch_")})
    if public:
        raise VerificationFailed(f"torchgen still generates {', '.join('at::' + n for n in public)} through the dispatcher")
    renamed = sorted({f.name for f in generated})
    return [
        "torchgen (ATen codegen) ran clean: it accepts the whole edited native_functions.yaml, generates its "
        "headers, and every file for the op's entries",
        "autograd codegen ran clean",
        f"torchgen now generates {', '.join('at::' + n for n in renamed)} (the dispatcher entries, renamed)",
    ]


def _compiled(tree: Tree, plans: tuple[Plan, ...], headers: compile_check.Headers, entries_run: Path) -> compile_check.CompileReport:
    """The edited sources and the rewritten callers compiled, a guarded op's unit that uses every guarded function, and
    the sources torchgen and the autograd codegen generate for the ops that a CPU build compiles (ENTRIES_RUN:
    torchgen's run on their entries)."""
    generated = generated_sources(tree, plans, headers, entries_run)
    report = compiled(tree, plans, headers, [*guarded_unit.units(plans), *generated.units])
    return dataclasses.replace(report, not_compiled=(*report.not_compiled, *generated.not_compiled))


def compiled(tree: Tree, plans: Sequence[Plan], headers: compile_check.Headers, units: Sequence[compile_check.Unit] = ()) -> compile_check.CompileReport:
    """What PLANS wrote and the callers they rewrote, and UNITS, compiled as the tree allows: against its regenerated
    HEADERS, a full tree's (a slim tree), or not at all (another torchgen's tree, each file named with why)."""
    foreign = compile_check.foreign_torchgen(tree)
    if foreign is not None:  # the installed torch's headers are not what its code is generated for
        targets, templates = compile_check.targets_of(plans)
        paths = [*(t.path for t in targets), *templates, *(unit.path for unit in units)]
        return compile_check.CompileReport((), (), (), tuple(compile_check.NotCompiled(path, foreign) for path in paths), 0.0)
    if compile_check.slim_tree(tree) is not None:  # its headers cannot replace the installed torch's
        return overlay_compile.check(tree, plans, units)
    return compile_check.check(tree, headers, plans, compile_check.Before.of(tree, plans), units=units)


def generated_sources(
    tree: Tree, plans: Sequence[Plan], headers: compile_check.Headers, entries_run: Path | None = None,
) -> generated_units.GeneratedSources:
    """What the codegen generates for PLANS' ops that a CPU build compiles, as units (generated_units.py), from
    torchgen's run on their entries as the tree holds them (ENTRIES_RUN; made here when None) and the autograd codegen's,
    made here; where the latter refuses the entries alone, its sources are named as not compiled (its run on the whole
    edited yaml is the verdict)."""
    overloads = tuple(name for plan in plans for name in plan.overloads)
    entries = entries_in_tree(tree, overloads)
    if entries_run is None:
        with tempfile.TemporaryDirectory(prefix="codemod-entries-") as scratch:
            entries_run = codegen.aten_on_entries(tree, entries, Path(scratch))[0]
    try:
        autograd_run, refused = codegen.autograd_on_entries(tree, entries)[0], []
    except codegen.CodegenFailed as failure:
        reason = (failure.exception.splitlines() or ["no message"])[0]
        why = f"the autograd codegen refuses the op's entries alone ({reason}); its run on the whole edited yaml is checked"
        autograd_run, refused = None, [compile_check.NotCompiled(f"{codegen.AUTOGRAD_OUT}/", why)]
    generated = generated_units.units(entries_run, autograd_run, headers.root, plans)
    return dataclasses.replace(generated, not_compiled=[*generated.not_compiled, *refused])


@contextlib.contextmanager
def codegen_ahead(tree: Tree, plans: Sequence[Plan], threads: int = 1, compile_first: bool = False) -> Iterator[Callable[[], Ahead]]:
    """Start verify's codegen runs on the bytes PLANS leave, on THREADS threads (one beside the harness's compile): the
    autograd codegen, torchgen on the op's entries (renamed), torchgen's headers of the whole yaml, in a scratch tree
    of what the codegen reads (codegen.planned_tree); with COMPILE_FIRST, then the compiles verify makes after writing
    (_compiled_ahead). Yields the wait for the verdicts (the codegen's, then g++'s), which raises VerificationFailed
    with the first refusal; leaving the block waits for the runs started and drops the others: a refusal stops the
    compiles at those under way (a refused bypass writes nothing, so it does not wait for g++'s verdict on its code)."""
    planned = {change.path: change.after for change in combined_changes(plans)}
    overloads = tuple(name for plan in plans for name in plan.overloads)
    with codegen.planned_tree(tree, planned) as overlay, tempfile.TemporaryDirectory(prefix="codemod-ahead-") as scratch:
        pool = ThreadPoolExecutor(max_workers=threads)
        stop_compiles = threading.Event()
        try:
            autograd = pool.submit(codegen.autograd, overlay, Path(scratch, "autograd"))
            entries = pool.submit(_entries_renamed, overlay, overloads, Path(scratch, "aten"))
            headers = pool.submit(compile_check.regenerate_headers, tree, compile_check.CodegenInputs.read(tree.root, planned))
            compiles = pool.submit(_compiled_ahead, tree, overlay, plans, headers, entries, stop_compiles) if compile_first else None

            def verdicts() -> Ahead:  # the autograd codegen's first, as verify says it; then g++'s
                verdict = functools.partial(_verdict, ops=" ".join(plan.op for plan in plans), overlay=overlay, tree=tree)
                autograd_ran = verdict(autograd, "autograd codegen")
                entries_ran = verdict(entries, "torchgen")[1]
                kept_headers = verdict(headers, "torchgen")
                if compiles is not None:
                    verdict(compiles, "g++")
                return Ahead((kept_headers.root, kept_headers.from_cache), entries_ran, autograd_ran)

            yield verdicts
        finally:
            stop_compiles.set()  # leaving the block: after every verdict, or at a refusal
            pool.shutdown(cancel_futures=True)


def _compiled_ahead(
    tree: Tree, overlay: Tree, plans: Sequence[Plan], headers: Future[compile_check.Headers], entries: Future[tuple[list[str], tuple[Path, bool]]],
    stop_compiles: threading.Event,
) -> None:
    """What verify compiles after writing, compiled before writing on the bytes PLANS write, against the headers verify
    compiles them against after (a slim tree's: the full tree's with PLANS applied): the edited sources and the callers
    that reach a removed function, then the units verify compiles beside them (a guarded op's unit, the op's generated
    code from the codegen's runs on the planned entries in OVERLAY). Code that does not compile is refused with g++'s
    errors before anything is written (compile_check.compile_ahead); verify finds the records of the rest."""
    if compile_check.foreign_torchgen(tree) is not None:  # named as not compiled after writing, and why
        return
    if compile_check.slim_tree(tree) is not None:
        full_tree = overlay_compile.full_tree_headers(tree, plans)
        if full_tree is None:  # a slim tree the full tree cannot stand for: named after writing
            return
        regenerated, before = full_tree
    else:
        regenerated, before = headers.result(), compile_check.Before.of(tree, plans)
    generated = generated_sources(overlay, plans, headers.result(), entries.result()[1][0])
    compile_check.compile_ahead(tree, regenerated, plans, [*guarded_unit.units(plans), *generated.units], stop_compiles, before)


def _verdict(run: Future[_Result], what: str, ops: str, overlay: Tree, tree: Tree) -> _Result:
    """RUN's result, else its refusal of what `bypass OPS` plans (WHAT's words, with the tree's paths for OVERLAY's)."""
    try:
        return run.result()
    except codegen.CodegenFailed as failure:
        reason = failure.exception.splitlines()[0] if failure.exception else "no message"
        refusal = f"the result of `bypass {ops}` is refused by the tree's {what}: {reason.replace(str(overlay.root), str(tree.root))}"
    except VerificationFailed as failure:  # the op's entries generated under their public names
        refusal = f"in the result of `bypass {ops}`, {failure}"
    after = "\n" if "\n" in refusal else "; "  # g++'s errors end on their own line
    raise VerificationFailed(f"{refusal}{after}nothing was written (`--dry-run --no-verify` prints the patch)")


def entries_in_tree(tree: Tree, overloads: tuple[str, ...]) -> str:
    """The op's entries as the tree's native_functions.yaml now holds them."""
    doc = native_yaml.load(NATIVE_FUNCTIONS, tree.path(NATIVE_FUNCTIONS).read_text())
    by_name = doc.by_name()
    return "\n".join(doc.entry_text(by_name[name]) for name in overloads)
