"""Check a compiled bypass against torch, overload by overload, on PyTorch's own sample inputs and ours.

For each structured group and each call of `samples` (OpInfo samples bound to the group,
or calls generated from the schema where no OpInfo sample fits, plus our edge cases),
the bypass (`bypass_ext`) and the installed torch's dispatcher entry (`torch.ops.aten`)
run the functional, out= (an empty out of the result's dtype, resized; then one of the
wrong dtype, and one too large) and in-place variants (on clones of self; skipped where
the OpInfo sample broadcasts self, as PyTorch's tests do). Each pair must both raise, or
agree under `torch.testing.assert_close` (values, NaN equal NaN, dtype, shape, strides),
and out= / in-place must return the tensor they wrote.
"""
from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import torch

from codemod.capture.capture import Capture
from codemod.model import progress
from codemod.model.errors import VerificationFailed
from codemod.model.tree import Tree
from codemod.verify import bypass_ext, samples
from codemod.verify.captured import current_entries
from codemod.verify.samples import Call, Group, Overload


@dataclass(frozen=True)
class Failure:
    overload: str
    variant: str  # "functional", "out= (resized)", "in-place", ...
    call: str  # Call.describe()
    what: str

    def __str__(self) -> str:
        return f"{self.overload} {self.variant}, {self.call}: {self.what}"


@dataclass
class CheckReport:
    op: str
    dtypes: list[str]
    checked: Counter = field(default_factory=Counter)  # overload -> comparisons
    both_raise: int = 0
    calls_by_source: Counter = field(default_factory=Counter)  # "OpInfo", "schema", "edge" -> calls
    inplace_skipped: int = 0  # OpInfo samples that broadcast self
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and sum(self.checked.values()) > 0

    def require_ok(self) -> None:
        """Raise VerificationFailed (exit 1) naming the first failing call, unless every comparison agreed."""
        if not self.ok:
            first = self.failures[0] if self.failures else "no comparison was made"
            raise VerificationFailed(f"{self.op}: the bypass disagrees with torch on {len(self.failures)} of "
                                     f"{sum(self.checked.values())} comparisons; the first: {first}")

    def summary(self) -> str:
        per_overload = ", ".join(f"{name} {count}" for name, count in self.checked.items())
        sources = ", ".join(f"{count} {source}" for source, count in self.calls_by_source.items())
        return (f"{self.op}: {sum(self.checked.values())} comparisons with torch ({per_overload}); calls: {sources}; "
                f"dtypes {', '.join(self.dtypes)}; {self.both_raise} where both raise; "
                f"{self.inplace_skipped} in-place skipped (the sample broadcasts self); {len(self.failures)} failed")


def check_op(tree: Tree, op: str, captured: Capture | None = None, module: ModuleType | None = None) -> CheckReport:
    """Compile OP's bypass as an extension (unless MODULE binds it already) and check every structured group."""
    if module is None:
        module, _ = bypass_ext.load(tree, [op], {op: captured} if captured else None)
    groups = [samples.group_of(g) for g in current_entries(tree, op).groups]
    with progress.step(f"check: {op}'s bypass against torch on OpInfo samples, generated calls and edge cases"):
        return check(module, op, groups)


def check(module: ModuleType, op: str, groups: list[Group]) -> CheckReport:
    infos = samples.opinfos(op)
    dtypes = samples.supported_dtypes(infos)
    report = CheckReport(op, [samples.dtype_name(d) for d in dtypes])
    torch.manual_seed(0)
    for group in groups:
        calls = [c for dtype in dtypes for c in samples.opinfo_calls(group, op, dtype)]
        if calls:
            report.calls_by_source["OpInfo"] += len(calls)
        else:  # no OpInfo, or none of its samples fits this group
            calls = [c for dtype in dtypes for c in samples.schema_calls(group, (3, 4), dtype, "schema")]
            report.calls_by_source["schema"] += len(calls)
        edges = samples.edge_calls(group, dtypes)
        report.calls_by_source["edge"] += len(edges)
        for call in (*calls, *edges):
            _check_call(module, group, call, report)
        _check_out_errors(module, group, edges[0], report)
    return report


def _outcome(module: ModuleType, run: Callable[[], torch.Tensor]) -> tuple[torch.Tensor | None, str | None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "An output with one or more elements was resized": both paths warn
            return module.quietly(run), None
    except Exception as error:  # noqa: BLE001  (any error counts, as long as both paths raise)
        return None, f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200] if str(error).strip() else ''}"


def _compare(module: ModuleType, report: CheckReport, overload: Overload, variant: str, call: Call,
             reference: Callable[[], torch.Tensor], bypass: Callable[[], torch.Tensor]) -> torch.Tensor | None:
    """Run both; record a failure unless both raise or both agree. Returns torch's result."""
    report.checked[overload.name] += 1
    want, want_error = _outcome(module, reference)
    got, got_error = _outcome(module, bypass)
    what = None
    if want_error and got_error:
        report.both_raise += 1
    elif want_error or got_error:
        what = f"only the bypass raised: {got_error}" if got_error else f"only torch raised: {want_error}"
    else:
        try:
            torch.testing.assert_close(got, want, equal_nan=True, check_stride=True)
        except AssertionError as difference:
            what = " ".join(str(difference).split("\n")[:4])
    if what is not None:
        report.failures.append(Failure(overload.name, variant, call.describe(), what))
    return want


def _returning(result: torch.Tensor, written: torch.Tensor, variant: str) -> torch.Tensor:
    if result is not written:
        raise AssertionError(f"the {variant} variant did not return the tensor it wrote")
    return written


def _check_call(module: ModuleType, group: Group, call: Call, report: CheckReport) -> None:
    args = call.arguments
    want = None
    if group.functional is not None:
        function = getattr(module, group.functional.python_name)
        want = _compare(module, report, group.functional, "functional", call,
                        lambda: group.functional.reference()(**args), lambda: function(**args))
    first = next(v for v in args.values() if isinstance(v, torch.Tensor))
    out_dtype = want.dtype if want is not None else first.dtype
    _check_out(module, group, call, report, "out= (resized)", lambda: torch.empty(0, dtype=out_dtype))
    if group.inplace is None:
        return
    if call.broadcasts_input:
        report.inplace_skipped += 1
        return
    function = getattr(module, group.inplace.python_name)

    def run(callee: Callable) -> Callable[[], torch.Tensor]:
        def in_place() -> torch.Tensor:
            self = args["self"].clone()
            return _returning(callee(**{**args, "self": self}), self, "in-place")
        return in_place

    _compare(module, report, group.inplace, "in-place", call, run(group.inplace.reference()), run(function))


def _check_out(module: ModuleType, group: Group, call: Call, report: CheckReport, variant: str,
               make_out: Callable[[], torch.Tensor]) -> None:
    function = getattr(module, group.out.python_name)

    def run(callee: Callable) -> Callable[[], torch.Tensor]:
        def with_out() -> torch.Tensor:
            out = make_out()
            return _returning(callee(**call.arguments, out=out), out, "out=")
        return with_out

    _compare(module, report, group.out, variant, call, run(group.out.reference()), run(function))


def _check_out_errors(module: ModuleType, group: Group, call: Call, report: CheckReport) -> None:
    """out= of a wrong dtype (an error, or a cast both paths make alike), and too large (resized down)."""
    _check_out(module, group, call, report, "out= wrong dtype (int16)", lambda: torch.empty(3, 4, dtype=torch.int16))
    _check_out(module, group, call, report, "out= too large [7,7]", lambda: torch.empty(7, 7, dtype=_result_dtype(group, call)))


def _result_dtype(group: Group, call: Call) -> torch.dtype:
    first = next(v for v in call.arguments.values() if isinstance(v, torch.Tensor))
    if group.functional is None:
        return first.dtype
    try:
        return group.functional.reference()(**call.arguments).dtype
    except Exception:  # noqa: BLE001  (the call itself raises: any dtype will do, both paths raise)
        return first.dtype
