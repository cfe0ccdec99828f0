"""Check a compiled bypass against torch, overload by overload, on PyTorch's own sample inputs and ours.

For each structured group and each call of `samples` (OpInfo samples bound to the group,
or calls generated from the schema where no OpInfo sample fits, plus our edge cases),
the bypass (`bypass_ext`) and the installed torch's dispatcher entry (`torch.ops.aten`)
run the functional, out= (empty outs of the result's dtypes, resized; then ones of the
wrong dtype, and ones too large) and in-place variants (on clones of self; skipped where
the OpInfo sample broadcasts self, as PyTorch's tests do). Each pair must both raise, or
agree under `torch.testing.assert_close` (values, NaN equal NaN, dtype, shape, strides;
each element of a tuple result), and out= / in-place must return the tensors they wrote.
A group whose calls cannot be generated (a `str` argument no sample passes and the
schema gives no default) and that no OpInfo sample fits is named as not checked; an
OpInfo sample generator that raises is named too, the op checked on the samples made.
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
    returned: Counter = field(default_factory=Counter)  # overload -> comparisons where both returned a result
    both_raise: int = 0
    calls_by_source: Counter = field(default_factory=Counter)  # "OpInfo", "schema", "edge" -> calls
    inplace_skipped: int = 0  # OpInfo samples that broadcast self
    failures: list[Failure] = field(default_factory=list)
    unchecked: dict[str, str] = field(default_factory=dict)  # overloads not compared, each with why
    skipped_samples: list[str] = field(default_factory=list)  # OpInfo sample generators that raised, each with why

    @property
    def ok(self) -> bool:
        """Nothing disagreed, and something was compared or what was not is named."""
        return not self.failures and (sum(self.checked.values()) > 0 or bool(self.unchecked))

    def require_ok(self) -> None:
        """Raise VerificationFailed (exit 1) naming the first failing call, unless every comparison agreed."""
        if not self.ok:
            first = self.failures[0] if self.failures else "no comparison was made"
            raise VerificationFailed(f"{self.op}: the bypass disagrees with torch on {len(self.failures)} of "
                                     f"{sum(self.checked.values())} comparisons; the first: {first}")

    def summary(self) -> str:
        per_overload = ", ".join(f"{name} {count}" for name, count in self.checked.items())
        sources = ", ".join(f"{count} {source}" for source, count in self.calls_by_source.items())
        reasons: dict[str, list[str]] = {}
        for overload, why in self.unchecked.items():
            reasons.setdefault(why, []).append(overload)
        not_checked = "".join(f"; not checked: {', '.join(names)} ({why})" for why, names in reasons.items())
        errors_only = [name for name in self.checked if not self.returned[name]]
        if errors_only:  # no sample torch accepts: what was compared is that both paths refuse the same calls
            not_checked += f"; compared on errors only (torch raised on every call): {', '.join(errors_only)}"
        if self.skipped_samples:  # PyTorch's generator raised: checked on the samples it made before
            not_checked += f"; OpInfo samples skipped, their generator raised: {'; '.join(self.skipped_samples)}"
        return (f"{self.op}: {sum(self.checked.values())} comparisons with torch ({per_overload}); calls: {sources}; "
                f"dtypes {', '.join(self.dtypes)}; {self.both_raise} where both raise; "
                f"{self.inplace_skipped} in-place skipped (the sample broadcasts self); {len(self.failures)} failed"
                f"{not_checked}")


def check_op(tree: Tree, op: str, captured: Capture | None = None, module: ModuleType | None = None) -> CheckReport:
    """Compile OP's bypass as an extension (unless MODULE binds it already) and check every structured group."""
    if module is None:
        module, _ = bypass_ext.load(tree, [op], {op: captured} if captured else None)
    groups = [samples.group_of(g) for g in current_entries(tree, op).groups]
    with progress.step(f"check: {op}'s bypass against torch on OpInfo samples, generated calls and edge cases"):
        return check(module, op, groups)


def check(module: ModuleType, op: str, groups: list[Group]) -> CheckReport:
    sampled = [samples.op_samples(group, op) for group in groups]
    dtypes = sampled[0].dtypes
    report = CheckReport(op, [samples.dtype_name(d) for d in dtypes])
    report.skipped_samples = list(dict.fromkeys(why for opinfo in sampled for why in opinfo.skipped))
    for group, opinfo in zip(groups, sampled):
        torch.manual_seed(0)  # the generated calls alike whether the samples came from the build cache or not
        calls = [c for dtype in dtypes for c in opinfo.calls[dtype]]
        strings = samples.string_values(group, calls)
        source = "OpInfo"
        try:
            if not calls:  # no OpInfo, or none of its samples fits this group
                calls = [c for dtype in dtypes for c in samples.schema_calls(group, (3, 4), dtype, "schema", strings=strings)]
                source = "schema"
            edges = samples.edge_calls(group, dtypes, strings)
        except samples.NoValue as missing:  # only without samples: a sample binds a value to every argument
            report.unchecked |= dict.fromkeys((o.name for o in group.overloads), str(missing))
            continue
        report.calls_by_source[source] += len(calls)
        report.calls_by_source["edge"] += len(edges)
        for call in (*calls, *edges):
            _check_call(module, group, call, report)
        _check_out_errors(module, group, edges[0], report)
    return report


Result = torch.Tensor | tuple[torch.Tensor, ...]


def _outcome(module: ModuleType, run: Callable[[], Result]) -> tuple[Result | None, str | None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "An output with one or more elements was resized": both paths warn
            return _plain(module.quietly(run)), None
    except Exception as error:  # noqa: BLE001  (any error counts, as long as both paths raise)
        return None, f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200] if str(error).strip() else ''}"


def _compare(module: ModuleType, report: CheckReport, overload: Overload, variant: str, call: Call,
             reference: Callable[[], Result], bypass: Callable[[], Result]) -> Result | None:
    """Run both; record a failure unless both raise or both agree (each element of a tuple). Returns torch's result."""
    report.checked[overload.name] += 1
    want, want_error = _outcome(module, reference)
    got, got_error = _outcome(module, bypass)
    what = None
    if want_error and got_error:
        report.both_raise += 1
    elif want_error or got_error:
        what = f"only the bypass raised: {got_error}" if got_error else f"only torch raised: {want_error}"
    else:
        report.returned[overload.name] += 1
        try:
            torch.testing.assert_close(got, want, equal_nan=True, check_stride=True)
        except AssertionError as difference:
            lines = str(difference).split("\n")
            # the first lines say what differs; for a tuple result, a last line says which element
            what = " ".join([*lines[:4], *(line for line in lines[4:] if line.startswith("The failure occurred for item"))])
    if what is not None:
        report.failures.append(Failure(overload.name, variant, call.describe(), what))
    return want


def _elements(result: Result) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)


def _returning(result: Result, written: tuple[torch.Tensor, ...], variant: str) -> Result:
    """What an out= or in-place call wrote, once it returned exactly those tensors."""
    if len(_elements(result)) != len(written) or any(r is not w for r, w in zip(_elements(result), written)):
        raise AssertionError(f"the {variant} variant did not return the tensors it wrote")
    return written if len(written) > 1 else written[0]


def _check_call(module: ModuleType, group: Group, call: Call, report: CheckReport) -> None:
    args = call.arguments
    want = None
    if group.functional is not None:
        function = getattr(module, group.functional.python_name)
        want = _compare(module, report, group.functional, "functional", call,
                        lambda: group.functional.reference()(**args), lambda: function(**args))
    dtypes = _out_dtypes(group, call, want)
    _check_out(module, group, call, report, "out= (resized)", lambda: [torch.empty(0, dtype=d) for d in dtypes])
    if group.inplace is None:
        return
    if call.broadcasts_input:
        report.inplace_skipped += 1
        return
    function = getattr(module, group.inplace.python_name)

    def run(callee: Callable) -> Callable[[], torch.Tensor]:
        def in_place() -> torch.Tensor:
            self = args["self"].clone()
            return _returning(callee(**{**args, "self": self}), (self,), "in-place")
        return in_place

    _compare(module, report, group.inplace, "in-place", call, run(group.inplace.reference()), run(function))


def _check_out(module: ModuleType, group: Group, call: Call, report: CheckReport, variant: str,
               make_outs: Callable[[], list[torch.Tensor]]) -> None:
    """The out= overload, its out arguments (one per result, by their schema names) made by MAKE_OUTS."""
    function = getattr(module, group.out.python_name)
    names = [a.name for a in group.out.schema.arguments.out]

    def run(callee: Callable) -> Callable[[], Result]:
        def with_out() -> Result:
            outs = make_outs()
            return _returning(callee(**call.arguments, **dict(zip(names, outs))), tuple(outs), "out=")
        return with_out

    _compare(module, report, group.out, variant, call, run(group.out.reference()), run(function))


def _check_out_errors(module: ModuleType, group: Group, call: Call, report: CheckReport) -> None:
    """out= of a wrong dtype (an error, or a cast both paths make alike), and too large (resized down)."""
    count = len(group.out.schema.arguments.out)
    _check_out(module, group, call, report, "out= wrong dtype (int16)",
               lambda: [torch.empty(3, 4, dtype=torch.int16) for _ in range(count)])
    dtypes = _out_dtypes(group, call, _functional_result(group, call))
    _check_out(module, group, call, report, "out= too large [7,7]", lambda: [torch.empty(7, 7, dtype=d) for d in dtypes])


def _out_dtypes(group: Group, call: Call, result: Result | None) -> list[torch.dtype]:
    """The dtypes of the functional's RESULT (one per out argument), else the first tensor argument's for each."""
    if result is not None:
        return [t.dtype for t in _elements(result)]
    first = next(t for v in call.arguments.values() for t in samples.tensors_in(v))
    return [first.dtype] * len(group.out.schema.arguments.out)


def _functional_result(group: Group, call: Call) -> Result | None:
    if group.functional is None:
        return None
    try:
        return _plain(group.functional.reference()(**call.arguments))
    except Exception:  # noqa: BLE001  (the call itself raises: any dtype will do, both paths raise)
        return None


def _plain(result: object) -> object:
    """A tuple result as a plain tuple (torch returns named ones), anything else as it is."""
    return tuple(result) if isinstance(result, (tuple, list)) else result
