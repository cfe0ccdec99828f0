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
"""
from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from codemod.capture import codegen
from codemod.capture.capture import generated_functions
from codemod.model import native_yaml
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, Tree
from codemod.plan.plan import Plan, combined_changes
from codemod.verify import compile_check, overlay_compile


@dataclass(frozen=True)
class Verification:
    verified: list[str]  # what was checked and passed
    unchecked: list[str]  # what could not be checked, and why


def verify(tree: Tree, plan: Plan, *more: Plan, compile: bool = True, ahead: HeadersAhead | None = None) -> Verification:
    """Run the autograd codegen beside the two torchgen runs and (with COMPILE) the compile of the edited sources,
    on two cores; once for PLAN and MORE applied together. The autograd codegen's failure is said first. AHEAD: the
    headers started from the plans' bytes (headers_ahead)."""
    plans = (plan, *more)
    overloads = tuple(name for each in plans for name in each.overloads)
    with tempfile.TemporaryDirectory(prefix="codemod-verify-") as scratch:
        aten_out = Path(scratch, "aten")
        with ThreadPoolExecutor(max_workers=1) as pool:
            autograd_run = pool.submit(codegen.autograd, tree, Path(scratch, "autograd"))
            headers = _headers(tree, ahead)
            entries_from_cache = codegen.aten_on_entries(tree, _entries_in_tree(tree, overloads), aten_out)
            ops_names = {name.replace(".", "_"): name for name in overloads}
            try:
                codegen_checks = _renamed_entries(generated_functions(aten_out / "Functions.h", ops_names), overloads)
                compiled = _compiled(tree, plans, headers) if compile else None
            finally:
                autograd_from_cache = autograd_run.result()  # raises the autograd codegen's failure, before the compile's
    from_cache = [what for what, cached in (
        ("torchgen on the whole yaml", headers.from_cache), ("torchgen on the op's entries", entries_from_cache),
        ("the autograd codegen", autograd_from_cache),
    ) if cached]
    if from_cache:
        codegen_checks.append(f"{', '.join(from_cache)}: ran clean before on the same inputs (build cache), not run again")
    if compiled is None:
        return Verification(codegen_checks, ["the edited sources: --no-compile"])
    return Verification(codegen_checks + compiled.verified(), compiled.unchecked())


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


def _compiled(tree: Tree, plans: tuple[Plan, ...], headers: compile_check.Headers) -> compile_check.CompileReport:
    if compile_check.slim_tree(tree) is not None:  # its headers cannot replace the installed torch's
        return overlay_compile.check(tree, plans)
    before = {change.path: change.before for change in combined_changes(plans)}
    headers_before = functools.partial(compile_check.regenerate_headers, tree, compile_check.CodegenInputs.read(tree.root, before))
    return compile_check.check(tree, headers, plans, compile_check.Before(before, headers_before))


@dataclass(frozen=True)
class HeadersAhead:
    """torchgen's headers for the yaml and templates a plan leaves, generating while the bypass builds and writes."""

    inputs: compile_check.CodegenInputs  # the planned bytes
    headers: Future[compile_check.Headers]


@contextlib.contextmanager
def headers_ahead(tree: Tree, plans: Sequence[Plan]) -> Iterator[HeadersAhead]:
    """Start torchgen's headers for the planned bytes; verify takes them when the tree then holds those bytes (its
    failure, if any, is verify's to report, as it would be running torchgen itself)."""
    after = {change.path: change.after for change in combined_changes(plans)}
    inputs = compile_check.CodegenInputs.read(tree.root, after)
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield HeadersAhead(inputs, pool.submit(compile_check.regenerate_headers, tree, inputs))


def _headers(tree: Tree, ahead: HeadersAhead | None) -> compile_check.Headers:
    """The headers for the yaml and templates on disk: those generated ahead when made from the same bytes."""
    inputs = compile_check.CodegenInputs.read(tree.root)
    if ahead is not None and ahead.inputs == inputs:
        return ahead.headers.result()
    return compile_check.regenerate_headers(tree, inputs)


def _entries_in_tree(tree: Tree, overloads: tuple[str, ...]) -> str:
    """The op's entries as the tree's native_functions.yaml now holds them."""
    doc = native_yaml.load(NATIVE_FUNCTIONS, tree.path(NATIVE_FUNCTIONS).read_text())
    by_name = doc.by_name()
    return "\n".join(doc.entry_text(by_name[name]) for name in overloads)
