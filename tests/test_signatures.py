"""Signatures beyond tensors, Scalars and dims (issue 19 section 1), each class on target_tree/'s own fixtures in
PyTorch's shapes: `str` arguments (gelu, with a default; scatter's reduce overloads, without), tuple returns
(topk, nll_loss_forward, and their out= overloads writing two tensors), an optional-Scalar overload beside an
optional-Tensor one of the same arity (clamp), a `precomputed` meta function (index_add).

Real torchgen, real g++ (the extensions and the harness, shared with `build` and `bypass` through the build
cache), real libtorch and PyTorch's own OpInfo samples. No mocks.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import torch

from codemod.model.tree import NATIVE_SOURCES, locate
from codemod.plan.plan import make_plan, op_entries
from codemod.verify import build, captured, compiler, extension, harness, opinfo_check, samples
from codemod.verify.signature import parameters
from tests import sampling, several_ops
from tests.conftest import OUTPUT_SCHEMA, TARGET_TREE, run_codemod, snapshot
from tests.several_ops import SIGNATURE_OPS
from tests.test_opinfo_check import doctored

TREE = locate(TARGET_TREE)


@pytest.fixture(scope="module")
def extensions():
    """Each op's bypass as the extension `build OP`, `bench OP` and `bypass OP` compile with its harness (one compile
    per op, kept in the build cache under one key: the class drawn below and the bench tests find it)."""
    return {op: extension.import_module(build.build(TREE, op).module) for op in SIGNATURE_OPS}


def groups(op: str) -> list[samples.Group]:
    return [samples.group_of(g) for g in op_entries(TREE, op).groups]


def group(op: str, out: str) -> samples.Group:
    return next(g for g in groups(op) if g.out.name == out)


def checked(extensions, op: str) -> opinfo_check.CheckReport:
    report = opinfo_check.check(extensions[op], op, groups(op))
    assert report.ok, "\n".join(map(str, report.failures[:5]))
    return report


# ---------------------------------------------------------------- str arguments

def test_a_str_takes_the_values_the_samples_pass_and_its_default() -> None:
    gelu = group("gelu", "gelu.out")
    opinfo = list(samples.opinfo_calls(gelu, "gelu", torch.float32))
    assert samples.string_values(gelu, opinfo) == {"approximate": ("none", "tanh")}
    assert samples.string_values(gelu, []) == {"approximate": ("none",)}  # the schema default alone
    reduce = group("scatter", "scatter.reduce_out")
    opinfo = list(samples.opinfo_calls(reduce, "scatter", torch.float32))
    assert samples.string_values(reduce, opinfo) == {"reduce": ("add", "multiply")}
    edges = samples.edge_calls(reduce, [torch.float32], samples.string_values(reduce, opinfo))
    assert {c.arguments["reduce"] for c in edges} == {"add", "multiply"}


def test_str_ops_are_checked_with_every_value(extensions) -> None:
    gelu = checked(extensions, "gelu")
    assert all(gelu.returned[name] for name in ("gelu", "gelu.out", "gelu_"))
    scatter = checked(extensions, "scatter")
    assert not scatter.unchecked
    for out in ("src_out", "value_out", "reduce_out", "value_reduce_out"):
        assert scatter.returned[f"scatter.{out}"] > 0, out


def test_a_str_without_samples_or_default_names_its_overloads_as_not_checked(extensions) -> None:
    # scatter's bypass looked up under a name with no OpInfo: its reduce groups' `str reduce` has no value to take
    report = opinfo_check.check(extensions["scatter"], "no_such_opinfo", groups("scatter"))
    reduce_overloads = {f"scatter{kind}.{name}" for kind in ("", "_") for name in ("reduce", "value_reduce")}
    reduce_overloads |= {"scatter.reduce_out", "scatter.value_reduce_out"}
    assert set(report.unchecked) == reduce_overloads
    assert all("`reduce` (str)" in why for why in report.unchecked.values())
    assert report.checked["scatter.src"] > 0 and report.checked["scatter.value_out"] > 0  # generated from the schema
    report.require_ok()  # not refused
    assert "not checked: scatter.reduce, scatter.reduce_out, scatter_.reduce, scatter.value_reduce," in report.summary()


# ---------------------------------------------------------------- tuple returns

def test_tuple_returns_are_compared_element_by_element_out_overloads_too(extensions) -> None:
    topk = checked(extensions, "topk")
    assert topk.returned["topk"] > 0 and topk.returned["topk.values"] > 0
    nll = checked(extensions, "nll_loss_forward")
    # no OpInfo of its own: the calls nn.functional.nll_loss's samples make to it
    assert nll.calls_by_source["OpInfo"] > 0
    assert nll.returned["nll_loss_forward"] > 0 and nll.returned["nll_loss_forward.output"] > 0
    assert "compared on errors only" not in nll.summary()


def test_calls_reached_through_another_opinfo_bind_by_the_schema() -> None:
    (nll,) = groups("nll_loss_forward")
    calls = list(samples.opinfo_calls(nll, "nll_loss_forward", torch.float64))
    assert calls and all(c.source.startswith("OpInfo nn.functional.nll_loss sample ") for c in calls)
    first = calls[0].arguments
    assert list(first) == ["self", "target", "weight", "reduction", "ignore_index"]
    assert first["self"].dtype == torch.float64 and first["target"].dtype == torch.int64


@pytest.fixture(scope="module")
def doctored_topk():
    """topk's bypass with its functional wrapper shifting the indices it returns by one."""
    return doctored("topk", lambda impl_call: impl_call + " op.outputs_[1].add_(1);")


def test_a_wrong_second_element_is_caught(doctored_topk) -> None:
    report = opinfo_check.check(doctored_topk, "topk", groups("topk"))
    assert not report.ok
    assert {f.overload for f in report.failures} == {"topk"}  # topk.values goes through its own wrapper
    assert all(f.variant == "functional" and "item [1]" in f.what for f in report.failures)


def test_bench_times_an_op_returning_two_tensors() -> None:
    result = run_codemod("bench", "topk", "--tree", str(TARGET_TREE), "--no-callgrind", "--size", "16", "--json")
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(measured)
    assert measured["call"].startswith("topk(self=float32[N], k=")
    assert measured["wall"][0]["dispatch_ns"] > 0 and measured["wall"][0]["bypass_ns"] > 0
    assert measured["observed"]["dispatch"]["grad_fn"] == "TopkBackward0"  # read on the first tensor, the values
    assert measured["observed"]["bypass"]["grad_fn"] is None


def test_bench_times_an_op_that_takes_indices() -> None:
    """index_add's representative call takes an int64 `index`: the harness makes it int64 indices of the N-element self
    (a float tensor there, as every tensor was before, only timed torch's refusal: the harness exited 1)."""
    result = run_codemod("bench", "index_add", "--tree", str(TARGET_TREE), "--no-callgrind", "--size", "16", "--json")
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    assert measured["call"].startswith("index_add(self=float32[N], dim=0, index=int64[N], source=float32[N]")
    assert measured["wall"][0]["dispatch_ns"] > 0 and measured["wall"][0]["bypass_ns"] > 0


def test_symint_parameters_reach_the_kernel_as_torchgen_passes_them() -> None:
    plan = make_plan(TREE, "topk")
    functions = next(c for c in plan.changes if c.path.endswith("templates/Functions.cpp")).after.decode()
    symint = functions[functions.index("topk_symint("):]
    symint = " ".join(symint[: symint.index("\n}")].split())
    assert "at::native::topk( self, k.guard_int(__FILE__, __LINE__), dim, largest, sorted);" in symint
    assert plan.capture.native_conversions["topk"] == {"c10::SymInt k": "k.guard_int(__FILE__, __LINE__)"}


# ---------------------------------------------------------------- optional-Scalar overload pairs

@pytest.fixture(scope="module")
def real_templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree with the wheel's own templates and yaml (our sources): the full TensorBody.h, where tree-sitter reads
    clamp_.Tensor's member declaration as an expression."""
    dest = tmp_path_factory.mktemp("real") / "tree"
    made = run_codemod("tree", "from-torch", str(dest), "--sources", str(TARGET_TREE))
    assert made.returncode == 0, made.stderr
    return dest


def test_overloads_differing_only_in_parameter_types_capture_their_own_declarations(extensions, real_templates: Path) -> None:
    for tree in (TREE, locate(real_templates)):
        capture = captured.capture_for(tree, "clamp", op_entries(tree, "clamp"))
        declarations = {(m.overload, m.name): m.declaration for m in capture.methods}
        assert declarations[("clamp_", "clamp_")] == (
            "at::Tensor & clamp_(const ::std::optional<at::Scalar> & min, const ::std::optional<at::Scalar> & max=::std::nullopt) const"
        )  # cpp_no_default_args: ['min']
        assert declarations[("clamp_.Tensor", "clamp_")] == (
            "at::Tensor & clamp_(const ::std::optional<at::Tensor> & min={}, const ::std::optional<at::Tensor> & max={}) const"
        )
        assert len(declarations) == 4
    report = checked(extensions, "clamp")
    assert all(report.returned[name] for name in ("clamp", "clamp.out", "clamp_", "clamp.Tensor", "clamp.Tensor_out", "clamp_.Tensor"))


# ---------------------------------------------------------------- precomputed meta functions

def test_a_precomputed_op_carries_its_precompute_struct(extensions) -> None:
    plan = make_plan(TREE, "index_add")
    yaml = next(c for c in plan.changes if c.path.endswith("native_functions.yaml"))
    assert b"precomputed:" in yaml.before and b"precomputed:" not in yaml.after
    source = next(c for c in plan.changes if c.path == f"{NATIVE_SOURCES}/TensorAdvancedIndexing.cpp").after.decode()
    meta = source.index("struct TORCH_API structured_index_add : public at::impl::MetaBase {")
    assert meta < source.index("struct TORCH_API precompute_out {", meta) < source.index("TORCH_PRECOMPUTE_META_FUNC(index_add)")
    assert "using meta_return_ty = precompute_out<true>;" in source
    # the CPU wrapper hands impl the precomputed dim
    assert "op.impl(self, precompute.dim, index, source, alpha, op.outputs_[0]);" in source
    checked(extensions, "index_add")


# ---------------------------------------------------------------- verified, compiled, reverted

@sampling.parametrize("ops", several_ops.CLASSES, 1, together=True)
def test_a_class_bypasses_verified_and_compiled_and_reverts_byte_identical(tree: Path, ops: tuple[str, ...]) -> None:
    """A drawn class each run (every class in one command under `benchmarks/exhaustive.py`), with div, over guarded
    mul: tests/several_ops.py's state, which test_slim_compile.py and test_any_order.py verify too (the build cache
    shares it)."""
    assert ops == several_ops.DRAWN_CLASS  # one population, one stream of the session's seed
    before = snapshot(tree)
    several_ops.bypass_guarded_mul(tree, "--no-build")
    run = several_ops.bypass_plain_ops(tree)
    for op in ops:
        assert re.search(rf"  {op}: \d+ comparisons with torch .*; 0 failed", run.stderr), op
    assert "verified: torchgen (ATen codegen) ran clean" in run.stderr
    (compiled,) = [line.split(" compiles ", 1)[1] for line in run.stderr.splitlines() if line.startswith("verified: g++")]
    for name in {SIGNATURE_OPS[op] for op in ops}:  # the carried-over structs, precompute and tuple scaffolding included
        assert f"{NATIVE_SOURCES}/{name}" in compiled, (name, run.stderr)
    reverted = run_codemod("revert", "--all", "--tree", str(tree))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tree) == before


# What a sample's non-tensor arguments are (OpInfo's values), by the C++ type the dispatcher declares for them
NON_TENSOR_VALUES = {
    "at::ScalarType": [getattr(torch, name) for name in ("float32", "float64", "float16", "bfloat16", "complex64", "complex128",
                                                          "int64", "int32", "int16", "int8", "uint8", "bool")],
    "::std::optional<at::ScalarType>": [None, torch.float64],
    "at::Scalar": [2, 0.5, True, 1 + 2j],
    "::std::optional<at::Scalar>": [None, 3],
    "int64_t": [-1], "double": [1e-3], "bool": [False],
    "at::IntArrayRef": [[0, 1], (2,)], "at::OptionalIntArrayRef": [None, [1]],
    "c10::string_view": ["mean"], "::std::optional<c10::string_view>": [None, "floor"],
}


def test_every_kind_of_non_tensor_value_a_sample_holds_compiles_in_the_type_the_harness_stores_it_in(tmp_path: Path) -> None:
    """The real-sources sweep's `norm`: its ScalarType argument was written `at::ScalarType::at::kDouble` (two tables of
    one name in harness.py). Each value, as the timed call's Sample holds it, compiled by g++ against the installed
    headers."""
    declared = ", ".join(f"{cpp_type} p{i}" for i, cpp_type in enumerate(NON_TENSOR_VALUES))
    fields = parameters(f"void f({declared})")
    assignments = [
        f"  s.{field.name} = {harness._cpp_value(value)};" for field, values in zip(fields, NON_TENSOR_VALUES.values()) for value in values
    ]
    struct = "\n".join(f"  {harness.sample_type(field)} {field.name};" for field in fields)
    source = tmp_path / "values.cpp"
    source.write_text("#include <ATen/ATen.h>\n\nstruct Sample {\n" + struct + "\n};\n\nvoid assign(Sample& s) {\n" + "\n".join(assignments) + "\n}\n")
    result = subprocess.run([compiler.CXX, *compiler.compile_flags(), "-fsyntax-only", str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "s.p0 = at::kDouble;" in source.read_text()
