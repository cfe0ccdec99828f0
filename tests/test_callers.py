"""Callers, exactly: only the callee (and the key set, and a method's receiver comma) changes, so comments and
line breaks in argument lists stay; at::_ops:: calls are listed with what they reach after the bypass; hunks are
as small as the change (difflib without autojunk)."""
from __future__ import annotations

import difflib
import json
import random
import subprocess
from pathlib import Path

import pytest

from codemod.apply import journal, patch
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, locate
from codemod.plan.plan import FileChange, make_plan
from codemod.verify import overlay_compile
from tests.conftest import OUTPUT_SCHEMA, run_codemod
from tests.test_compile_check import replaced

BLAS_SCALE = "aten/src/ATen/native/BlasScale.cpp"
ZERO_TENSOR = "aten/src/ATen/native/ZeroTensorBinaryOps.cpp"


def dry_run_json(tree: Path, op: str) -> tuple[dict, str]:
    run = run_codemod("bypass", op, "--tree", str(tree), "--dry-run", "--json", "--patch", str(tree.parent / "p.diff"))
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    OUTPUT_SCHEMA.validate(document)
    return document, (tree.parent / "p.diff").read_text()


def bypassed(tree: Path, rel: str) -> str:
    run = run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify")
    assert run.returncode == 0, run.stderr
    return (tree / rel).read_text()


def test_only_callee_names_change_comments_and_line_breaks_stay(tree: Path) -> None:
    before = (tree / BLAS_SCALE).read_text()
    after = bypassed(tree, BLAS_SCALE)
    assert after.count("\n") == before.count("\n")
    # every changed line differs from its original only where the callee was (and a method's receiver comma)
    expected = (
        before.replace("at::cpu::mul_out(", "at::mul_out(")
        .replace("at::cpu::mul(x, at::cpu::mul(y, /*other=*/z))", "at::mul(x, at::mul(y, /*other=*/z))")
        .replace("at::cpu::mul_(*self, *self);", "(*self).mul_(*self);")
    )
    assert after == expected
    assert "      // the caller owns result; the kernel only resizes it\n      result,\n" in after
    assert "// NOLINT(readability-suspicious-call-argument)" in after


def test_redispatch_drops_only_the_key_set(tree: Path) -> None:
    rel = "torch/csrc/autograd/VariableTypeManual.cpp"
    before = (tree / rel).read_text()
    after = bypassed(tree, rel)
    assert "at::redispatch::mul(ks, self, other)" in before and "at::mul(self, other)" in after
    assert "at::redispatch::mul" not in after
    assert after.count("\n") == before.count("\n")


def test_nested_calls_are_each_rewritten(tree: Path) -> None:
    caller = tree / "torch/csrc/nested_callers.cpp"
    caller.write_text(
        "#include <ATen/CPUFunctions.h>\n"
        "at::Tensor cube(const at::Tensor& a) {\n"
        "  return at::cpu::mul(a, at::cpu::mul(a, a));\n"
        "}\n"
        "at::Tensor& square_sum_(at::Tensor& a, const at::Tensor& b) {\n"
        "  return at::cpu::mul_(a, at::cpu::mul(b,\n"
        "                                       b /* twice */));\n"
        "}\n"
        "at::Tensor redispatched(c10::DispatchKeySet ks, const at::Tensor& a) {\n"
        "  return at::redispatch::mul(ks, a, at::redispatch::mul(ks,\n"
        "      a, a));\n"
        "}\n"
    )
    assert bypassed(tree, "torch/csrc/nested_callers.cpp") == (
        "#include <ATen/CPUFunctions.h>\n"
        "at::Tensor cube(const at::Tensor& a) {\n"
        "  return at::mul(a, at::mul(a, a));\n"
        "}\n"
        "at::Tensor& square_sum_(at::Tensor& a, const at::Tensor& b) {\n"
        "  return a.mul_(at::mul(b,\n"
        "                                       b /* twice */));\n"
        "}\n"
        "at::Tensor redispatched(c10::DispatchKeySet ks, const at::Tensor& a) {\n"
        "  return at::mul(a, at::mul(\n"
        "      a, a));\n"
        "}\n"
    )


def test_calls_through_ops_structs_are_listed_with_what_they_reach(tree: Path) -> None:
    document, _ = dry_run_json(tree, "mul")
    listed = [x for x in document["ops"][0]["unrewritten"] if x["path"] == ZERO_TENSOR]
    line = (tree / ZERO_TENSOR).read_text().splitlines().index(
        "  const auto meta_result = at::_ops::mul_Tensor::redispatch(") + 1
    assert [(x["line"], x["needs_edit"]) for x in listed] == [(line, False)]
    assert "at::native::mul (CompositeImplicitAutograd)" in listed[0]["why"]
    assert all(x["needs_edit"] is False for x in document["ops"][0]["unrewritten"])  # every at::cpu::/redispatch:: call rewritten
    human = run_codemod("bypass", "mul", "--tree", str(tree), "--dry-run")
    assert "every reference to the removed at::cpu:: / at::redispatch:: functions was rewritten" in human.stderr
    assert f"{ZERO_TENSOR}:{line}: const auto meta_result = at::_ops::mul_Tensor::redispatch(" in human.stderr


def test_hunks_are_as_small_as_the_change(tree: Path) -> None:
    """2 changed lines in the tree's largest file make one +2/-2 hunk, where difflib's default (autojunk: lines
    frequent in a 200+ line file are junk) inflates the hunk."""
    before = (tree / NATIVE_FUNCTIONS).read_bytes()
    lines = before.decode().splitlines(keepends=True)

    def two_lines_changed_at(i: int) -> list[str]:
        return lines[:i] + ["# one\n", "# two\n"] + lines[i + 2 :]

    def changed_count(diff: list[str]) -> int:
        return sum(line[:1] in "+-" and line[:3] not in ("+++", "---") for line in diff)

    inflated = [i for i in range(len(lines) - 2) if changed_count(list(difflib.unified_diff(lines, two_lines_changed_at(i)))) > 4]
    assert inflated, "no position where difflib's autojunk inflates a hunk: the test has lost its subject"
    for i in inflated:
        change = FileChange(NATIVE_FUNCTIONS, before, "".join(two_lines_changed_at(i)).encode())
        [row] = patch.stat((change,))
        assert (row.added, row.removed, row.hunks) == (2, 2, 1)
        [hunk] = patch.hunks(change)
        assert changed_count(hunk.text.splitlines()) == 4


def random_sides(rng: random.Random) -> tuple[list[str], list[str]]:
    """Two versions of a file of frequent lines (the ones autojunk and quadratic matchers trip on)."""
    old = [rng.choice(["a\n", "}\n", "\n", "b\n"]) for _ in range(rng.randrange(0, 40))]
    new = [line for line in old if rng.random() > 0.1] + [rng.choice(["x\n", "}\n"])] * rng.randrange(2)
    return old, new


def test_unified_diff_is_difflibs_without_autojunk() -> None:
    """The one renderer of patch, -i and three-way revert writes what difflib writes, hunk for hunk, where the
    two sides begin and end differently (elsewhere the equal ends are set aside first, as git does)."""

    class NoAutojunk(difflib.SequenceMatcher):
        def __init__(self, isjunk=None, a="", b="") -> None:
            super().__init__(isjunk, a, b, autojunk=False)

    rng = random.Random(12)
    compared = 0
    while compared < 500:
        old, new = random_sides(rng)
        if old and new and (old[0] == new[0] or old[-1] == new[-1]):
            continue
        context = rng.randrange(0, 4)
        original, difflib.SequenceMatcher = difflib.SequenceMatcher, NoAutojunk
        try:
            expected = list(difflib.unified_diff(old, new, "a", "b", n=context))
        finally:
            difflib.SequenceMatcher = original
        assert list(patch.unified_diff(old, new, "a", "b", context)) == expected
        compared += 1


def test_every_diff_applies_with_git(tmp_path: Path) -> None:
    """Whatever the two sides share at their ends, `git apply` turns the old side into the new with our diff."""
    rng = random.Random(13)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for case in range(200):
        old, new = random_sides(rng)
        head = [rng.choice(["a\n", "}\n"]) for _ in range(rng.randrange(0, 6))]
        old, new = head + old + head, head + new + head
        if old == new:
            continue
        (tmp_path / "f").write_text("".join(old))
        (tmp_path / "p.diff").write_text("".join(patch.unified_diff(old, new, "a/f", "b/f")))
        applied = subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, capture_output=True, text=True)
        assert applied.returncode == 0, f"case {case}: {applied.stderr}"
        assert (tmp_path / "f").read_text() == "".join(new), f"case {case}"


# A caller that names at::cpu:: another way: an alias and a macro from its own header, and a using-declaration.
SPELLED_HEADER = "torch/csrc/codemod_fixture/cpu_spellings.h"
SPELLED_HEADER_TEXT = """#pragma once
#include <ATen/CPUFunctions.h>
#include <ATen/Functions.h>

namespace fast = at::cpu;
#define CPU_OP(name) at::cpu::name

inline at::Tensor squared(const at::Tensor& a) {
  return fast::mul(a, a);
}
"""
SPELLED_CALLER = "torch/csrc/codemod_fixture/cpu_spellings.cpp"
SPELLED_CALLER_TEXT = """#include <torch/csrc/codemod_fixture/cpu_spellings.h>

using at::cpu::mul;

at::Tensor spelled(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  at::Tensor member = a.mul(b);  // a method: not a reference
  fast::mul_out(out, a, b);
  return CPU_OP(mul)(a, b) + mul(member, b);
}
"""


def add_spelled_callers(tree: Path) -> None:
    for rel, text in ((SPELLED_HEADER, SPELLED_HEADER_TEXT), (SPELLED_CALLER, SPELLED_CALLER_TEXT)):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)


def test_callers_by_any_spelling_are_rewritten_or_listed_for_the_compile_check(tree: Path) -> None:
    add_spelled_callers(tree)
    document, diff = dry_run_json(tree, "mul")
    assert "-  return fast::mul(a, a);\n+  return at::mul(a, a);" in diff
    assert "-using at::cpu::mul;\n+using at::mul;" in diff  # the unqualified mul() below now reaches at::mul
    assert "-  fast::mul_out(out, a, b);\n+  at::mul_out(out, a, b);" in diff
    macro_line = SPELLED_CALLER_TEXT.splitlines().index("  return CPU_OP(mul)(a, b) + mul(member, b);") + 1
    listed = [x for x in document["ops"][0]["unrewritten"] if x["path"] == SPELLED_CALLER]
    assert [(x["line"], x["needs_edit"]) for x in listed] == [(macro_line, True)]
    assert listed[0]["why"].startswith("at::cpu::mul once CPU_OP is expanded;")
    human = run_codemod("bypass", "mul", "--tree", str(tree), "--dry-run")
    assert "every reference to the removed" not in human.stderr
    assert f"may reach them by a spelling the tool does not rewrite (g++ judges each file after the bypass):\n  {SPELLED_CALLER}:{macro_line}:" in human.stderr


# A native source of ours in PyTorch's shape (its TensorConversions.cpp calls _convert_indices_from_coo_to_csr so):
# where at::native's names are seen (inside the namespace, under a using-directive or a using-declaration of it), an
# unqualified mul() reaches at::mul until the bypass declares at::native::mul beside it.
UNQUALIFIED = "aten/src/ATen/native/CodemodUnqualified.cpp"
UNQUALIFIED_TEXT = """#include <ATen/ATen.h>
#include <ATen/NativeFunctions.h>

namespace at::native {
namespace {

Tensor squared(const Tensor& a) {
  return mul(a, a);
}

} // namespace

Tensor codemod_fixture_cubed(const Tensor& a) {
  return squared(a).mul(a);
}

} // namespace at::native

namespace codemod_fixture {

at::Tensor squared(const at::Tensor& a) {
  return mul(a, a);  // found by argument-dependent lookup alone: at::mul, after the bypass too
}

} // namespace codemod_fixture

namespace codemod_fixture_directive {

using namespace at::native;

at::Tensor squared(const at::Tensor& a) {
  return mul(a, a);
}

} // namespace codemod_fixture_directive

at::Tensor codemod_fixture_declared(const at::Tensor& a) {
  using at::native::mul;
  return mul(a, a);
}

at::Tensor codemod_fixture_declared_among_others(const at::Tensor& a) {
  using at::native::sub, at::native::mul;  // C++17: several in one
  return mul(a, a);
}
"""
# The four calls that see at::native's names, as the bypass qualifies them.
UNQUALIFIED_BYPASSED = (
    UNQUALIFIED_TEXT.replace("Tensor& a) {\n  return mul(", "Tensor& a) {\n  return at::mul(", 1)
    .replace("using namespace at::native;\n\nat::Tensor squared(const at::Tensor& a) {\n  return mul(",
             "using namespace at::native;\n\nat::Tensor squared(const at::Tensor& a) {\n  return at::mul(")
    .replace("using at::native::mul;\n  return mul(", "using at::native::mul;\n  return at::mul(")
    .replace("several in one\n  return mul(", "several in one\n  return at::mul(")
)


def test_an_unqualified_call_that_sees_at_native_becomes_at_qualified_and_compiles(tree: Path) -> None:
    """Found by the sweep of PyTorch's own TensorConversions.cpp: g++ found the call ambiguous after the bypass (inside
    at::native; a using-directive or using-declaration of it, one name or several, is the same lookup: the next test
    shows g++'s verdict on one left as it was)."""
    (tree / UNQUALIFIED).write_text(UNQUALIFIED_TEXT)
    run = run_codemod("bypass", "mul", "--tree", str(tree), "--no-build", "--json")
    assert run.returncode == 0, run.stderr
    assert UNQUALIFIED_BYPASSED.count("at::mul(a, a)") == 4
    assert (tree / UNQUALIFIED).read_text() == UNQUALIFIED_BYPASSED
    (compiled,) = [line for line in json.loads(run.stdout)["verified"] if " compiles " in line]
    assert UNQUALIFIED in compiled


def test_a_call_left_unqualified_under_a_using_directive_is_ambiguous_to_gxx(tree: Path) -> None:
    """The rewrite above undone for the call under `using namespace at::native;`: after the bypass g++ finds it
    ambiguous (at::native::mul through the directive, at::mul through its arguments) and says so at its line."""
    (tree / UNQUALIFIED).write_text(UNQUALIFIED_TEXT)
    located = locate(tree)
    plan = make_plan(located, "mul")
    directive = "using namespace at::native;\n\nat::Tensor squared(const at::Tensor& a) {\n  return "
    left = UNQUALIFIED_BYPASSED.replace(f"{directive}at::mul(", f"{directive}mul(")
    line = left[: left.index(directive) + len(directive)].count("\n") + 1
    plan = replaced(plan, UNQUALIFIED, UNQUALIFIED_BYPASSED.encode(), left.encode())
    journal.apply(located, [plan])
    with pytest.raises(VerificationFailed) as failed:
        overlay_compile.check(located, [plan])
    message = str(failed.value)
    assert f"{UNQUALIFIED}:{line}:" in message and "ambiguous" in message, message
