"""The bypass check for any signature: real torchgen capture, real g++ (torch.utils.cpp_extension), real libtorch,
PyTorch's own OpInfo samples. No mocks.

One extension binds the bypass of every bypassable op of target_tree/ (one compile, cached in the build
cache); each run checks a drawn sample of the ops against torch (every op under benchmarks/exhaustive.py); a
doctored capture (cumsum's functional wrapper computing cumprod) must be caught with the failing sample named; the
CLI's `build`, `bypass` and `bench` run the check and time a reduction.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
import torch
from torchgen.model import FunctionSchema

from codemod.capture import fromtorch
from codemod.cli import catalog
from codemod.model import native_yaml
from codemod.model.errors import VerificationFailed
from codemod.model.tree import locate
from codemod.plan.plan import op_entries
from codemod.verify import bypass_ext, captured, check_process, opinfo_check, samples
from tests import sampling
from tests.conftest import OUTPUT_SCHEMA, TARGET_TREE, run_codemod

TREE = locate(TARGET_TREE)
BYPASSABLE = [s.op for s in catalog.catalog(TREE) if s.bypassable]


@pytest.fixture(scope="session")
def every_op():
    """The bypass of every bypassable op of target_tree/, in one extension."""
    return bypass_ext.load(TREE, BYPASSABLE)[0]


def groups(op: str) -> list[samples.Group]:
    return [samples.group_of(g) for g in op_entries(TREE, op).groups]


def wheel_groups(op: str) -> list[native_yaml.OpGroup]:
    """OP's structured groups in the installed torchgen's own native_functions.yaml (ops target_tree/ does not have)."""
    wheel_yaml = fromtorch.installed_torchgen() / "packaged" / "ATen" / "native" / "native_functions.yaml"
    return native_yaml.op_groups(native_yaml.load("native_functions.yaml", wheel_yaml.read_text()), op)


def test_target_tree_has_ops_of_every_kind_of_signature() -> None:
    assert {"mul", "add", "div", "sum", "cumsum", "addcmul"} <= set(BYPASSABLE)
    (reduction,) = groups("sum")
    assert reduction.inplace is None and [a.name for a in reduction.arguments] == ["self", "dim", "keepdim", "dtype"]
    (ternary,) = groups("addcmul")
    assert [a.name for a in ternary.arguments] == ["self", "tensor1", "tensor2", "value"]


@sampling.parametrize("op", BYPASSABLE, 4)
def test_a_bypassable_op_agrees_with_torch(every_op, op: str) -> None:
    report = opinfo_check.check(every_op, op, groups(op))
    assert report.ok, "\n".join(map(str, report.failures[:5]))
    for group in groups(op):
        for overload in group.overloads:
            assert report.checked[overload.name] > 0, f"{overload.name} was never called"
    assert report.calls_by_source["edge"] > 0


@pytest.mark.parametrize("op", ["sum", "cumsum", "addcmul", "mul", "div"])
def test_pytorchs_own_samples_are_used_where_the_op_has_an_opinfo(every_op, op: str) -> None:
    report = opinfo_check.check(every_op, op, groups(op))
    assert report.calls_by_source["OpInfo"] > 0
    assert samples.opinfos(op)


def test_an_op_without_an_opinfo_is_checked_on_calls_generated_from_its_schema(every_op) -> None:
    assert not samples.opinfos("no_such_opinfo")
    report = opinfo_check.check(every_op, "no_such_opinfo", groups("sum"))  # sum's bypass, looked up under no OpInfo
    assert report.ok, "\n".join(map(str, report.failures[:5]))
    assert report.calls_by_source["schema"] == 5 * 20  # five dtypes x dim (5) x keepdim (2) x dtype (2)
    assert "OpInfo" not in report.calls_by_source


def test_opinfo_samples_bind_by_schema_and_leave_other_overloads_alone() -> None:
    (reduction,) = groups("sum")
    x = torch.ones(2, 3)
    assert samples.bind(reduction, (x,), {"dim": 1, "keepdim": True}) == {
        "self": x, "dim": [1], "keepdim": True, "dtype": None,
    }
    assert samples.bind(reduction, (x,), {}) is None  # sum(x) is sum.default: dim has no default here
    mul = groups("mul")[0]
    assert samples.bind(mul, (x, 2.0), {}) is None  # mul(x, 2.0) is mul.Scalar


def test_generated_calls_cover_the_schema() -> None:
    (reduction,) = groups("sum")
    calls = samples.schema_calls(reduction, (3, 4), torch.float32, "schema")
    assert {str(c.arguments["dim"]) for c in calls} == {"None", "[]", "[0]", "[-1]", "[0, 1]"}
    assert {c.arguments["keepdim"] for c in calls} == {False, True}
    assert {c.arguments["dtype"] for c in calls} == {None, torch.float64}
    (ternary,) = groups("addcmul")
    assert {c.arguments["value"] for c in samples.schema_calls(ternary, (2,), torch.float32, "schema")} == {2, 0.5}


def test_generated_indices_and_sized_lists_are_calls_torch_takes() -> None:
    """A `Tensor?[]` (index's indices) gets int64 indices of each of the first dims, a tensor named `index` or
    `indices` int64 indices, a sized list (`int[2] kernel_size`) that many elements: calls torch's own kernel computes
    on, not ones it only refuses (a float index), or ones it does not validate (`kernel_size=[]`)."""
    (index,) = [samples.group_of(g) for g in wheel_groups("index")]
    calls = samples.schema_calls(index, (3, 4), torch.float32, "schema") + samples.edge_calls(index, [torch.float32])
    for call in calls:
        indices = call.arguments["indices"]
        assert indices and all(i.dtype == torch.int64 for i in indices), call.describe()
        if call.arguments["self"].dim() >= len(indices) and call.arguments["self"].numel():
            torch.ops.aten.index.Tensor(**call.arguments)  # raises if torch refuses the call
    (pool_backward,) = [samples.group_of(g) for g in wheel_groups("max_pool2d_with_indices_backward")]
    (call, *_) = samples.schema_calls(pool_backward, (1, 3, 4), torch.float32, "schema")
    assert call.arguments["indices"].dtype == torch.int64
    assert [len(call.arguments[name]) for name in ("kernel_size", "stride", "padding", "dilation")] == [2, 2, 2, 2]
    scatter = next(g for g in groups("scatter") if g.out.name == "scatter.src_out")
    for call in samples.schema_calls(scatter, (3, 4), torch.float32, "schema"):
        assert call.arguments["index"].dtype == torch.int64
        torch.ops.aten.scatter.src(**call.arguments)


def test_our_edge_cases_come_on_top() -> None:
    (ternary,) = groups("addcmul")
    edges = samples.edge_calls(ternary, [torch.float32])
    sources = {c.source for c in edges}
    for case in ("float64", "int64", "bool", "complex64", "non-contiguous", "channels-last", "0-dim", "empty", "broadcast",
                 "promotion"):
        assert any(case in source for source in sources), case
    promoted = next(c for c in edges if "promotion" in c.source).arguments
    assert (promoted["self"].dtype, promoted["tensor1"].dtype) == (torch.int64, torch.float32)
    assert next(c for c in edges if "non-contiguous" in c.source).arguments["self"].is_contiguous() is False


def test_the_bypass_binds_each_overload_from_its_captured_declaration() -> None:
    capture = captured.capture_for(TREE, "sum", op_entries(TREE, "sum"))
    bound = {b.python_name: b for b in bypass_ext.bound_overloads(capture)}
    assert set(bound) == {"sum_dim_IntList", "sum_IntList_out"}
    assert [p.name for p in bound["sum_IntList_out"].params] == ["self", "dim", "keepdim", "dtype", "out"]
    assert "at::OptionalIntArrayRef(*dim)" in bypass_ext.binding(bound["sum_dim_IntList"])


def doctored(op: str, replace_impl_call: Callable[[str], str]):
    """OP's bypass compiled with the `op.impl(...);` call of its functional wrapper replaced by REPLACE_IMPL_CALL(call)."""
    capture = captured.capture_for(TREE, op, op_entries(TREE, op))
    wrapper = capture.cpu_wrappers[op]
    (snippet,) = [s for s in capture.cpu_scaffolding if s.name == wrapper]
    impl_call = re.search(r"op\.impl\([^;]*\);", snippet.text).group(0)
    edited = snippet.text.replace(impl_call, replace_impl_call(impl_call))
    capture = dataclasses.replace(capture, cpu_scaffolding=tuple(
        dataclasses.replace(s, text=edited) if s.name == wrapper else s for s in capture.cpu_scaffolding
    ))
    return bypass_ext.load(TREE, [op], {op: capture})[0]


@pytest.fixture(scope="session")
def doctored_cumsum():
    """cumsum's bypass with its functional wrapper computing cumprod instead of calling the structured impl."""
    return doctored("cumsum", lambda _: "op.outputs_[0].copy_(at::cumprod(self, dim, dtype));")


def test_a_wrong_kernel_is_caught_with_the_failing_sample_named(doctored_cumsum) -> None:
    report = opinfo_check.check(doctored_cumsum, "cumsum", groups("cumsum"))
    assert not report.ok
    failure = report.failures[0]
    assert failure.overload == "cumsum" and failure.variant == "functional"
    assert failure.call.startswith("OpInfo cumsum sample") and "self=float32[" in failure.call and "dim=" in failure.call
    assert "mismatch" in failure.what.lower()
    # out= and in-place go through their own wrappers, which still call the structured impl
    assert {f.overload for f in report.failures} == {"cumsum"}
    with pytest.raises(VerificationFailed) as raised:  # what `build` and `bypass` raise: exit 1
        report.require_ok()
    assert raised.value.exit_code == 1
    assert str(raised.value).startswith("cumsum: the bypass disagrees with torch on ")
    assert "the first: cumsum functional, OpInfo cumsum sample" in str(raised.value)


def test_build_checks_a_reduction_and_bypass_runs_the_check_first(tree) -> None:
    built = run_codemod("build", "sum", "--tree", str(TARGET_TREE))
    assert built.returncode == 0, built.stderr
    assert re.search(r"sum: \d+ comparisons with torch \(sum.dim_IntList \d+, sum.IntList_out \d+\); calls: \d+ OpInfo",
                     built.stderr)
    assert "0 failed" in built.stderr
    bypassed = run_codemod("bypass", "sum", "--tree", str(tree), "--no-compile")
    assert bypassed.returncode == 0, bypassed.stderr
    assert "sum: " in bypassed.stderr and "comparisons with torch" in bypassed.stderr


def test_bench_times_a_reduction_with_a_representative_sample() -> None:
    result = run_codemod("bench", "sum", "--tree", str(TARGET_TREE), "--no-callgrind", "--size", "16", "--size", "256", "--json")
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(measured)
    assert measured["call"].startswith("sum.dim_IntList(self=float32[N], dim=")
    assert [row["numel"] for row in measured["wall"]] == [16, 256]
    assert all(row["dispatch_ns"] > 0 and row["bypass_ns"] > 0 for row in measured["wall"])
    assert measured["observed"]["dispatch"]["grad_fn"] == "SumBackward1"
    assert measured["observed"]["bypass"]["grad_fn"] is None


SAMPLES_OF_MUL = """
import json, sys
import torch
from codemod.model.tree import locate
from codemod.plan.plan import op_entries
from codemod.verify import samples
group = samples.group_of(op_entries(locate(sys.argv[1]), "mul").groups[0])
kept = samples.op_samples(group, "mul")
torch.save(kept, sys.argv[2])
print(json.dumps({"imported_op_db": "torch.testing._internal.common_methods_invocations" in sys.modules}))
"""


def test_opinfo_samples_are_kept_so_a_second_check_imports_no_op_db(tmp_path) -> None:
    """A process that finds the op's samples in the build cache does not import op_db (seconds) and gets the very
    calls the first made: the same dtypes, sources and tensors. An empty build cache, unlike the session's: the first
    process must find no samples kept; nothing is compiled."""
    env = {**os.environ, "CODEMOD_BUILD_CACHE": str(tmp_path / "cache")}
    runs = []
    for name in ("first", "second"):
        ran = subprocess.run([sys.executable, "-c", SAMPLES_OF_MUL, str(TARGET_TREE), str(tmp_path / name)],
                             capture_output=True, text=True, env=env)
        assert ran.returncode == 0, ran.stderr
        runs.append(json.loads(ran.stdout))
    assert runs == [{"imported_op_db": True}, {"imported_op_db": False}]
    first, second = (torch.load(tmp_path / name, weights_only=False) for name in ("first", "second"))
    assert first.dtypes == second.dtypes and torch.float32 in first.calls and first.calls[torch.float32]
    for dtype, calls in first.calls.items():
        assert [c.source for c in calls] == [c.source for c in second.calls[dtype]]
        for made, kept in zip(calls, second.calls[dtype]):
            torch.testing.assert_close(kept.arguments, made.arguments, rtol=0, atol=0, equal_nan=True)


def test_a_sample_generator_that_raises_is_skipped_and_named() -> None:
    """Issue 26: real bmm's OpInfo sample generator raises in int64 (`random_ expects 'from' to be less than 'to'`),
    which crashed the bypass. The samples it made before are used, the rest named in the check's summary."""
    parse = FunctionSchema.parse
    bmm = samples.Group(samples.Overload("bmm", parse("bmm(Tensor self, Tensor mat2) -> Tensor")), None,
                        samples.Overload("bmm.out", parse("bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)")))
    made = samples.op_samples(bmm, "bmm")
    assert torch.int64 in made.dtypes and made.calls[torch.int64] and made.calls[torch.float32]
    (skipped,) = made.skipped
    assert re.fullmatch(r"OpInfo bmm\S* int64 samples from \d+ on \(RuntimeError: random_ expects 'from' to be less than 'to'.*\)", skipped)
    report = opinfo_check.CheckReport("bmm", [samples.dtype_name(d) for d in made.dtypes], skipped_samples=list(made.skipped))
    assert report.summary().endswith(f"; OpInfo samples skipped, their generator raised: {skipped}")


# ---------------------------------------------------------------- a kernel killed by a signal (check_process)

CRASHING_BYPASS = """
import ctypes, os, signal, time
from pathlib import Path
from codemod.verify import extension

_bypass = extension.import_module(Path({library!r}))
_DIE = {{"SIGSEGV": lambda: ctypes.string_at(0), "SIGABRT": os.abort, "SIGFPE": lambda: os.kill(os.getpid(), signal.SIGFPE),
        "hang": lambda: time.sleep(3600), "SIGKILL": lambda: os.kill(os.getpid(), signal.SIGKILL)}}


def __getattr__(name):
    return getattr(_bypass, name)


def {function}(**arguments):  # the real bypass, but killed on a 0-dim self, as a kernel reading past its end
    if arguments["self"].dim() == 0:
        _DIE[{signal!r}]()
    return _bypass.{function}(**arguments)
"""
# Where the bypass dies (its function, the overload and variant the verdict names), and by which signal.
CRASH_POINTS = [(function, overload, signal) for function, overload in (
    ("mul_Tensor", "mul.Tensor functional"), ("mul_out", "mul.out out= (resized)"), ("mul__Tensor", "mul_.Tensor in-place"),
) for signal in ("SIGSEGV", "SIGABRT", "SIGFPE")]


TORCHS_OWN_KERNEL = """
import torch

quietly = lambda run: run()
_convert_indices_from_csr_to_coo = torch.ops.aten._convert_indices_from_csr_to_coo.default
_convert_indices_from_csr_to_coo_out = torch.ops.aten._convert_indices_from_csr_to_coo.out
"""


@sampling.parametrize(("function", "variant", "signal"), CRASH_POINTS, 2)
def test_a_bypass_killed_by_a_signal_is_a_verdict_naming_the_call(every_op, tmp_path, function, variant, signal) -> None:
    """The check runs in a child process: a bypass that dies by a signal on one call, in any variant, is exit 1 naming
    that call and variant, and the command goes on to say so (before, it took codemod's own process with it: exit
    139, no line of ours)."""
    crashing = tmp_path / "crashing_mul.py"
    crashing.write_text(CRASHING_BYPASS.format(library=every_op.__file__, function=function, signal=signal))
    with check_process.Checker() as checker, pytest.raises(VerificationFailed) as raised:
        checker.check("mul", crashing, op_entries(TREE, "mul").groups)
    said = str(raised.value)
    assert raised.value.exit_code == 1
    assert said.startswith(f"mul: the bypass was killed by {signal} in {variant}, on mul.out "), said
    assert re.search(r"self=\w+\[\]", said), said  # the 0-dim self it died on


def test_a_check_killed_from_outside_is_not_blamed_on_the_bypass(every_op, tmp_path) -> None:
    """SIGKILL (the out-of-memory killer, a user) is no kernel's own fault: the command says what ran, blames nothing,
    and skips nothing; exit 1 before writing."""
    killed = tmp_path / "killed_mul.py"
    killed.write_text(CRASHING_BYPASS.format(library=every_op.__file__, function="mul_out", signal="SIGKILL"))
    with check_process.Checker() as checker, pytest.raises(VerificationFailed) as raised:
        checker.check("mul", killed, op_entries(TREE, "mul").groups)
    said = str(raised.value)
    assert said.startswith("mul: the check's process was killed by SIGKILL from outside (the out-of-memory killer, "
                           "or a user) while bypass ran mul.out out= (resized) on mul.out "), said
    assert said.endswith(": nothing was compared there; run the command again"), said


def test_a_bypass_that_hangs_is_a_verdict_naming_the_call(every_op, tmp_path, monkeypatch) -> None:
    """A call after which the child says nothing for HANG_SECONDS (here 10) hangs: the child is killed, exit 1 naming
    the call and variant. Before its first call (importing torch, making the samples: seconds, more under load) the
    child has LOADING_SECONDS."""
    monkeypatch.setattr(check_process, "HANG_SECONDS", 10)
    hanging = tmp_path / "hanging_mul.py"
    hanging.write_text(CRASHING_BYPASS.format(library=every_op.__file__, function="mul_out", signal="hang"))
    with check_process.Checker() as checker, pytest.raises(VerificationFailed) as raised:
        checker.check("mul", hanging, op_entries(TREE, "mul").groups)
    said = str(raised.value)
    assert said.startswith("mul: the bypass, in mul.out out= (resized), did not return in 10 s on mul.out "), said
    assert re.search(r"self=\w+\[\]", said), said


def test_a_call_torchs_own_kernel_is_killed_on_is_named_and_not_compared(tmp_path) -> None:
    """Torch's own `_convert_indices_from_csr_to_coo` does not validate its indices: generated ones kill it (SIGSEGV).
    Nothing can be compared on such a call (the bypass calls the same kernel); the check starts again past it, and
    the report names each, the bypass (here torch's own kernel too) compared on the rest."""
    op = "_convert_indices_from_csr_to_coo"
    bypass = tmp_path / "csr_to_coo.py"
    bypass.write_text(TORCHS_OWN_KERNEL)
    with check_process.Checker() as checker:
        report = checker.check(op, bypass, wheel_groups(op))
    assert report.ok and not report.failures
    assert 0 < len(report.torch_killed) <= check_process.MAX_TORCH_CRASHES
    assert all(re.fullmatch(rf"{op}\.out .* \(torch's own kernel was killed by SIGSEGV in {op}(\.out)? \S+.*\)", k)
               for k in report.torch_killed), report.torch_killed
    assert sum(report.checked.values()) > 0
    assert f"not compared on {len(report.torch_killed)} calls torch's own kernel was killed on" in report.summary()
