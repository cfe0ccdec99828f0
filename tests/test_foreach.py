"""The derivatives.yaml cascade, checked against the real torch 2.13.0 autograd codegen.

One tree is built from the installed wheel for the module; the codegen runs on
copies of its inputs, so the tests do not depend on each other's order.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemod.capture.fromtorch import write_tree_from_torch
from codemod.model.edits import apply_edits
from codemod.model.errors import BadInput
from codemod.model.tree import DERIVATIVES, GEN_VARIABLE_TYPE, NATIVE_FUNCTIONS, TAGS, locate
from codemod.plan.foreach import exempt_foreach_ops, foreach_autograd_losses
from codemod.verify import compile_check
from tests.conftest import REPO, SESSION_CACHE, TARGET_TREE, snapshot

MUL_GROUP = ("mul.Tensor", "mul_.Tensor", "mul.out")
# Measured with the torch 2.13.0 derivatives.yaml; derived by the analysis, not listed in it.
MUL_LOSSES = {
    "_foreach_mul.List": False,
    "_foreach_mul.Tensor": False,
    "_foreach_mul_.List": True,
    "_foreach_mul_.Tensor": True,
}


def entry_span(lines: list[str], prefix: str, name: str) -> tuple[int, int]:
    """Line span of the yaml list entry `<prefix><name>(...`, up to the next entry."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{prefix}{name}("))
    end = start + 1
    while end < len(lines) and not lines[end].startswith("- "):
        end += 1
    return start, end


def without_formula(derivatives: str, name: str) -> str:
    lines = derivatives.splitlines(keepends=True)
    start, end = entry_span(lines, "- name: ", name)
    return "".join(lines[:start] + lines[end:])


def made_manual(native: str, names: tuple[str, ...]) -> str:
    """Drop structured/delegate/dispatch lines of the entries, mark them manual_cpp_binding."""
    lines = native.splitlines(keepends=True)
    for name in names:
        start, end = entry_span(lines, "- func: ", name)
        kept, in_dispatch = [lines[start]], False
        for line in lines[start + 1 : end]:
            if line.startswith("  dispatch:"):
                in_dispatch = True
                continue
            if in_dispatch and line.startswith("    "):
                continue
            in_dispatch = False
            if not re.match(r"  (structured|structured_inherits|structured_delegate):", line):
                kept.append(line)
        kept.insert(1, "  manual_cpp_binding: True\n")
        lines[start:end] = kept
    return "".join(lines)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A checkout from the installed wheel, with our target_tree's native sources (mul's kernel among them)."""
    root = tmp_path_factory.mktemp("torch_tree") / "tree"
    write_tree_from_torch(root, TARGET_TREE)
    return locate(root)


@pytest.fixture(scope="module")
def mul_losses(tree):
    edited = without_formula(tree.path(DERIVATIVES).read_text(), "mul.Tensor")
    return edited, foreach_autograd_losses(tree, edited)


def native_overloads(tree) -> set[str]:
    text = tree.path(NATIVE_FUNCTIONS).read_text()
    return set(re.findall(r"^- func: ([\w.]+)\(", text, flags=re.M))


def run_autograd_codegen(tree, work: Path, derivatives: str, gen_variable_type: bytes):
    """The tree's own `python -m tools.autograd.gen_autograd` on edited copies of its inputs."""
    copy = work / "tree"
    shutil.copytree(tree.root / "tools", copy / "tools")
    shutil.copytree(tree.root / "torchgen", copy / "torchgen")
    (copy / DERIVATIVES).write_text(derivatives)
    (copy / GEN_VARIABLE_TYPE).write_bytes(gen_variable_type)
    native = work / "native_functions.yaml"
    native.write_text(made_manual(tree.path(NATIVE_FUNCTIONS).read_text(), MUL_GROUP))
    command = [tree.python, "-m", "tools.autograd.gen_autograd", str(native),
               str(tree.path(TAGS)), str(work / "out"), str(copy / "tools/autograd")]
    return subprocess.run(command, cwd=copy, env=locate_env(copy), capture_output=True, text=True)


def locate_env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root)}


def test_tree_from_torch_has_checkout_layout(tree):
    assert tree.has_own_torchgen and tree.has_own_autograd
    assert (tree.root / "aten/src/ATen/native/BinaryOps.cpp").is_file()
    assert not (tree.root / "torchgen/packaged").exists()
    assert not list(tree.root.rglob("__pycache__"))
    with pytest.raises(BadInput, match="not an empty directory"):
        write_tree_from_torch(tree.root, tree.root)


def test_analysis_finds_the_foreach_ops_reusing_mul(tree, mul_losses):
    _, losses = mul_losses
    assert {loss.overload: loss.inplace for loss in losses} == MUL_LOSSES
    overloads = native_overloads(tree)
    for loss in losses:
        assert loss.overload in overloads
        assert loss.overload.split(".")[0] in ("_foreach_mul", "_foreach_mul_")
        assert loss.references == ("mul.Tensor",)
        assert "mul.Tensor" in loss.why


# Formulas whose removal the reduced analysis must judge as the whole-file one does:
# binary ops with Tensor overloads, the alpha-less foreach overloads of add/sub
# (_skip_argument_len_check), zero_ (an in-place reference), a pointwise ternary op.
SEVERAL_FORMULAS = ("mul.Tensor", "div.Tensor", "add.Tensor", "sub.Tensor", "sub.Scalar",
                    "zero_", "lerp.Scalar", "addcdiv", "pow.Tensor_Scalar")


def test_reduced_analysis_agrees_with_the_whole_files(tree):
    """One edit removing several formulas, so the whole-file loader runs once."""
    edited = tree.path(DERIVATIVES).read_text()
    for name in SEVERAL_FORMULAS:
        edited = without_formula(edited, name)
    reduced = foreach_autograd_losses(tree, edited)
    assert reduced == foreach_autograd_losses(tree, edited, whole_files=True)
    referenced = {ref for loss in reduced for ref in loss.references}
    assert referenced == set(SEVERAL_FORMULAS)


def test_unchanged_formulas_lose_nothing(tree):
    assert foreach_autograd_losses(tree, tree.path(DERIVATIVES).read_text()) == []


def test_exemption_lets_the_autograd_codegen_run(tree, mul_losses, tmp_path):
    edited, losses = mul_losses
    edits = exempt_foreach_ops(tree, [loss.overload for loss in losses], op="mul")
    original = tree.path(GEN_VARIABLE_TYPE).read_bytes()
    patched = apply_edits(original, edits)

    # Only whole lines are added, inside the set, in its format.
    assert all(edit.is_insertion for edit in edits)
    old_lines, new_lines = original.decode().splitlines(), patched.decode().splitlines()
    added = [line for line in new_lines if line not in old_lines]
    assert added == [
        "    # Added by `codemod bypass mul`: the formula they reused was removed.",
        '    ("_foreach_mul", "List"),',
        '    ("_foreach_mul", "Tensor"),',
    ]
    assert [line for line in new_lines if line not in added] == old_lines

    # Idempotent: on the patched file there is nothing left to add.
    patched_tree = tmp_path / "again"
    shutil.copytree(tree.root / "tools", patched_tree / "tools")
    (patched_tree / GEN_VARIABLE_TYPE).write_bytes(patched)
    again = locate_like(tree, patched_tree)
    assert exempt_foreach_ops(again, [loss.overload for loss in losses], op="mul") == []

    result = run_autograd_codegen(tree, tmp_path / "run", edited, patched)
    assert result.returncode == 0, result.stderr[-2000:]


def test_without_exemption_the_autograd_codegen_fails(tree, mul_losses, tmp_path):
    edited, _ = mul_losses
    original = tree.path(GEN_VARIABLE_TYPE).read_bytes()
    result = run_autograd_codegen(tree, tmp_path / "run", edited, original)
    assert result.returncode != 0
    assert "_foreach_mul.List should have a differentiability info" in result.stderr


def test_slim_tree_without_autograd_codegen_is_refused(tree, tmp_path):
    slim = locate_like(tree, tmp_path)  # no tools/autograd/gen_variable_type.py there
    with pytest.raises(BadInput, match="cannot exempt"):
        exempt_foreach_ops(slim, ["_foreach_mul_.List"])
    assert exempt_foreach_ops(slim, []) == []


def locate_like(tree, root: Path):
    """A Tree value at another root (only the gen_variable_type.py path is read)."""
    return type(tree)(root=root, has_own_torchgen=False, has_own_autograd=False)


def bypass_mul(root: Path, cache: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`codemod -v bypass mul` on ROOT with the build cache CACHE: the codegen and its verification, no compile."""
    return subprocess.run([sys.executable, "-m", "codemod", "-v", "bypass", "mul", "--tree", str(root), "--no-build", *flags],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "CODEMOD_BUILD_CACHE": str(cache)})


def test_the_bypass_runs_each_codegen_once_on_the_planned_bytes(tree, tmp_path):
    """The foreach exemption edits the autograd codegen's own code: its one run, before writing, is on the planned
    gen_variable_type.py (on the tree's it fails, as above); after writing, verify finds every run in the build cache.
    An empty build cache, unlike the session's: what is counted is the runs a first bypass makes."""
    root = shutil.copytree(tree.root, tmp_path / "tree")
    result = bypass_mul(root, tmp_path / "cache", "--no-compile")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    commands = [line for line in lines if line.startswith("$ ")]
    assert sum(" -m tools.autograd.gen_autograd " in line for line in commands) == 1
    assert sum(" -m torchgen.gen " in line and "--generate headers" in line for line in commands) == 1
    written = next(i for i, line in enumerate(lines) if line.startswith("bypass mul (mul.Tensor, mul_.Tensor, mul.out) changed 11 files"))
    assert all(i < written for i, line in enumerate(lines) if line.startswith("$ "))
    assert ("verified: torchgen on the whole yaml, torchgen on the op's entries, the autograd codegen: ran clean on the "
            "planned bytes before writing; the tree now holds exactly those bytes, not run again") in lines
    assert '("_foreach_mul", "List")' in (root / GEN_VARIABLE_TYPE).read_text()


def test_a_second_plan_on_the_same_inputs_finds_the_cascade_kept(tree, tmp_path):
    """The loader's verdict and the exemption edit are kept in the build cache by every input: a second dry run of the
    same op runs neither the loader nor libcst and prints the same patch; an edit of the autograd codegen, one of the
    inputs, runs the loader again."""
    root = shutil.copytree(tree.root, tmp_path / "tree")

    def loader_runs_of_a_dry_run() -> tuple[int, subprocess.CompletedProcess[str]]:
        run = bypass_mul(root, tmp_path / "cache", "--dry-run")
        assert run.returncode == 0, run.stderr
        return run.stderr.count("def reference_name(name)"), run  # in the loader's script, which -v prints after its `$`

    (first, planned), (again, replanned) = loader_runs_of_a_dry_run(), loader_runs_of_a_dry_run()
    assert (first, again) == (1, 0)
    assert "foreach cascade of mul: the tree's autograd loader on the foreach entries: kept from an earlier run (build cache)" in replanned.stderr
    assert replanned.stdout == planned.stdout and f"diff --git a/{GEN_VARIABLE_TYPE}" in planned.stdout  # the exemption, as first planned
    codegen = root / GEN_VARIABLE_TYPE
    codegen.write_text(codegen.read_text() + "# one more line\n")
    assert loader_runs_of_a_dry_run()[0] == 1


def test_a_result_the_autograd_codegen_refuses_is_not_written(tree, tmp_path):
    """A gen_variable_type.py that rebinds the exemption set after the literal the planner edits: the tree as it is
    passes the autograd codegen, the bypass's result does not. Exit 1, every byte as it was, --dry-run too. The
    refusal stops the compile of the op's generated code begun beside the codegen: at most the compiles under way
    then (one per job) and those starting with them are run, not the op's every unit (14 for mul)."""
    root = shutil.copytree(tree.root, tmp_path / "tree")
    code = root / GEN_VARIABLE_TYPE
    code.write_text(code.read_text() + "\n_foreach_ops_without_differentiability_info = {\n"
                    '    key for key in _foreach_ops_without_differentiability_info if key[0] != "_foreach_mul"\n}\n')
    before = snapshot(root), directories(root)
    for flags in ((), ("--dry-run",)):
        result = bypass_mul(root, SESSION_CACHE, *flags)  # the runs that pass are the session's; a failure is never kept
        assert result.returncode == 1, result.stderr
        assert result.stderr.splitlines()[-1] == (
            "codemod: the result of `bypass mul` is refused by the tree's autograd codegen: AssertionError: "
            "_foreach_mul.List should have a differentiability info; nothing was written (`--dry-run --no-verify` prints the patch)"
        )
        assert result.stdout == ""
        assert (snapshot(root), directories(root)) == before
        compiles = [line for line in result.stderr.splitlines() if line.startswith("$ g++ ") and " -c " in line]
        assert len(compiles) <= 2 * compile_check.JOBS, compiles


def directories(root: Path) -> set[str]:
    """Every directory but Python's byte-code caches (the tree's torchgen runs from the tree, as a checkout's does)."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir() and "__pycache__" not in p.parts}
