"""`bypass --guarded` on our target_tree/: only the yaml key and the templates change, torchgen keeps everything else."""
from __future__ import annotations

import difflib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codemod.measure import bench, guarded_bench
from codemod.model import native_yaml
from codemod.model.tree import NATIVE_FUNCTIONS, locate
from codemod.verify import compiler
from tests.conftest import OUTPUT_SCHEMA, run_codemod, snapshot

GENERATED_ELSEWHERE = ("aten/src/ATen/native/BinaryOps.cpp", "tools/autograd/derivatives.yaml", "torch/csrc/jit/runtime/static/ops.cpp")


@pytest.mark.parametrize("op", ["mul", "div", "add"])
def test_guarded_bypass_adds_the_key_keeps_the_kernels_and_reverts(tree: Path, op: str) -> None:
    pristine = snapshot(tree)
    doc = native_yaml.load(NATIVE_FUNCTIONS, pristine[NATIVE_FUNCTIONS].decode())
    members = [m for g in native_yaml.op_groups(doc, op) for m in g.members]

    run = run_codemod("bypass", op, "--tree", str(tree), "--guarded", "--no-compile")
    assert run.returncode == 0, run.stderr
    assert "verified: autograd codegen ran clean" in run.stderr and f"at::__dispatch_{op}" in run.stderr
    assert "no caller needs rewriting" in run.stderr
    after = snapshot(tree)
    assert {path for path in after if after[path] != pristine.get(path)} == {
        NATIVE_FUNCTIONS,
        *(f"aten/src/ATen/templates/{name}" for name in ("Functions.h", "Functions.cpp", "TensorBody.h", "TensorMethods.cpp", "RedispatchFunctions.h")),
    } | {".codemod/" + op + ".json", ".codemod/.gitignore"}
    assert all(after[path] == pristine[path] for path in GENERATED_ELSEWHERE)

    # the yaml gains one `manual_cpp_binding: True` line per member, inside that member, and loses nothing
    old, new = pristine[NATIVE_FUNCTIONS].decode().splitlines(), after[NATIVE_FUNCTIONS].decode().splitlines()
    inserted = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        assert tag in ("equal", "insert"), (tag, old[i1:i2])
        if tag == "insert":
            assert new[j1:j2] == ["  manual_cpp_binding: True"]
            inserted.append(i1)
    assert len(inserted) == len(members)
    assert all(any(m.entry.first_line < line <= m.entry.end_line for m in members) for line in inserted)

    functions_cpp = after["aten/src/ATen/templates/Functions.cpp"].decode()
    assert f"if (auto keys = detail::codemod_guarded_{op}::cpu_fast_path(" in functions_cpp
    assert f"return at::cpu::{op}(self, other" in functions_cpp and f"at::_ops::{op}_Tensor::call(self, other" in functions_cpp
    # at::redispatch::OP, which torchgen now names __dispatch_OP, written again as generated (VariableType calls it)
    redispatch = after["aten/src/ATen/templates/RedispatchFunctions.h"].decode()
    assert f"  return at::_ops::{op}_Tensor::redispatch(dispatchKeySet, self, other" in redispatch

    reverted = run_codemod("revert", op, "--tree", str(tree))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tree) == pristine


def test_guarded_bypass_is_a_fixed_point(tree: Path) -> None:
    check = run_codemod("bypass", "mul", "--tree", str(tree), "--guarded", "--check")
    assert check.returncode == 0, check.stderr


def test_bench_guarded_times_three_paths_in_one_process(target_tree: Path) -> None:
    """The figures are not asserted (timings); what is: the three paths ran and the JSON follows the schema."""
    result = run_codemod("bench", "mul", "--tree", str(target_tree), "--guarded", "--json", "--no-callgrind", "--size", "2")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(report)
    assert report["mode"] == "guarded" and report["callgrind"] is None
    (row,) = report["wall"]
    assert row["numel"] == 2 and all(row[f"{path}_ns"] > 0 for path in ("dispatch", "bypass", "guarded"))
    assert set(row["compared"]) == {"bypass", "guarded"} and report["call"].startswith("mul.Tensor(")
    # the guard keeps what the dispatcher does: the profiler sees the op (so the guard sent it to the dispatcher)
    assert report["observed"]["guarded"] == {"profiler_events": ["aten::mul"], "requires_grad": True, "grad_fn": "MulBackward0"}


def test_guarded_path_above_its_kernel_is_the_guard_alone(target_tree: Path, tmp_path: Path) -> None:
    """Issue 20: "run only on the guarded path" listed `structured_lcm_out_functional::maybe_get_output` and
    `~TensorIteratorBase`: code below the kernel that callgrind names differently on each path (folded by the
    linker, or inlined into the extension's copy). Each path is now read down to its own kernel, the one the
    dispatcher runs too; above it, the guarded path runs the guard alone."""
    calls = 20
    executable = guarded_bench.build(locate(target_tree), "mul").executable
    paths = tuple(bench.LABELS["guarded"])
    with ThreadPoolExecutor(len(paths)) as pool:  # valgrind loading libtorch dominates: run them at once
        texts = pool.map(lambda path: bench.callgrind_run(executable, path, calls, tmp_path, True), paths)
    report = bench.call_paths("mul", dict(zip(paths, map(bench.parse_callgrind, texts))), calls)
    guarded = [step["function"] for step in report["call_path"]["guarded"]]
    assert guarded[0] == "guarded_functional" and guarded[-1] == report["call_path"]["dispatch"][-1]["function"]
    above = [f["function"] for f in report["above_kernel"]["guarded"]]
    assert "at::getStepCallbacksUnlessEmpty" in above and "codemod_guarded_ext_mul::mul" in above
    assert not [f for f in above if "structured_" in f or "TensorIterator" in f]


def test_a_linker_folded_function_is_named_so() -> None:
    """libtorch's linker folded mul's and lcm's identical `maybe_get_output` into one copy; callgrind names it after
    lcm's. Named after the op measured, and said folded."""
    libtorch = Path(compiler.torch_dir(), "lib", "libtorch_cpu.so")
    graph = bench.CallGraph()
    folded = "at::(anonymous namespace)::structured_lcm_out_functional::maybe_get_output(long)"
    graph.objects[folded] = str(libtorch)
    named = bench.linker_name(graph, folded, "mul")
    assert named.startswith("at::structured_mul_out_functional::maybe_get_output (linker-folded with ")
    assert named.endswith("; callgrind names it at::structured_lcm_out_functional::maybe_get_output)")
    alone = "at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)"
    graph.objects[alone] = str(libtorch)
    assert bench.linker_name(graph, alone, "mul") == "at::_ops::mul_Tensor::call"
