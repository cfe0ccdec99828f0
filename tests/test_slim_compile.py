"""A slim tree's bypass is compile-checked against the headers of a full tree built from the installed torch with
the same bypasses: real torchgen regenerates them, real g++ compiles target_tree/'s files as they are on disk.

One copy of target_tree/ is bypassed (mul, the README's main job); another twice (guarded mul, then div and the
drawn signature class in one run: tests/several_ops.py), so the second run also applies the earlier bypass to the
full tree's inputs. Other copies each carry one repro: a rewritten header, then broken before a bypass, a caller that
reaches at::cpu:: through a macro, a kernel under `#ifdef`, a caller left out in review. Each is mul's bypass or the tutorial's, whose generated sources the build
cache (CODEMOD_BUILD_CACHE) holds, so only the files a repro changes are compiled.
"""
from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemod.apply import journal
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, TEMPLATES, locate
from codemod.plan.plan import FileChange, Plan, make_plan
from codemod.verify import overlay_compile
from tests import several_ops
from tests.conftest import OUTPUT_SCHEMA, REPO, TARGET_TREE, run_codemod, snapshot
from tests.test_callers import SPELLED_CALLER, add_spelled_callers
from tests.test_compile_check import BINARY_OPS, doctored

FULL_TREE = f"against the headers of a full tree built from the installed torch {importlib.metadata.version('torch')} with the same bypasses"
STATIC_RUNTIME = "torch/csrc/jit/runtime/static/ops.cpp"


def compiled_files(verified: list[str]) -> list[str]:
    """The files the one g++ line says it compiled (a header: with the file that read it), checked to say where."""
    lines = [line for line in verified if line.startswith("g++ -c")]
    assert len(lines) == 1, verified
    assert f" {FULL_TREE} " in lines[0]
    named = lines[0].split(" compiles ", 1)[1].split(f" {FULL_TREE}", 1)[0].split(", ")
    return [name for name in named if " (generated" not in name]  # the tree's own: not torchgen's sources (generated_units.py)


def verified_lines(stderr: str) -> list[str]:
    return [line.removeprefix("verified: ") for line in stderr.splitlines() if line.startswith("verified: ")]


def _edited_sources(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    return sorted(
        path for path in after
        if path.endswith(".cpp") and not path.startswith(TEMPLATES) and before.get(path) != after[path]
    )


def slim_copy(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    tree = tmp_path_factory.mktemp(name) / "tree"
    shutil.copytree(TARGET_TREE, tree)
    return tree


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return slim_copy(tmp_path_factory, "slim")


@pytest.fixture(scope="module")
def bypassed_mul(copy: Path) -> tuple[dict, str, dict[str, bytes]]:
    """The README's main job, `codemod bypass mul --tree COPY --json`: (report, stderr, the tree before)."""
    before = snapshot(copy)
    result = run_codemod("bypass", "mul", "--tree", str(copy), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(report)
    return report, result.stderr, before


def test_the_main_job_on_target_tree_compiles_binaryops_and_the_rewritten_callers(copy: Path, bypassed_mul) -> None:
    report, stderr, before = bypassed_mul
    compiled = compiled_files(report["verified"])
    assert BINARY_OPS in compiled
    assert {"torch/csrc/autograd/VariableTypeManual.cpp", STATIC_RUNTIME} <= set(compiled)
    assert sorted(compiled) == _edited_sources(before, snapshot(copy))
    assert any(line.startswith("verified: g++ -c") and FULL_TREE in line for line in stderr.splitlines())
    # the tree's own templates are not what the full tree generated its headers from
    own = f"{TEMPLATES}/Functions.h, {TEMPLATES}/TensorBody.h: this tree's own header template"
    assert any(line.startswith(own) for line in report["unchecked"]), report["unchecked"]
    # but its source templates are what torchgen generated the op's Functions.cpp and TensorMethods.cpp from
    for generated in ("build/aten/src/ATen/Functions.cpp", "build/aten/src/ATen/core/TensorMethods.cpp"):
        assert f"{generated} (generated from the edited {TEMPLATES}/{generated.rsplit('/', 1)[1]})" in stderr
    assert not any(f"{TEMPLATES}/Functions.cpp" in line or f"{TEMPLATES}/TensorMethods.cpp" in line for line in report["unchecked"])


def test_several_ops_after_an_earlier_bypass_compile_in_one_verification(tmp_path: Path) -> None:
    """div and the drawn signature class in one run over guarded mul (tests/several_ops.py: the state test_any_order.py
    and test_signatures.py verify too, shared through the build cache): the full tree's inputs take mul's guarded
    bypass first."""
    copy = shutil.copytree(TARGET_TREE, tmp_path / "tree")
    several_ops.bypass_guarded_mul(copy, "--no-build")
    before = snapshot(copy)
    result = several_ops.bypass_plain_ops(copy)
    compiled = compiled_files(verified_lines(result.stderr))
    assert BINARY_OPS in compiled
    assert sorted(compiled) == _edited_sources(before, snapshot(copy))
    assert result.stderr.count("compile check: the full tree's codegen inputs") == 1  # one full tree for every op
    for op in several_ops.PLAIN_OPS:  # each plan captured at most once (a capture of the same inputs is cached), then handed to the full tree
        assert result.stderr.count(f"capture: torchgen on the entries of {op},") <= 1


def test_a_bypass_that_writes_code_that_does_not_compile_fails_at_target_trees_file_and_line(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(TARGET_TREE, tree)
    located = locate(tree)
    plan, line = doctored(make_plan(located, "mul"))
    journal.apply(located, [plan])
    with pytest.raises(VerificationFailed) as failed:
        overlay_compile.check(located, [plan])
    assert failed.value.exit_code == 1
    message = str(failed.value)
    assert f"{BINARY_OPS}:{line}:16: error: " in message and "codemod_undeclared_name" in message
    assert "codemod-overlay-" not in message and "codemod-compile-" not in message and str(tree) not in message


def test_an_op_the_installed_torch_declares_otherwise_is_named_and_nothing_is_called_verified(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(TARGET_TREE, tree)
    yaml = tree / NATIVE_FUNCTIONS
    text = yaml.read_text()
    entry = "  structured_delegate: mul.out\n  variants: function, method\n"
    assert text.count(entry) == 1
    yaml.write_text(text.replace(entry, entry.replace("variants: function, method", "variants: function")))
    located = locate(tree)
    plan = make_plan(located, "mul")
    journal.apply(located, [plan])
    report = overlay_compile.check(located, [plan])
    assert report.compiled == () and report.verified() == []
    why = (
        f"the full tree cannot stand for this tree: {NATIVE_FUNCTIONS}: mul.Tensor's variants is 'function' here, "
        "'function, method' in the installed torch"
    )
    assert {n.path for n in report.not_compiled if n.why == why} >= {BINARY_OPS, STATIC_RUNTIME}


# Issue 18: what g++ compiled is what is on disk, a rewritten header is compiled, the cache keyed by what g++ read.
MUL_HELPER = "aten/src/ATen/native/MulHelper.h"
MUL_HELPER_TEXT = """#pragma once
// Helpers of BinaryOps.cpp that take the CPU kernel directly.
#include <ATen/CPUFunctions.h>
#include <ATen/Functions.h>

namespace at::native {
inline Tensor mul_twice(const Tensor& a) {
  return at::cpu::mul(a, at::cpu::mul(a, a));
}
} // namespace at::native
"""
MUL_ALONE = "aten/src/ATen/native/MulAlone.h"  # included by no file
MUL_ALONE_TEXT = MUL_HELPER_TEXT.replace("mul_twice", "mul_alone")


def test_files_are_compiled_as_they_are_on_disk_headers_included(tmp_path_factory: pytest.TempPathFactory) -> None:
    tree = slim_copy(tmp_path_factory, "on-disk")
    (tree / MUL_HELPER).write_text(MUL_HELPER_TEXT)
    (tree / MUL_ALONE).write_text(MUL_ALONE_TEXT)
    binary_ops = tree / BINARY_OPS
    binary_ops.write_text(binary_ops.read_text().replace("\nnamespace at::meta {", '\n#include "MulHelper.h"\n\nnamespace at::meta {', 1))

    mul = run_codemod("bypass", "mul", "--tree", str(tree), "--no-build")
    assert mul.returncode == 0, mul.stderr
    compiled = compiled_files(verified_lines(mul.stderr))
    # every header the bypass rewrote is compiled: through the file that reads it, or alone
    assert f"{MUL_HELPER} (read by {BINARY_OPS})" in compiled and MUL_ALONE in compiled

    # a recorded compile stands while the tree's headers g++ read keep their bytes
    located = locate(tree)
    entry = journal.load(located, "mul")
    yaml = entry.file(NATIVE_FUNCTIONS)
    again = Plan("mul", entry.overloads, (FileChange(yaml.path, yaml.before, yaml.after),), (), (), (), entry.capture, reaching=(BINARY_OPS,))
    assert overlay_compile.check(located, [again]).cached == (BINARY_OPS,)
    with (tree / MUL_HELPER).open("a") as helper:
        helper.write("// read by BinaryOps.cpp\n")
    recompiled = overlay_compile.check(located, [again])
    assert recompiled.compiled == (BINARY_OPS,) and recompiled.cached == ()

    # a file that did not compile before the bypass is named, its errors not blamed on the bypass: mul's again, whose
    # generated sources are the README's main job's (cached), over a helper broken in between
    assert run_codemod("revert", "mul", "--tree", str(tree)).returncode == 0
    broken_line = len((tree / MUL_HELPER).read_text().splitlines()) + 1
    with (tree / MUL_HELPER).open("a") as helper:
        helper.write("this_is_not_cpp;\n")
    rebypassed = run_codemod("bypass", "mul", "--tree", str(tree), "--no-build")
    assert rebypassed.returncode == 0, rebypassed.stderr
    assert not any(BINARY_OPS in line for line in verified_lines(rebypassed.stderr))
    # the helper the bypass rewrote with it, which it read
    expected = f"not compiled: {BINARY_OPS}, {MUL_HELPER}: did not compile before the bypass (first error {MUL_HELPER}:{broken_line}: "
    assert expected in rebypassed.stderr, rebypassed.stderr


def test_a_caller_reaching_a_removed_function_through_a_macro_fails_the_bypass(tmp_path_factory: pytest.TempPathFactory) -> None:
    tree = slim_copy(tmp_path_factory, "spelled")
    add_spelled_callers(tree)
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-build")
    assert result.returncode == 1, result.stderr
    assert "every reference to the removed" not in result.stderr
    line = (tree / SPELLED_CALLER).read_text().splitlines().index("  return CPU_OP(mul)(a, b) + mul(member, b);") + 1
    left = result.stderr.split("callers still reach a function the bypass removed (rewrite each by hand):\n", 1)[1]
    left = left.split("the edited sources do not compile", 1)[0].splitlines()
    assert [x.split(" (", 1)[0] for x in left] == [f"  {SPELLED_CALLER}:{line}: return CPU_OP(mul)(a, b) + mul(member, b);"]
    assert f"{SPELLED_CALLER}:{line}:17: error: " in result.stderr


def test_a_kernel_under_ifdef_is_named_as_not_compiled(tmp_path_factory: pytest.TempPathFactory) -> None:
    tree = slim_copy(tmp_path_factory, "ifdef")
    binary_ops = tree / BINARY_OPS
    # mul: the README's op, whose generated code and other edited files are compiled for the same bytes before
    kernel = "TORCH_IMPL_FUNC(mul_out) (\n  const Tensor& self, const Tensor& other, const Tensor& result\n) {\n"
    text = binary_ops.read_text()
    start = text.index(kernel)
    end = text.index("}\n", start) + 2
    binary_ops.write_text(text[:start] + "#ifdef USE_FOO\n" + text[start:end] + "#endif\n" + text[end:])
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-build")
    assert result.returncode == 0, result.stderr
    assert not any(BINARY_OPS in line for line in verified_lines(result.stderr))
    after = binary_ops.read_text().splitlines()
    branch = range(after.index("#ifdef USE_FOO") + 1, after.index("#endif", after.index("#ifdef USE_FOO")) + 1)
    reason = "written by the bypass, are in a preprocessor branch g++ does not take with these flags (#ifdef USE_FOO); they were not compiled"
    found = re.search(rf"not compiled: {BINARY_OPS}: lines ([-\d, ]+), {re.escape(reason)}", result.stderr)
    assert found is not None, result.stderr
    lines = [int(n) for n in re.findall(r"\d+", found[1])]
    assert all(n in branch for n in lines) and any("@codemod-bypass mul" in after[n - 1] for n in branch)


def test_a_caller_left_out_in_review_fails_the_bypass_and_status_says_where(tmp_path_factory: pytest.TempPathFactory) -> None:
    tree = slim_copy(tmp_path_factory, "review")
    dry = run_codemod("bypass", "mul", "--tree", str(tree), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    answers = [
        answer for f in json.loads(dry.stdout)["ops"][0]["files"] for answer in ["n" if f["path"] == STATIC_RUNTIME else "y"] * f["hunks"]
    ]
    run = subprocess.run(
        [sys.executable, "-m", "codemod", "bypass", "mul", "--tree", str(tree), "--interactive", "--no-build"],
        input="".join(f"{a}\n" for a in answers), capture_output=True, text=True, cwd=REPO,
    )
    assert run.returncode == 1, run.stderr
    call = "p_node->Output(0) = at::cpu::mul(self, other);"
    line = (tree / STATIC_RUNTIME).read_text().splitlines().index(f"      {call}") + 1
    assert f"callers still reach a function the bypass removed (rewrite each by hand):\n  {STATIC_RUNTIME}:{line}: {call}" in run.stderr
    status = run_codemod("status", "--tree", str(tree))
    assert f"  the tree no longer compiles there: {STATIC_RUNTIME}:{line}: {call} (at::cpu::mul, which the bypass removed)" in status.stdout
