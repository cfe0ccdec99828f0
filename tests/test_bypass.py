"""The main job on our target_tree/, end to end through the CLI, with the real torchgen."""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codemod.capture import codegen
from codemod.capture.capture import Capture
from codemod.cli import catalog
from codemod.model import native_yaml
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, NATIVE_SOURCES, TEMPLATES, locate
from codemod.plan.plan import make_plan
from tests import sampling
from tests.conftest import FIXTURES, REPO, TARGET_TREE, run_codemod, snapshot

TEMPLATE_FILES = {f"{TEMPLATES}/{name}" for name in ("Functions.h", "Functions.cpp", "TensorBody.h", "TensorMethods.cpp")}

OPS = ["mul", "sub", "div", "add"]  # add.out is a ufunc: its CPU kernel files are carried over
# Structured binary math ops: maximum and fmax have no in-place variant; copysign also has
# Scalar overloads that are not structured and must stay as they are. Op -> its removed formula.
MATH_OPS = {"atan2": "atan2", "hypot": "hypot", "maximum": "maximum", "fmax": "fmax", "copysign": "copysign.Tensor"}
MATH_OP_KINDS = {"with an in-place variant": ("atan2", "hypot"), "without one": ("maximum", "fmax"), "with Scalar overloads": ("copysign",)}


def changed_lines(before: str, after: str) -> set[int]:
    """0-based lines of BEFORE that the edit replaced or deleted, and where it inserted."""
    lines = set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            lines.update(range(i1, max(i2, i1 + 1)))
    return lines


@sampling.parametrize("op", {**{op: (op,) for op in OPS}, **MATH_OP_KINDS}, 1)
def test_dry_run_writes_nothing_and_its_patch_applies(tree: Path, op: str) -> None:
    """Each of OPS and one math op of each kind each run."""
    before = snapshot(tree)
    result = run_codemod("bypass", op, "--tree", str(tree), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert snapshot(tree) == before
    assert re.search(rf"^\+TORCH_API at::Tensor {op}\((\n\+ +)?const at::Tensor& self", result.stdout, re.M)  # laid out by clang-format
    patch = tree.parent / f"{op}.patch"
    patch.write_text(result.stdout)
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=tree, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# Every op of target_tree/; those whose kernels one macro invocation defines (eq's Tensor and Scalar overloads) are where
# a plan once followed the order Python's sets iterate in, which PYTHONHASHSEED changes from run to run.
TARGET_OPS = tuple(status.op for status in catalog.catalog(locate(TARGET_TREE)) if status.bypassable)
ONE_INVOCATION_SEVERAL_KERNELS = ("eq", "lt")


@sampling.parametrize("op", {"several kernels in one macro invocation": ONE_INVOCATION_SEVERAL_KERNELS,
                             "any other": [op for op in TARGET_OPS if op not in ONE_INVOCATION_SEVERAL_KERNELS]}, 1)
@pytest.mark.parametrize("guarded", [(), ("--guarded",)], ids=["plain", "guarded"])
def test_a_plan_is_the_same_patch_whatever_order_sets_iterate_in(op: str, guarded: tuple[str, ...]) -> None:
    """Two hash seeds under which eq's and lt's structs came out in opposite orders before the fix."""
    patches = set()
    for hash_seed in ("1", "2"):
        result = subprocess.run(
            [sys.executable, "-m", "codemod", "bypass", op, "--tree", str(TARGET_TREE), "--dry-run", "--no-verify", *guarded],
            capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert result.returncode in (0, 2), result.stderr  # 2: an op guarded mode refuses, refused alike under both
        patches.add((result.returncode, result.stdout))
    assert len(patches) == 1


@pytest.mark.parametrize("op", OPS)
def test_bypass_verifies_touches_only_the_op_and_reverts_byte_for_byte(tree: Path, op: str) -> None:
    pristine, pristine_directories = snapshot(tree), directories(tree)
    # verification compiles the bypass against the installed libtorch first; mul's compile is the one the suite pays for
    result = run_codemod("bypass", op, "--tree", str(tree), *(() if op == "mul" else ("--no-build", "--no-compile")))
    assert_verified(result, op)
    assert ("checks: " in result.stderr and " passed, 0 failed" in result.stderr) == (op == "mul")
    after = snapshot(tree)
    assert f"{op}.Tensor" in removed_formulas(op, pristine, after)

    callers = after["torch/csrc/jit/runtime/static/ops.cpp"].decode()
    assert f"at::cpu::{op}(" not in callers and f"at::cpu::{op}_out(" not in callers
    assert f"at::redispatch::{op}(" not in after["torch/csrc/autograd/VariableTypeManual.cpp"].decode()

    again = run_codemod("bypass", op, "--tree", str(tree))
    assert again.returncode == 0 and "already bypassed" in again.stderr
    assert snapshot(tree) == after

    reverted = run_codemod("revert", op, "--tree", str(tree))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tree) == pristine
    assert directories(tree) == pristine_directories
    twice = run_codemod("revert", op, "--tree", str(tree))  # nothing to do, as for a bypass made twice
    assert twice.returncode == 0 and f"{op} is not bypassed in {tree}" in twice.stderr
    assert snapshot(tree) == pristine


def assert_verified(result: subprocess.CompletedProcess[str], op: str) -> None:
    assert result.returncode == 0, result.stderr
    assert "verified: torchgen (ATen codegen) ran clean" in result.stderr
    assert "verified: autograd codegen ran clean" in result.stderr
    assert f"verified: torchgen now generates at::__dispatch_{op}, " in result.stderr


def removed_formulas(op: str, before: dict[str, bytes], after: dict[str, bytes]) -> set[str]:
    """Checks the bypass of OP made exactly its group's yaml entries manual, and removed
    formulas of those entries only; returns the overload names of the removed formulas."""
    doc = native_yaml.load(NATIVE_FUNCTIONS, before[NATIVE_FUNCTIONS].decode())
    members = [m for g in native_yaml.op_groups(doc, op) for m in g.members]
    member_lines = {i for m in members for i in range(m.entry.first_line, m.entry.end_line)}
    yaml_changes = changed_lines(before[NATIVE_FUNCTIONS].decode(), after[NATIVE_FUNCTIONS].decode())
    assert yaml_changes and yaml_changes <= member_lines
    bypassed = native_yaml.load(NATIVE_FUNCTIONS, after[NATIVE_FUNCTIONS].decode())
    for member in members:
        entry = native_yaml.parse_entry(bypassed, bypassed.by_name()[member.name])
        assert entry.values["manual_cpp_binding"] is True
        assert not set(native_yaml.STRUCTURED_KEYS) & entry.values.keys()

    removed = set(before[DERIVATIVES].decode().splitlines()) - set(after[DERIVATIVES].decode().splitlines())
    names = {line[len("- name: ") :].split("(")[0] for line in removed if line.startswith("- name: ")}
    assert names <= {m.name for m in members}
    return names


def test_math_ops_bypass_one_after_another_and_revert_in_reverse_order(tree: Path) -> None:
    """Five more structured ops on one tree, each a fixed point (--check), each bypass verified by
    the real codegens on the tree as it then is; each revert restores exactly the bytes before its bypass."""
    states = [(snapshot(tree), directories(tree))]
    for op, formula in MATH_OPS.items():
        before = states[-1][0]
        check = run_codemod("bypass", op, "--tree", str(tree), "--check")
        assert check.returncode == 0 and f"checked: planning {op} again after the bypass finds" in check.stderr, check.stderr
        assert snapshot(tree) == before
        assert_verified(run_codemod("bypass", op, "--tree", str(tree), "--no-build", "--no-compile"), op)
        after = snapshot(tree)
        assert removed_formulas(op, before, after) == {formula}
        # the meta/impl definitions we wrote are the ones torchgen's struct names point at
        meta_struct = "structured_copysign_Tensor" if op == "copysign" else f"structured_{op}"
        binary_ops = " ".join(after[f"{NATIVE_SOURCES}/BinaryOps.cpp"].decode().split())  # as clang-format wraps it
        assert f"struct TORCH_API structured_{op}_out : public at::meta::{meta_struct} {{" in binary_ops
        changed = {rel for rel in after if before.get(rel) != after[rel]}
        state = {f".codemod/{op}.json"} | ({".codemod/.gitignore"} if len(states) == 1 else set())  # the first bypass makes .codemod/
        assert changed == {NATIVE_FUNCTIONS, DERIVATIVES, f"{NATIVE_SOURCES}/BinaryOps.cpp", *TEMPLATE_FILES, *state}
        states.append((after, directories(tree)))

    for op in reversed(MATH_OPS):
        states.pop()
        reverted = run_codemod("revert", op, "--tree", str(tree))
        assert reverted.returncode == 0, reverted.stderr
        assert (snapshot(tree), directories(tree)) == states[-1]


def directories(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}


def test_ufunc_kernel_becomes_hand_written_sources(tree: Path, tmp_path: Path) -> None:
    """add.out's CPU kernel came from the ufunc codegen: after the bypass the tree holds it and torchgen no longer writes it."""
    result = run_codemod("bypass", "add", "--tree", str(tree), "--no-verify")
    assert result.returncode == 0, result.stderr
    impl = (tree / NATIVE_SOURCES / "UfuncCPU_add.cpp").read_text()
    assert "TORCH_IMPL_FUNC(ufunc_add_CPU)" in impl and "DEFINE_DISPATCH(add_stub);" in impl
    kernel = (tree / NATIVE_SOURCES / "cpu" / "UfuncCPUKernel_add.cpp").read_text()
    assert "REGISTER_DISPATCH(add_stub, &add_kernel)" in kernel
    binary_ops = " ".join((tree / NATIVE_SOURCES / "BinaryOps.cpp").read_text().split())  # as clang-format wraps it
    assert "struct TORCH_API structured_ufunc_add_CPU : public at::meta::structured_add_Tensor" in binary_ops
    assert "struct TORCH_API structured_ufunc_add_CUDA" not in binary_ops  # lost with the CUDA kernel, as the summary says
    assert "kernels the ufunc codegen generated for add.out on other backends (CUDA)" in result.stderr

    out = tmp_path / "generated"
    codegen.aten(locate(tree), tree / "aten/src/ATen", out)
    assert (out / "Functions.h").is_file() and not list(out.glob("Ufunc*"))

    reverted = run_codemod("revert", "add", "--tree", str(tree))
    assert "aten/src/ATen/native/cpu/UfuncCPUKernel_add.cpp  (created by the bypass: deleted)" in reverted.stderr


def test_capture_matches_the_kept_fixture(tree: Path) -> None:
    """What torchgen generates for mul, as kept in fixtures/, is what the tool captures today."""
    kept = Capture.from_json((FIXTURES / "target_tree" / "mul.capture.json").read_text())
    assert make_plan(locate(tree), "mul").capture == kept
    assert [f.name for f in kept.functions] == ["mul", "mul_out", "mul_outf"]
    assert {m.name for m in kept.methods} == {"mul", "mul_"}
    assert kept.native_kernels == {"mul.Tensor": "mul", "mul_.Tensor": "mul_", "mul.out": "mul_out"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bypass", "mull"], "did you mean mul"),
        (["bypass", "mul.Tensor"], "pass the op name 'mul'"),
        (["bypass", "abs"], "only structured ops can be bypassed"),
        (["revert", "mull"], "did you mean mul"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tree: Path, args: list[str], message: str) -> None:
    before = snapshot(tree)
    result = run_codemod(*args, "--tree", str(tree))
    assert result.returncode == 2
    assert message in result.stderr
    assert snapshot(tree) == before


def test_missing_tree_file_is_named(tree: Path) -> None:
    (tree / DERIVATIVES).unlink()
    result = run_codemod("bypass", "mul", "--tree", str(tree))
    assert result.returncode == 2
    assert "tools/autograd/derivatives.yaml: missing (the autograd formulas file)" in result.stderr


def test_status_follows_bypass_edits_and_revert(tree: Path) -> None:
    assert "no op is bypassed" in run_codemod("status", "--tree", str(tree)).stdout
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    shown = run_codemod("status", "--tree", str(tree)).stdout
    assert "mul (mul.Tensor, mul_.Tensor, mul.out): plain (`bypass mul`), 10 files, matches the journal" in shown
    ops_cpp = tree / "torch/csrc/jit/runtime/static/ops.cpp"
    ops_cpp.write_text(ops_cpp.read_text() + "// a later edit\n")
    assert "changed since: torch/csrc/jit/runtime/static/ops.cpp" in run_codemod("status", "--tree", str(tree)).stdout
    reverted = run_codemod("revert", "mul", "--tree", str(tree))  # keeps the later edit: see tests/test_safety.py
    assert reverted.returncode == 0 and "no op is bypassed" in run_codemod("status", "--tree", str(tree)).stdout
