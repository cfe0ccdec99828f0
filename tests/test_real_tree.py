"""Issue "works on PyTorch itself": bypass on the full real tree built from the torch wheel.

The expensive work is done once per session by conftest's `bypassed_full_tree` (tests/full_tree.py): build the tree,
bypass `mul`, `div`, `add` (a ufunc) and five binary math ops through the real CLI, one at a time (then the ops
test_macro_kernels.py checks), regenerate ATen with per-operator headers next to the autograd codegen, and compile
the rewritten sources against the regenerated headers. The tests assert on what was recorded; the revert runs on a
copy of the tree as it was before the macro ops.
"""
from __future__ import annotations

import difflib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_codemod
from tests.full_tree import DERIVATIVES, GEN_VARIABLE_TYPE, MATH_ENTRIES, NATIVE, REAL_TREE_OPS, UFUNC_SOURCES, BypassedFullTree

MUL_ENTRIES = ("mul.Tensor", "mul_.Tensor", "mul.out")
ADD_ENTRIES = ("add.Tensor", "add_.Tensor", "add.out")
DIV_ENTRIES = ("div.Tensor", "div_.Tensor", "div.out", "div.Tensor_mode", "div_.Tensor_mode", "div.out_mode")


@pytest.fixture
def real(bypassed_full_tree: BypassedFullTree) -> BypassedFullTree:
    return bypassed_full_tree


def _entries(text: str, marker: str) -> dict[str, range]:
    """Line spans of yaml list entries starting `- MARKER: NAME(`, each up to the next entry."""
    lines = text.splitlines()
    starts = [(i, m.group(1)) for i, line in enumerate(lines) if (m := re.match(rf"- {marker}: ([\w.]+)\(", line))]
    ends = [i for i, _ in starts[1:]] + [len(lines)]
    return {name: range(start, end) for (start, name), end in zip(starts, ends)}


def _changed_lines(before: str, after: str) -> tuple[set[int], list[str], list[str]]:
    """Lines of BEFORE replaced/deleted (or next to an insertion), and the removed/added lines."""
    a, b = before.splitlines(), after.splitlines()
    touched, removed, added = set(), [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            # an insertion touches the line it lands before; blank lines align either way
            touched.update(i for i in range(i1, max(i2, i1 + 1)) if i < len(a) and a[i].strip())
            removed += a[i1:i2]
            added += b[j1:j2]
    return touched, removed, added


def _assert_only_deleted_within(before: str, after: str, *spans: range) -> None:
    """AFTER is BEFORE minus lines of SPANS. difflib may align a deleted block one line off
    when the block ends with the same blank line that precedes it, so a blank neighbour counts."""
    lines = before.splitlines()
    allowed = {i for span in spans for i in span}
    allowed |= {i for span in spans for i in (span.start - 1, span.stop) if 0 <= i < len(lines) and not lines[i].strip()}
    touched, removed, added = _changed_lines(before, after)
    assert touched and touched <= allowed, sorted(touched - allowed)[:10]
    assert not added, added
    assert len(removed) <= sum(len(span) for span in spans)


def _assert_made_manual(before: str, after: str, names: tuple[str, ...]) -> None:
    """Only the lines of the entries NAMES changed, each of them did and is now manual, not structured."""
    spans = _entries(before, "func")
    owned = {i for name in names for i in spans[name]}
    touched, _, _ = _changed_lines(before, after)
    assert touched and touched <= owned, sorted(touched - owned)[:10]
    after_spans = _entries(after, "func")
    after_lines = after.splitlines()
    for name in names:
        assert touched & set(spans[name]), f"{name} unchanged"
        entry = "\n".join(after_lines[i] for i in after_spans[name])
        assert "manual_cpp_binding: True" in entry, entry
        assert not re.search(r"^\s+(structured|structured_delegate|structured_inherits|dispatch):", entry, re.M), entry


def _stderr(run: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((run.stderr or run.stdout).strip().splitlines()[-25:])


def test_bypass_add_on_top_of_mul_and_div_touches_only_the_add_entries(real: BypassedFullTree) -> None:
    run = real.runs["bypass add"]
    assert run.returncode == 0, run.stderr
    after = real.after["add"]
    spans = _entries(real.after["div"][NATIVE], "func")
    touched, _, _ = _changed_lines(real.after["div"][NATIVE], after[NATIVE])
    assert touched <= {i for name in ADD_ENTRIES for i in spans[name]}
    for name in ADD_ENTRIES:
        assert touched & set(spans[name]), f"{name} unchanged"
    assert "ufunc_inner_loop" not in "\n".join(after[NATIVE].splitlines()[spans["add.out"].start : spans["add.out"].stop + 3])
    formulas = _entries(real.after["div"][DERIVATIVES], "name")
    _assert_only_deleted_within(real.after["div"][DERIVATIVES], after[DERIVATIVES], formulas["add.Tensor"])
    for rel in UFUNC_SOURCES:
        assert (real.dest / rel).read_text().startswith("// @codemod-bypass add: written by hand from torchgen's")


def test_bypass_mul_exits_0_and_touches_only_the_mul_entries(real: BypassedFullTree) -> None:
    run = real.runs["bypass mul"]
    assert run.returncode == 0, run.stderr
    before, after = real.before, real.after["mul"]
    _assert_made_manual(before[NATIVE], after[NATIVE], MUL_ENTRIES)

    formulas = _entries(before[DERIVATIVES], "name")
    _assert_only_deleted_within(before[DERIVATIVES], after[DERIVATIVES], formulas["mul.Tensor"])
    assert "mul.Tensor" not in _entries(after[DERIVATIVES], "name")

    _, removed, added = _changed_lines(before[GEN_VARIABLE_TYPE], after[GEN_VARIABLE_TYPE])
    assert added and not removed, removed
    assert any("_foreach_mul" in line for line in added), added


@pytest.mark.parametrize("op", MATH_ENTRIES)
def test_bypass_math_op_touches_only_its_own_entries_and_formula(real: BypassedFullTree, op: str) -> None:
    run = real.runs[f"bypass {op}"]
    assert run.returncode == 0, run.stderr
    entries = MATH_ENTRIES[op]
    reported = re.search(rf"^bypass {op} \((.*)\) changed", run.stderr, re.M)
    assert reported and set(reported.group(1).split(", ")) == set(entries), run.stderr[:300]
    before, after = real.before_bypass(op), real.after[op]
    _assert_made_manual(before[NATIVE], after[NATIVE], entries)
    formulas = _entries(before[DERIVATIVES], "name")
    _assert_only_deleted_within(before[DERIVATIVES], after[DERIVATIVES], formulas[entries[0]])
    assert entries[0] not in _entries(after[DERIVATIVES], "name")


@pytest.mark.parametrize("op", MATH_ENTRIES)
def test_foreach_exemptions_are_the_ones_reported(real: BypassedFullTree, op: str) -> None:
    """_foreach_maximum.List and its in-place form reuse maximum's formula; no foreach op reuses the others'."""
    run = real.runs[f"bypass {op}"]
    assert run.returncode == 0, run.stderr
    _, removed, added = _changed_lines(real.before_bypass(op)[GEN_VARIABLE_TYPE], real.after[op][GEN_VARIABLE_TYPE])
    exempted = set(re.findall(r'^\s+\("(\w+)", "(\w*)"\),$', "\n".join(added), re.M))
    assert exempted == ({("_foreach_maximum", "List")} if op == "maximum" else set())
    # the summary names the foreach ops that lose autograd and counts the lines of the edit
    lost = re.search(r"^\s+- autograd of (.*), which reused that formula$", run.stderr, re.M)
    named = {tuple(name.split(".")) for name in lost.group(1).split(", ")} if lost else set()
    assert {(base.rstrip("_"), overload) for base, overload in named} == exempted, run.stderr
    counted = re.search(rf"^\s+{re.escape(GEN_VARIABLE_TYPE)}\s+\+(\d+) -(\d+)$", run.stderr, re.M)
    if exempted:
        assert counted and (int(counted[1]), int(counted[2])) == (len(added), len(removed)), run.stderr
    else:
        assert counted is None and not added and not removed


def test_bypass_div_on_top_of_mul_touches_only_the_div_entries(real: BypassedFullTree) -> None:
    run = real.runs["bypass div"]
    assert run.returncode == 0, run.stderr
    after = real.after["div"]
    spans = _entries(real.after["mul"][NATIVE], "func")
    touched, _, _ = _changed_lines(real.after["mul"][NATIVE], after[NATIVE])
    assert touched <= {i for name in DIV_ENTRIES for i in spans[name]}
    for name in DIV_ENTRIES:
        assert touched & set(spans[name]), f"{name} unchanged"
    formulas = _entries(real.after["mul"][DERIVATIVES], "name")
    _assert_only_deleted_within(real.after["mul"][DERIVATIVES], after[DERIVATIVES], formulas["div.Tensor"], formulas["div.Tensor_mode"])
    _, removed, added = _changed_lines(real.after["mul"][GEN_VARIABLE_TYPE], after[GEN_VARIABLE_TYPE])
    assert added and not removed


def test_the_trees_own_codegen_runs_clean(real: BypassedFullTree) -> None:
    for name in ("torchgen", "autograd"):
        assert name in real.runs, "the bypass failed; codegen not run"
        assert real.runs[name].returncode == 0, _stderr(real.runs[name])
    # torchgen still generates the dispatcher entries, renamed; the public names are hand-written.
    per_op = (real.out / "ops/mul.h").read_text()
    assert "__dispatch_mul(const at::Tensor & self, const at::Tensor & other)" in per_op
    assert "at::Tensor mul(const at::Tensor & self, const at::Tensor & other)" not in per_op
    assert "__dispatch_div(const at::Tensor & self, const at::Tensor & other)" in (real.out / "ops/div.h").read_text()
    body = (real.out / "core/TensorBody.h").read_text()
    assert "__dispatch_mul_(const at::Tensor & other)" in body
    assert re.search(r"at::Tensor mul\(const at::Tensor& other\) const;", body)  # ours, laid out by clang-format
    # the structured scaffolding is no longer generated: no meta struct, no at::cpu::mul
    assert not (real.out / "ops/mul_meta.h").exists() and not (real.out / "ops/mul_cpu_dispatch.h").exists()
    assert "structured_mul_Tensor" not in (real.out / "NativeMetaFunctions.h").read_text()
    assert not list(real.out.glob("Ufunc*_add.*"))  # the tree now holds add's CPU kernel itself


@pytest.mark.parametrize("op", MATH_ENTRIES)
def test_math_op_dispatcher_entries_renamed_and_scaffolding_gone(real: BypassedFullTree, op: str) -> None:
    assert real.runs.get("torchgen") and real.runs["torchgen"].returncode == 0, "the bypass or the codegen failed"
    per_op = (real.out / f"ops/{op}.h").read_text()
    assert f"__dispatch_{op}(const at::Tensor & self, const at::Tensor & other)" in per_op
    assert f"at::Tensor {op}(const at::Tensor & self, const at::Tensor & other)" not in per_op
    assert not (real.out / f"ops/{op}_meta.h").exists() and not (real.out / f"ops/{op}_cpu_dispatch.h").exists()
    if op == "copysign":  # the Scalar overload keeps its generated API
        assert "at::Tensor copysign(const at::Tensor & self, const at::Scalar & other)" in per_op


@pytest.mark.parametrize("unit", [
    "BinaryOps.cpp", "ops.cpp", "VariableTypeManual.cpp",
    "calls.cpp", "Functions.cpp", "TensorMethods.cpp", "UfuncCPU_add.cpp", "UfuncCPUKernel_add.cpp",
])
def test_regenerated_headers_compile(real: BypassedFullTree, unit: str) -> None:
    assert unit in real.compiles, "the bypass or the codegen failed; nothing compiled"
    result = real.compiles[unit]
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 0, "\n".join(errors[:15]) or result.stderr[-3000:]


def test_revert_restores_every_byte(real: BypassedFullTree, tmp_path: Path) -> None:
    copy = shutil.copytree(real.real_tree_ops_only, tmp_path / "tree", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for op in reversed(REAL_TREE_OPS):
        if real.runs[f"bypass {op}"].returncode == 0:
            run = run_codemod("revert", op, "--tree", str(copy))
            assert run.returncode == 0, run.stderr
    diff = subprocess.run(["diff", "-r", "-x", "__pycache__", str(real.pristine), str(copy)], capture_output=True, text=True)
    assert diff.returncode == 0, diff.stdout[-3000:]
