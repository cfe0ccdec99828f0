"""`codemod ops`: what it lists as bypassable, `bypass` takes; what it refuses, it says why."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codemod.cli import catalog
from codemod.model.tree import locate
from tests import sampling
from tests.conftest import TARGET_TREE, run_codemod


def ops_json(tree: Path) -> dict[str, dict]:
    result = run_codemod("ops", "--tree", str(tree), "--json")
    assert result.returncode == 0, result.stderr
    return {status["op"]: status for status in json.loads(result.stdout)["ops"]}


# target_tree/'s ops by what `ops` says of each: bypassable, or the reason it is not
BY_REASON: dict[str, list[str]] = {}
for status in catalog.catalog(locate(TARGET_TREE)):
    BY_REASON.setdefault(status.reason or "bypassable", []).append(status.op)


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory, target_tree: Path) -> tuple[Path, dict[str, dict]]:
    """A copy of target_tree/ and what `ops --json` lists for it."""
    copy = tmp_path_factory.mktemp("listed") / "tree"
    shutil.copytree(target_tree, copy)
    return copy, ops_json(copy)


def test_target_tree_catalog(listed: tuple[Path, dict[str, dict]]) -> None:
    _, statuses = listed
    assert {"mul", "sub", "div", "add"} <= {op for op, status in statuses.items() if status["bypassable"]}
    assert statuses["mul"]["overloads"] == ["mul.Tensor", "mul_.Tensor", "mul.out"]
    assert statuses["abs"]["reason"] == "not structured"
    assert statuses["requires_grad"]["reason"] == "already manual_cpp_binding"
    assert {op: status["reason"] or "bypassable" for op, status in statuses.items()} == {
        op: reason for reason, ops in BY_REASON.items() for op in ops
    }  # what the sample below is drawn from


@sampling.parametrize("op", BY_REASON, 2)
def test_bypass_dry_runs_an_op_ops_lists_as_bypassable_and_refuses_one_it_does_not(listed: tuple[Path, dict[str, dict]], op: str) -> None:
    """Two ops of each kind `ops` lists (bypassable, and each reason it refuses) each run; every op under
    `benchmarks/exhaustive.py`."""
    tree, statuses = listed
    run = run_codemod("bypass", op, "--tree", str(tree), "--dry-run")
    assert run.returncode == (0 if statuses[op]["bypassable"] else 2), f"{op} ({statuses[op]['reason'] or 'bypassable'}): {run.stderr}"


def test_a_bypassed_op_is_listed_as_such(tree: Path) -> None:
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    status = ops_json(tree)["mul"]
    assert not status["bypassable"] and status["reason"] == "bypassed"
    text = run_codemod("ops", "--tree", str(tree), "--bypassable")
    listed = [line.split()[0] for line in text.stdout.splitlines()]
    assert "mul" not in listed and listed[0] == "add"  # addcmul is listed: "mul " alone would match it


@pytest.fixture(scope="module")
def real_tree(tmp_path_factory: pytest.TempPathFactory, target_tree: Path) -> Path:
    dest = tmp_path_factory.mktemp("ops") / "tree"
    made = run_codemod("tree", "from-torch", str(dest), "--sources", str(target_tree))
    assert made.returncode == 0, made.stderr
    assert (dest / "torchgen/gen.py").is_file() and (dest / "tools/autograd/gen_autograd.py").is_file()
    return dest


def test_real_tree_reasons(real_tree: Path) -> None:
    statuses = ops_json(real_tree)
    assert len(statuses) > 1000
    assert {"mul", "sub", "div", "add"} <= {op for op, s in statuses.items() if s["bypassable"]}
    # structured in the yaml, but the wheel ships no Sorting.cpp or TensorShape.cpp: the tree lacks the kernels to
    # move (cat's meta function is `precomputed`, which the tool carries over like any other)
    for op, struct in (("sort", "structured_sort_stable_out"), ("cat", "structured_cat_out_cpu")):
        assert statuses[op]["reason"] == "kernel source not in the tree"
        assert struct in statuses[op]["detail"]
    refused = run_codemod("bypass", "cat", "--tree", str(real_tree), "--dry-run")
    assert refused.returncode == 2 and "at::native::structured_cat_out_cpu" in refused.stderr


def test_explain_names_the_call_path_and_where_each_piece_lives(tree: Path) -> None:
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    run = run_codemod("explain", "div", "--tree", str(tree))
    assert run.returncode == 0, run.stderr
    text = run.stdout
    assert "2 structured group(s)" in text and "div.Tensor_mode" in text
    assert "at::_ops::div_Tensor::call(self, other)" in text
    assert "formula of div.Tensor, tools/autograd/derivatives.yaml:" in text
    assert "structured_div_out::impl   aten/src/ATen/native/BinaryOps.cpp:" in text
    assert "at::native::div  hand-written next to the kernel: codemod_bypass_div::wrapper_CPU_div_Tensor" in text
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before
    assert run_codemod("explain", "abs", "--tree", str(tree)).returncode == 2
