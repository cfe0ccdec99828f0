"""Verification compiles what the bypass wrote: real torchgen regenerates the headers, real g++ compiles
every edited source and rewritten caller against them.

The trees are `codemod tree from-torch` around target_tree/'s sources: target_tree/'s own yaml and
templates are a slim subset, whose headers cannot replace the installed torch's (it is checked as such).
The compiles are shared through the build cache (CODEMOD_BUILD_CACHE): the doctored plan's untouched
files and headers are those the CLI run compiled, so only the doctored file is compiled again.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from codemod.apply import journal
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_SOURCES, TEMPLATES, locate
from codemod.plan.plan import Plan, make_plan
from codemod.verify import compile_check
from codemod.verify.verify import verify
from tests.conftest import OUTPUT_SCHEMA, TARGET_TREE, run_codemod

BINARY_OPS = f"{NATIVE_SOURCES}/BinaryOps.cpp"
# A caller of at::cpu::mul that also includes a header neither target_tree/ nor the torch wheel has.
VENDOR_CALLER = "torch/csrc/codemod_fixture/uses_vendor.cpp"
MISSING_HEADER = "vendor_blas/gemm_config.h"
VENDOR_CALLER_TEXT = f"""#include <ATen/CPUFunctions.h>
#include <{MISSING_HEADER}>

at::Tensor scaled_product(const at::Tensor& a, const at::Tensor& b) {{
  return at::cpu::mul(a, b);
}}
"""


def full_tree(where: Path, extra_sources: dict[str, str]) -> Path:
    """`codemod tree from-torch` around a copy of target_tree/'s sources and EXTRA_SOURCES."""
    sources = where / "sources"
    shutil.copytree(TARGET_TREE, sources)
    for path, text in extra_sources.items():
        (sources / path).parent.mkdir(parents=True, exist_ok=True)
        (sources / path).write_text(text)
    result = run_codemod("tree", "from-torch", str(where / "tree"), "--sources", str(sources))
    assert result.returncode == 0, result.stderr
    return where / "tree"


@pytest.fixture(scope="module")
def bypassed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """`codemod bypass mul --json` on a full tree around target_tree/'s sources and the vendor caller: (report, stderr)."""
    tree = full_tree(tmp_path_factory.mktemp("compile"), {VENDOR_CALLER: VENDOR_CALLER_TEXT})
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(report)
    return report, result.stderr


def _compile_line(verified: list[str]) -> str:
    lines = [line for line in verified if line.startswith("g++ -fsyntax-only")]
    assert len(lines) == 1, verified
    return lines[0]


def test_bypass_compiles_every_edited_source_and_caller_and_names_them(bypassed: tuple[dict, str]) -> None:
    report, stderr = bypassed
    edited_sources = sorted(
        row["path"] for row in report["ops"][0]["files"]
        if row["path"].endswith(".cpp") and not row["path"].startswith(TEMPLATES) and row["path"] != VENDOR_CALLER
    )
    assert BINARY_OPS in edited_sources and "torch/csrc/jit/runtime/static/ops.cpp" in edited_sources
    compile_line = _compile_line(report["verified"])
    named = compile_line.split(" compiles ", 1)[1].split(" against ", 1)[0].split(", ")
    assert sorted(named) == edited_sources
    assert f"verified: {compile_line}" in stderr
    # BinaryOps.cpp includes ATen/Functions.h and (through ATen/core/Tensor.h) ATen/core/TensorBody.h
    assert f"from the edited {TEMPLATES}/Functions.h, {TEMPLATES}/TensorBody.h (" in compile_line
    unbuilt = f"{TEMPLATES}/Functions.cpp, {TEMPLATES}/TensorMethods.cpp: a template of a generated source, which this check does not build"
    assert unbuilt in report["unchecked"]


def test_a_source_including_a_header_nobody_has_is_named_and_not_called_verified(bypassed: tuple[dict, str]) -> None:
    report, stderr = bypassed
    assert VENDOR_CALLER in {row["path"] for row in report["ops"][0]["files"]}  # its call was rewritten
    expected = f"{VENDOR_CALLER}: includes <{MISSING_HEADER}> ({VENDOR_CALLER}:2), which neither the tree nor the installed torch has"
    assert expected in report["unchecked"]
    assert f"not compiled: {expected}" in stderr
    assert not any(VENDOR_CALLER in line for line in report["verified"])
    assert not any(VENDOR_CALLER in line for line in stderr.splitlines() if line.startswith("verified:"))


def doctored(plan: Plan) -> tuple[Plan, int]:
    """PLAN with a line that does not compile after its block in BinaryOps.cpp, and that line's number."""
    marker = f"// @codemod-bypass {plan.op} begin".encode()
    changes = []
    for change in plan.changes:
        if change.path == BINARY_OPS:
            at = change.after.index(b"\n", change.after.index(marker)) + 1
            after = change.after[:at] + b"int doctored = codemod_undeclared_name;\n" + change.after[at:]
            line = after[:at].count(b"\n") + 1
            change = dataclasses.replace(change, after=after)
        changes.append(change)
    return dataclasses.replace(plan, changes=tuple(changes)), line


def test_a_plan_whose_edit_does_not_compile_fails_at_the_trees_file_and_line(
    tmp_path: Path, bypassed: tuple[dict, str],  # after the CLI run: its compiles are cached
) -> None:
    located = locate(full_tree(tmp_path, {}))
    plan, line = doctored(make_plan(located, "mul"))
    journal.apply(located, [plan])
    with pytest.raises(VerificationFailed) as failed:
        verify(located, plan=plan)
    assert failed.value.exit_code == 1
    message = str(failed.value)
    assert f"{BINARY_OPS}:{line}:16: error: " in message and "codemod_undeclared_name" in message
    assert "was not declared in this scope" in message
    assert "codemod-compile-" not in message  # the scratch copy is named as the tree's file


def test_a_slim_trees_headers_are_not_used_and_the_reason_is_given(tmp_path: Path) -> None:
    slim = compile_check.slim_tree(locate(TARGET_TREE))
    assert slim is not None and "lacks" in slim and "compiled in a full tree built around them" in slim
    assert compile_check.slim_tree(locate(full_tree(tmp_path, {}))) is None
