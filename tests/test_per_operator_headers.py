"""A source that includes torchgen's per-operator headers (`<ATen/ops/addcmul_native.h>`) whatever the build, as
target_tree/'s PointwiseOps.cpp does in a fork's shape, compiles against the per-operator headers the tree's
torchgen generates from the edited yaml, not against the installed torch's, which still declare the structs the
bypass carries over into the source (issue 19: a redefinition blamed on the bypass).

Real torchgen (both layouts), real g++, through the real CLI: a full tree (`codemod tree from-torch` around
target_tree/'s sources) and a slim one (target_tree/ itself, compiled against a full tree's headers). Generated
headers and compiles are shared through the build cache (CODEMOD_BUILD_CACHE).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codemod.model.tree import NATIVE_SOURCES
from tests.conftest import OUTPUT_SCHEMA, TARGET_TREE, run_codemod, snapshot
from tests.test_compile_check import full_tree

POINTWISE_OPS = f"{NATIVE_SOURCES}/PointwiseOps.cpp"
PER_OPERATOR = f"({POINTWISE_OPS}: in torchgen's per-operator layout, with -DAT_PER_OPERATOR_HEADERS, for files that include <ATen/ops/...>)"


def bypass_addcmul(tree: Path) -> dict:
    result = run_codemod("bypass", "addcmul", "--tree", str(tree), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(report)
    return report


def compile_line(report: dict) -> str:
    (line,) = [line for line in report["verified"] if line.startswith("g++ -c")]
    return line


@pytest.mark.parametrize("kind", ["full", "slim"])
def test_a_source_that_includes_per_operator_headers_compiles_against_the_trees_own(kind: str, tmp_path: Path) -> None:
    tree = full_tree(tmp_path, {}) if kind == "full" else shutil.copytree(TARGET_TREE, tmp_path / "tree")
    text = (tree / POINTWISE_OPS).read_text()
    assert "\n#include <ATen/ops/addcmul_native.h>\n" in text and "#endif" not in text  # not under a condition
    before = snapshot(tree)

    report = bypass_addcmul(tree)
    compiled = compile_line(report)
    assert PER_OPERATOR in compiled
    assert POINTWISE_OPS in compiled.split(" compiles ", 1)[1].split(" against ", 1)[0].split(", ")
    assert not any(POINTWISE_OPS in line for line in report["unchecked"])

    reverted = run_codemod("revert", "addcmul", "--tree", str(tree))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tree) == before


def test_the_file_as_it_was_compiles_against_the_same_layout(tmp_path: Path) -> None:
    """Including the monolithic NativeFunctions.h as well is what PyTorch's per-operator build refuses in a file
    that asserts it uses only method operators (its #error): an error the file had before the bypass, found only
    when the file as it was compiles against per-operator headers too, so it is not blamed on the bypass."""
    source = (TARGET_TREE / POINTWISE_OPS).read_text()
    with_monolithic = source.replace("#include <ATen/ops/addcmul_native.h>\n", "#include <ATen/ops/addcmul_native.h>\n#include <ATen/NativeFunctions.h>\n", 1)
    assert with_monolithic != source
    tree = full_tree(tmp_path, {POINTWISE_OPS: with_monolithic})

    report = bypass_addcmul(tree)
    (why,) = [line for line in report["unchecked"] if line.startswith(f"{POINTWISE_OPS}: ")]
    assert "did not compile before the bypass (first error ATen/NativeFunctions.h:" in why
    assert "#error This change adds a dependency on all pytorch operators" in why
    assert not any(POINTWISE_OPS in line for line in report["verified"])  # never called compiled
