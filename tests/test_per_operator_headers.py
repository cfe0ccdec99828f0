"""A source that includes torchgen's per-operator headers (`<ATen/ops/addcmul_native.h>`) whatever the build, as
target_tree/'s PointwiseOps.cpp does in a fork's shape, compiles against the per-operator headers the tree's
torchgen generates from the edited yaml, not against the installed torch's, which still declare the structs the
bypass carries over into the source (issue 19: a redefinition blamed on the bypass).

Real torchgen (both layouts) and real g++, on a full tree (`codemod tree from-torch` around target_tree/'s sources) and
a slim one (target_tree/ itself, compiled against a full tree's headers), through verification's compile of the edited
sources (verify.compiled, the call the CLI's verification makes): the sources torchgen generates for addcmul are not
compiled here (tests/test_compile_check.py compiles an op's).
Generated headers and compiles are shared through the build cache (CODEMOD_BUILD_CACHE).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from codemod.apply import journal
from codemod.model.tree import NATIVE_SOURCES, locate
from codemod.plan.plan import make_plan
from codemod.verify import compile_check, verify
from tests.conftest import TARGET_TREE, snapshot
from tests.test_compile_check import full_tree

POINTWISE_OPS = f"{NATIVE_SOURCES}/PointwiseOps.cpp"
PER_OPERATOR = f"({POINTWISE_OPS}: in torchgen's per-operator layout, with -DAT_PER_OPERATOR_HEADERS, for files that include <ATen/ops/...>)"


def bypassed_addcmul(tree: Path) -> compile_check.CompileReport:
    """addcmul's bypass written to TREE, and what verification's compile of the edited sources reports."""
    located = locate(tree)
    plan = make_plan(located, "addcmul")
    journal.apply(located, [plan])
    return verify.compiled(located, [plan], compile_check.regenerate_headers(located))


def compile_line(report: compile_check.CompileReport) -> str:
    (line,) = [line for line in report.verified() if line.startswith("g++ -c")]
    return line


@pytest.mark.parametrize("kind", ["full", "slim"])
def test_a_source_that_includes_per_operator_headers_compiles_against_the_trees_own(kind: str, tmp_path: Path) -> None:
    tree = full_tree(tmp_path, {}) if kind == "full" else shutil.copytree(TARGET_TREE, tmp_path / "tree")
    text = (tree / POINTWISE_OPS).read_text()
    assert "\n#include <ATen/ops/addcmul_native.h>\n" in text and "#endif" not in text  # not under a condition
    before = snapshot(tree)

    report = bypassed_addcmul(tree)
    compiled = compile_line(report)
    assert PER_OPERATOR in compiled
    assert POINTWISE_OPS in compiled.split(" compiles ", 1)[1].split(" against ", 1)[0].split(", ")
    assert not any(POINTWISE_OPS in line for line in report.unchecked())

    journal.revert(locate(tree), ["addcmul"])
    assert snapshot(tree) == before


def test_the_file_as_it_was_compiles_against_the_same_layout(tmp_path: Path) -> None:
    """Including the monolithic NativeFunctions.h as well is what PyTorch's per-operator build refuses in a file
    that asserts it uses only method operators (its #error): an error the file had before the bypass, found only
    when the file as it was compiles against per-operator headers too, so it is not blamed on the bypass."""
    source = (TARGET_TREE / POINTWISE_OPS).read_text()
    with_monolithic = source.replace("#include <ATen/ops/addcmul_native.h>\n", "#include <ATen/ops/addcmul_native.h>\n#include <ATen/NativeFunctions.h>\n", 1)
    assert with_monolithic != source
    tree = full_tree(tmp_path, {POINTWISE_OPS: with_monolithic})

    report = bypassed_addcmul(tree)
    (why,) = [line for line in report.unchecked() if line.startswith(f"{POINTWISE_OPS}: ")]
    assert "did not compile before the bypass (first error ATen/NativeFunctions.h:" in why
    assert "#error This change adds a dependency on all pytorch operators" in why
    assert not any(POINTWISE_OPS in line for line in report.verified())  # never called compiled
