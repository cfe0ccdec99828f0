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
It runs in a child process (`check_process`), whose `Witness` (check_events) hears of each call before it is made.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch

from codemod.verify import samples
from codemod.verify.check_events import BYPASS, TORCH, Witness
from codemod.verify.check_report import CheckReport, Failure
from codemod.verify.samples import Call, Group, Overload


@dataclass(frozen=True)
class _Run:
    module: ModuleType  # the bypass, bound
    report: CheckReport  # what was compared so far
    witness: Witness  # told of each call before it is made


def check(module: ModuleType, op: str, groups: list[Group], witness: Witness | None = None) -> CheckReport:
    sampled = [samples.op_samples(group, op) for group in groups]
    dtypes = sampled[0].dtypes
    report = CheckReport(op, [samples.dtype_name(d) for d in dtypes])
    report.skipped_samples = list(dict.fromkeys(why for opinfo in sampled for why in opinfo.skipped))
    checking = _Run(module, report, witness or Witness())
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
            _step(checking, f"{group.out.name} {call.describe()}", functools.partial(_check_call, checking, group, call))
        _step(checking, f"{group.out.name} out= of a wrong dtype and too large, {edges[0].describe()}",
              functools.partial(_check_out_errors, checking, group, edges[0]))
    return report


def _step(checking: _Run, description: str, compare: Callable[[], None]) -> None:
    """COMPARE, told to the witness first; unless an earlier run's torch kernel was killed on it: then named."""
    killed = checking.witness.step(description)
    if killed is None:
        compare()
    else:
        checking.report.torch_killed.append(killed)


Result = torch.Tensor | tuple[torch.Tensor, ...]


def _outcome(module: ModuleType, run: Callable[[], Result]) -> tuple[Result | None, str | None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "An output with one or more elements was resized": both paths warn
            return _plain(module.quietly(run)), None
    except Exception as error:  # noqa: BLE001  (any error counts, as long as both paths raise)
        return None, f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200] if str(error).strip() else ''}"


def _compare(checking: _Run, overload: Overload, variant: str, call: Call,
             reference: Callable[[], Result], bypass: Callable[[], Result]) -> Result | None:
    """Run both; record a failure unless both raise or both agree (each element of a tuple). Returns torch's result."""
    report = checking.report
    report.checked[overload.name] += 1
    checking.witness.side(TORCH, f"{overload.name} {variant}")
    want, want_error = _outcome(checking.module, reference)
    checking.witness.side(BYPASS, f"{overload.name} {variant}")
    got, got_error = _outcome(checking.module, bypass)
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


def _check_call(checking: _Run, group: Group, call: Call) -> None:
    args = call.arguments
    want = None
    if group.functional is not None:
        function = getattr(checking.module, group.functional.python_name)
        want = _compare(checking, group.functional, "functional", call,
                        lambda: group.functional.reference()(**args), lambda: function(**args))
    dtypes = _out_dtypes(group, call, want)
    _check_out(checking, group, call, "out= (resized)", lambda: [torch.empty(0, dtype=d) for d in dtypes])
    if group.inplace is None:
        return
    if call.broadcasts_input:
        checking.report.inplace_skipped += 1
        return
    function = getattr(checking.module, group.inplace.python_name)

    def run(callee: Callable) -> Callable[[], torch.Tensor]:
        def in_place() -> torch.Tensor:
            self = args["self"].clone()
            return _returning(callee(**{**args, "self": self}), (self,), "in-place")
        return in_place

    _compare(checking, group.inplace, "in-place", call, run(group.inplace.reference()), run(function))


def _check_out(checking: _Run, group: Group, call: Call, variant: str,
               make_outs: Callable[[], list[torch.Tensor]]) -> None:
    """The out= overload, its out arguments (one per result, by their schema names) made by MAKE_OUTS."""
    function = getattr(checking.module, group.out.python_name)
    names = [a.name for a in group.out.schema.arguments.out]

    def run(callee: Callable) -> Callable[[], Result]:
        def with_out() -> Result:
            outs = make_outs()
            return _returning(callee(**call.arguments, **dict(zip(names, outs))), tuple(outs), "out=")
        return with_out

    _compare(checking, group.out, variant, call, run(group.out.reference()), run(function))


def _check_out_errors(checking: _Run, group: Group, call: Call) -> None:
    """out= of a wrong dtype (an error, or a cast both paths make alike), and too large (resized down)."""
    count = len(group.out.schema.arguments.out)
    _check_out(checking, group, call, "out= wrong dtype (int16)",
               lambda: [torch.empty(3, 4, dtype=torch.int16) for _ in range(count)])
    checking.witness.side(TORCH, f"{group.functional.name if group.functional else group.out.name} (the result's dtypes)")
    dtypes = _out_dtypes(group, call, _functional_result(group, call))
    _check_out(checking, group, call, "out= too large [7,7]", lambda: [torch.empty(7, 7, dtype=d) for d in dtypes])


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
