"""Issue "works on PyTorch itself": bypass on the full real tree built from the torch wheel.

One module-scoped fixture does the expensive work once: build the tree, bypass `mul`,
`div` and `add` (a ufunc) through the real CLI (`--no-verify`: the fixture runs the tree's own codegen
itself, once for both ops), regenerate ATen with per-operator headers next to the autograd
codegen, and compile the rewritten sources against the regenerated headers (in parallel).
The tests then assert on what was recorded; reverts and the byte comparison come last.
"""
from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from codemod.fromtorch import write_tree_from_torch
from tests.conftest import TARGET_TREE, run_codemod

NATIVE = "aten/src/ATen/native/native_functions.yaml"
TAGS = "aten/src/ATen/native/tags.yaml"
DERIVATIVES = "tools/autograd/derivatives.yaml"
GEN_VARIABLE_TYPE = "tools/autograd/gen_variable_type.py"
BINARY_OPS = "aten/src/ATen/native/BinaryOps.cpp"
CALLERS = ("torch/csrc/jit/runtime/static/ops.cpp", "torch/csrc/autograd/VariableTypeManual.cpp")
MUL_ENTRIES = ("mul.Tensor", "mul_.Tensor", "mul.out")
ADD_ENTRIES = ("add.Tensor", "add_.Tensor", "add.out")
UFUNC_SOURCES = ("aten/src/ATen/native/UfuncCPU_add.cpp", "aten/src/ATen/native/cpu/UfuncCPUKernel_add.cpp")
BYPASSED = ("mul", "div", "add")
DIV_ENTRIES = ("div.Tensor", "div_.Tensor", "div.out", "div.Tensor_mode", "div_.Tensor_mode", "div.out_mode")

CALLS_CPP = """\
#include <ATen/ATen.h>

at::Tensor use_bypassed_api(const at::Tensor& a, const at::Tensor& b, at::Tensor& o) {
  at::Tensor t = at::mul(a, b);
  at::mul_out(o, a, b);
  at::Tensor u = t.mul(b);
  t.mul_(u);
  at::Tensor d = at::div(a, b);
  at::div_out(o, a, b, "floor");
  d.div_(u, "trunc");
  at::add_out(o, at::add(a, b, 2), t);
  d.add_(t, 0.5);
  // The dispatcher entries are still generated, under their renamed names: this proves
  // the regenerated headers (not the wheel's) are the ones compiled against.
  at::Tensor (*dispatched)(const at::Tensor&, const at::Tensor&) = &at::__dispatch_mul;
  return dispatched(t.div(u), d);
}
"""


def _torch_include() -> Path:
    import torch

    return Path(torch.__file__).parent / "include"


@dataclass
class RealTree:
    dest: Path
    pristine: Path
    include: Path  # clean-build include dir: regenerated ATen over the wheel's hand-written headers
    out: Path  # = include/ATen, torchgen's output
    before: dict[str, str]  # files as they were before any bypass
    after_mul: dict[str, str]  # the same files right after `bypass mul`
    after_div: dict[str, str]  # and right after `bypass div`, which came next
    runs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    compiles: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)


def _read(root: Path, *rels: str) -> dict[str, str]:
    return {rel: (root / rel).read_text() for rel in rels}


def _codegen(dest: Path, out: Path, autograd_out: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """The tree's own ATen codegen (per-operator headers) and autograd codegen, side by side."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(dest), *filter(None, [os.environ.get("PYTHONPATH")])]))
    commands = {
        "torchgen": [sys.executable, "-m", "torchgen.gen", "-s", str(dest / "aten/src/ATen"), "-d", str(out), "--per-operator-headers"],
        "autograd": [sys.executable, "-m", "tools.autograd.gen_autograd", str(dest / NATIVE), str(dest / TAGS),
                     str(autograd_out), str(dest / "tools/autograd")],
    }

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        # torchgen writes the AOTI shims relative to its cwd: keep them out of the tree.
        with tempfile.TemporaryDirectory(prefix="real-tree-cwd-") as cwd:
            return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run, args) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def _clean_include_dir(include: Path, out: Path) -> None:
    """INCLUDE/ATen = OUT; wheel headers torchgen did not generate are linked in beside it.

    A real build regenerates the headers from scratch, so a header the bypass makes torchgen
    stop generating (e.g. ATen/ops/mul_meta.h) must not be found in the wheel either: only
    the wheel's hand-written headers are linked (ATen/ops/ files whose op has no `<op>_ops.h`,
    such as from_blob.h and tensor.h, and every ATen/ file outside ops/ that OUT lacks).
    """
    wheel = _torch_include()
    for item in wheel.iterdir():
        if item.name != "ATen":
            (include / item.name).symlink_to(item)
    _link_missing(wheel / "ATen", out, skip={"ops"})
    bases = {name[: -len("_ops.h")] for name in os.listdir(wheel / "ATen/ops") if name.endswith("_ops.h")}
    for name in os.listdir(wheel / "ATen/ops"):
        stem = name.removesuffix(".h")
        generated = any(stem == base or stem.startswith(base + "_") for base in bases)
        if not generated and not (out / "ops" / name).exists():
            (out / "ops" / name).symlink_to(wheel / "ATen/ops" / name)


def _link_missing(source: Path, target: Path, skip: set[str] = frozenset()) -> None:
    """Link what TARGET lacks from SOURCE, descending into directories both have."""
    for item in source.iterdir():
        if item.name in skip:
            continue
        there = target / item.name
        if not there.exists():
            there.symlink_to(item)
        elif item.is_dir() and there.is_dir() and not there.is_symlink():
            _link_missing(item, there)


def _compile(include: Path, source: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    args = ["g++", "-std=c++20", "-fsyntax-only", *defines, f"-I{include}", f"-I{include}/torch/csrc/api/include", str(source)]
    return subprocess.run(args, capture_output=True, text=True)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RealTree:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    base = tmp_path_factory.mktemp("real")
    dest, pristine, include = base / "tree", base / "pristine", base / "include"
    write_tree_from_torch(dest, TARGET_TREE)
    shutil.copytree(dest, pristine, symlinks=True)
    files = (NATIVE, DERIVATIVES, GEN_VARIABLE_TYPE)
    state = RealTree(dest, pristine, include, include / "ATen", _read(dest, *files), {}, {})

    state.runs["bypass mul"] = run_codemod("bypass", "mul", "--tree", str(dest), "--no-verify")
    state.after_mul = _read(dest, *files)
    state.runs["bypass div"] = run_codemod("bypass", "div", "--tree", str(dest), "--no-verify")
    state.after_div = _read(dest, *files)
    state.runs["bypass add"] = run_codemod("bypass", "add", "--tree", str(dest), "--no-verify")
    if any(state.runs[f"bypass {op}"].returncode != 0 for op in BYPASSED):
        return state  # the tests report the CLI's own words

    include.mkdir()
    state.runs.update(_codegen(dest, state.out, base / "autograd"))
    if state.runs["torchgen"].returncode != 0:
        return state
    _clean_include_dir(include, state.out)
    calls = base / "calls.cpp"
    calls.write_text(CALLS_CPP)
    # Compiled as the lab builds (USE_PER_OPERATOR_HEADERS=0, so no AT_PER_OPERATOR_HEADERS):
    # the hand-written at::mul is declared in Functions.h, which per-operator sources do not include.
    jobs = {
        "BinaryOps.cpp": (dest / BINARY_OPS,),
        **{Path(rel).name: (dest / rel,) for rel in CALLERS},
        "calls.cpp": (calls,),
        "Functions.cpp": (state.out / "Functions.cpp",),
        "TensorMethods.cpp": (state.out / "core/TensorMethods.cpp",),
        # add's ufunc kernel, now sources of the tree; the kernel file is built once per CPU
        # capability and includes the tree's own ATen/native/ufunc/add.h
        **{Path(rel).name: (dest / rel, "-DCPU_CAPABILITY=DEFAULT", "-DCPU_CAPABILITY_DEFAULT", f"-idirafter{dest / 'aten/src'}")
           for rel in UFUNC_SOURCES},
    }
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {name: pool.submit(_compile, include, *job) for name, job in jobs.items()}
        state.compiles = {name: future.result() for name, future in futures.items()}
    return state


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


def _stderr(run: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((run.stderr or run.stdout).strip().splitlines()[-25:])


def test_bypass_add_on_top_of_mul_and_div_touches_only_the_add_entries(real: RealTree) -> None:
    run = real.runs["bypass add"]
    assert run.returncode == 0, run.stderr
    after = _read(real.dest, NATIVE, DERIVATIVES, GEN_VARIABLE_TYPE)
    spans = _entries(real.after_div[NATIVE], "func")
    touched, _, _ = _changed_lines(real.after_div[NATIVE], after[NATIVE])
    assert touched <= {i for name in ADD_ENTRIES for i in spans[name]}
    for name in ADD_ENTRIES:
        assert touched & set(spans[name]), f"{name} unchanged"
    assert "ufunc_inner_loop" not in "\n".join(after[NATIVE].splitlines()[spans["add.out"].start : spans["add.out"].stop + 3])
    formulas = _entries(real.after_div[DERIVATIVES], "name")
    _assert_only_deleted_within(real.after_div[DERIVATIVES], after[DERIVATIVES], formulas["add.Tensor"])
    for rel in UFUNC_SOURCES:
        assert (real.dest / rel).read_text().startswith("// @codemod-bypass add: written by hand from torchgen's")


def test_bypass_mul_exits_0_and_touches_only_the_mul_entries(real: RealTree) -> None:
    run = real.runs["bypass mul"]
    assert run.returncode == 0, run.stderr
    before, after = real.before, real.after_mul

    spans = _entries(before[NATIVE], "func")
    owned = {i for name in MUL_ENTRIES for i in spans[name]}
    touched, _, _ = _changed_lines(before[NATIVE], after[NATIVE])
    assert touched and touched <= owned, sorted(touched - owned)[:10]
    after_spans = _entries(after[NATIVE], "func")
    after_lines = after[NATIVE].splitlines()
    for name in MUL_ENTRIES:
        assert touched & set(spans[name]), f"{name} unchanged"
        entry = "\n".join(after_lines[i] for i in after_spans[name])
        assert "manual_cpp_binding: True" in entry, entry
        assert not re.search(r"^\s+(structured|structured_delegate|structured_inherits|dispatch):", entry, re.M), entry

    formulas = _entries(before[DERIVATIVES], "name")
    _assert_only_deleted_within(before[DERIVATIVES], after[DERIVATIVES], formulas["mul.Tensor"])
    assert "mul.Tensor" not in _entries(after[DERIVATIVES], "name")

    _, removed, added = _changed_lines(before[GEN_VARIABLE_TYPE], after[GEN_VARIABLE_TYPE])
    assert added and not removed, removed
    assert any("_foreach_mul" in line for line in added), added


def test_bypass_div_on_top_of_mul_touches_only_the_div_entries(real: RealTree) -> None:
    run = real.runs["bypass div"]
    assert run.returncode == 0, run.stderr
    after = real.after_div
    spans = _entries(real.after_mul[NATIVE], "func")
    touched, _, _ = _changed_lines(real.after_mul[NATIVE], after[NATIVE])
    assert touched <= {i for name in DIV_ENTRIES for i in spans[name]}
    for name in DIV_ENTRIES:
        assert touched & set(spans[name]), f"{name} unchanged"
    formulas = _entries(real.after_mul[DERIVATIVES], "name")
    _assert_only_deleted_within(real.after_mul[DERIVATIVES], after[DERIVATIVES], formulas["div.Tensor"], formulas["div.Tensor_mode"])
    _, removed, added = _changed_lines(real.after_mul[GEN_VARIABLE_TYPE], after[GEN_VARIABLE_TYPE])
    assert added and not removed


def test_the_trees_own_codegen_runs_clean(real: RealTree) -> None:
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
    assert re.search(r"at::Tensor mul\(const at::Tensor & other\) const;", body)
    # the structured scaffolding is no longer generated: no meta struct, no at::cpu::mul
    assert not (real.out / "ops/mul_meta.h").exists() and not (real.out / "ops/mul_cpu_dispatch.h").exists()
    assert "structured_mul_Tensor" not in (real.out / "NativeMetaFunctions.h").read_text()
    assert not list(real.out.glob("Ufunc*_add.*"))  # the tree now holds add's CPU kernel itself


@pytest.mark.parametrize("unit", [
    "BinaryOps.cpp", "ops.cpp", "VariableTypeManual.cpp",
    "calls.cpp", "Functions.cpp", "TensorMethods.cpp", "UfuncCPU_add.cpp", "UfuncCPUKernel_add.cpp",
])
def test_regenerated_headers_compile(real: RealTree, unit: str) -> None:
    assert unit in real.compiles, "the bypass or the codegen failed; nothing compiled"
    result = real.compiles[unit]
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 0, "\n".join(errors[:15]) or result.stderr[-3000:]


def test_revert_restores_every_byte(real: RealTree) -> None:
    for op in reversed(BYPASSED):
        if real.runs[f"bypass {op}"].returncode == 0:
            run = run_codemod("revert", op, "--tree", str(real.dest))
            assert run.returncode == 0, run.stderr
    diff = subprocess.run(["diff", "-r", "-x", "__pycache__", str(real.pristine), str(real.dest)], capture_output=True, text=True)
    assert diff.returncode == 0, diff.stdout[-3000:]
