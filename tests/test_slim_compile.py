"""A slim tree's bypass is compile-checked in a full tree built from the installed torch around its sources:
real torchgen plans and regenerates there, real g++ compiles what the bypass wrote in target_tree/.

One copy of target_tree/ is bypassed twice (mul, then div and atan2 in one run), so the second run also
replays the earlier bypass in the full tree. The doctored plans are planned on target_tree/ itself (nothing
is written there: the compile check reads the tree and the plan). Compiles are shared through the build
cache (CODEMOD_BUILD_CACHE).
"""
from __future__ import annotations

import importlib.metadata
import json
import shutil
from pathlib import Path

import pytest

from codemod.model.errors import VerificationFailed
from codemod.model.tree import TEMPLATES, locate
from codemod.plan import plan as plan_module
from codemod.plan.plan import Plan, make_plan
from codemod.verify import overlay_compile
from tests.conftest import OUTPUT_SCHEMA, TARGET_TREE, run_codemod, snapshot
from tests.test_compile_check import BINARY_OPS, doctored

FULL_TREE = f"in a full tree built from the installed torch {importlib.metadata.version('torch')} around this tree's sources"


def _compiled(verified: list[str]) -> list[str]:
    """The files the one g++ line says it compiled, checked to say where."""
    lines = [line for line in verified if line.startswith("g++ -fsyntax-only")]
    assert len(lines) == 1, verified
    assert f" {FULL_TREE} " in lines[0]
    return lines[0].split(" compiles ", 1)[1].split(f" {FULL_TREE}", 1)[0].split(", ")


def _edited_sources(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    return sorted(
        path for path in after
        if path.endswith(".cpp") and not path.startswith(TEMPLATES) and before.get(path) != after[path]
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("slim") / "tree"
    shutil.copytree(TARGET_TREE, tree)
    return tree


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
    compiled = _compiled(report["verified"])
    assert BINARY_OPS in compiled
    assert {"torch/csrc/autograd/VariableTypeManual.cpp", "torch/csrc/jit/runtime/static/ops.cpp"} <= set(compiled)
    assert sorted(compiled) == _edited_sources(before, snapshot(copy))
    assert any(line.startswith("verified: g++ -fsyntax-only") and FULL_TREE in line for line in stderr.splitlines())
    # the tree's own templates are not what the full tree generated its headers from
    own = f"{TEMPLATES}/Functions.h, {TEMPLATES}/TensorBody.h: this tree's own header template"
    assert any(line.startswith(own) for line in report["unchecked"]), report["unchecked"]


def test_several_ops_after_an_earlier_bypass_compile_in_one_verification(copy: Path, bypassed_mul) -> None:
    before = snapshot(copy)  # mul bypassed: the full tree replays it before div and atan2
    result = run_codemod("bypass", "div", "atan2", "--tree", str(copy))
    assert result.returncode == 0, result.stderr
    verified = [line.removeprefix("verified: ") for line in result.stderr.splitlines() if line.startswith("verified: ")]
    compiled = _compiled(verified)
    assert BINARY_OPS in compiled
    assert sorted(compiled) == _edited_sources(before, snapshot(copy))
    assert result.stderr.count("compile check: the same bypass in a full tree") == 1  # one overlay for both ops


@pytest.fixture(scope="module")
def doctored_on_target_tree() -> tuple[Plan, int]:
    return doctored(make_plan(locate(TARGET_TREE), "mul"))


def test_a_planner_that_writes_code_that_does_not_compile_fails_at_target_trees_file_and_line(
    doctored_on_target_tree, monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan, line = doctored_on_target_tree
    # the planner itself doctored: the full tree's plan carries the same line (and its outcome is recorded apart)
    monkeypatch.setattr(overlay_compile, "make_plan", lambda tree, op, guarded=False: doctored(plan_module.make_plan(tree, op, guarded))[0])
    key = overlay_compile._key
    monkeypatch.setattr(overlay_compile, "_key", lambda *inputs: f"doctored-planner-{key(*inputs)}")
    with pytest.raises(VerificationFailed) as failed:
        overlay_compile.check(locate(TARGET_TREE), [plan])
    assert failed.value.exit_code == 1
    message = str(failed.value)
    assert f"{BINARY_OPS}:{line}:16: error: " in message and "codemod_undeclared_name" in message
    assert "codemod-overlay-" not in message and "codemod-compile-" not in message


def test_a_file_the_full_trees_bypass_writes_differently_is_named_never_verified(doctored_on_target_tree) -> None:
    plan, line = doctored_on_target_tree  # only this plan is doctored: the full tree's bypass writes the file as it should
    report = overlay_compile.check(locate(TARGET_TREE), [plan])
    assert BINARY_OPS not in report.compiled
    assert not any(BINARY_OPS in text for text in report.verified())
    expected = (
        f"{BINARY_OPS}: the full tree's bypass writes it differently (after the bypass, "
        f"line {line}: 'int doctored = codemod_undeclared_name;' here"
    )
    assert any(text.startswith(expected) for text in report.unchecked()), report.unchecked()
    assert "torch/csrc/autograd/VariableTypeManual.cpp" in report.compiled
