"""The full tree one session bypasses, regenerates and compiles once (conftest's `bypassed_full_tree`).

A tree built from the installed wheel around target_tree/'s sources; through the real CLI, one at a time
(`--no-verify`: the tree's own codegen runs here, once for all ops; the harness built and checked for a sample of
them), the ops test_real_tree.py checks (mul, div, add with its ufunc kernel, five binary math ops), then those
test_macro_kernels.py checks (kernels defined through a file's own macros); then ATen regenerated with per-operator
headers next to the autograd codegen, and the rewritten sources compiled against the regenerated headers (in
parallel). Both modules assert on what is recorded here; a copy of the tree taken between the two sets of ops is what
test_real_tree.py reverts.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codemod.capture.fromtorch import write_tree_from_torch
from codemod.model.tree import NATIVE_SOURCES
from tests import sampling
from tests.conftest import run_codemod  # imported by conftest's fixture, once conftest is loaded

NATIVE = "aten/src/ATen/native/native_functions.yaml"
TAGS = "aten/src/ATen/native/tags.yaml"
DERIVATIVES = "tools/autograd/derivatives.yaml"
GEN_VARIABLE_TYPE = "tools/autograd/gen_variable_type.py"
BINARY_OPS = "aten/src/ATen/native/BinaryOps.cpp"
CALLERS = ("torch/csrc/jit/runtime/static/ops.cpp", "torch/csrc/autograd/VariableTypeManual.cpp")
UFUNC_SOURCES = ("aten/src/ATen/native/UfuncCPU_add.cpp", "aten/src/ATen/native/cpu/UfuncCPUKernel_add.cpp")
# Each math op's structured group, functional entry first (its formula is the one removed).
# maximum and fmax have no in-place entry; copysign's Scalar overloads are not structured.
MATH_ENTRIES = {
    "atan2": ("atan2", "atan2_", "atan2.out"),
    "hypot": ("hypot", "hypot_", "hypot.out"),
    "maximum": ("maximum", "maximum.out"),
    "fmax": ("fmax", "fmax.out"),
    "copysign": ("copysign.Tensor", "copysign_.Tensor", "copysign.out"),
}
REAL_TREE_OPS = ("mul", "div", "add", *MATH_ENTRIES)
# target_tree/'s ops whose kernels a file's own macros define, and the source files that define them.
MACRO_OPS = {
    "sin": ("UnaryOps.cpp",), "cos": ("UnaryOps.cpp",), "exp": ("UnaryOps.cpp",), "neg": ("UnaryOps.cpp",),
    "eq": ("Comparison.cpp",), "lt": ("Comparison.cpp",),
    "lerp": ("Lerp.cpp",),
    "nextafter": ("FloatingPointMeta.cpp", "NextAfter.cpp"),
    "addmv": ("Blas.cpp",),
}
BYPASSED = (*REAL_TREE_OPS, *MACRO_OPS)

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
  at::Tensor m = at::maximum(at::atan2(a, b), a.hypot(b));
  at::atan2_out(o, m, b);
  m.atan2_(u).hypot_(d);
  at::hypot_outf(a, m, o);
  at::maximum_out(o, m, a.fmax(b));
  at::fmax_outf(m, t, o);
  at::Tensor c = m.copysign(b);
  c.copysign_(u);
  at::copysign_out(o, c, a);
  // copysign's Scalar overloads are still generated and dispatched, beside the hand-written ones
  c = at::copysign(c, -1.5).copysign(2);
  // The dispatcher entries are still generated, under their renamed names: this proves
  // the regenerated headers (not the wheel's) are the ones compiled against.
  at::Tensor (*dispatched)(const at::Tensor&, const at::Tensor&) = &at::__dispatch_mul;
  return dispatched(t.div(u), d).add(c);
}
"""
# The sources the macro ops' bypasses edit, compiled as the lab builds (no per-operator headers): a sample of them
# each session (about 15 s of g++ each; every one under --sample-all, as benchmarks/exhaustive.py runs it).
MACRO_UNITS = tuple(sorted({name for names in MACRO_OPS.values() for name in names}))
COMPILED_MACRO_UNITS = tuple(sampling.draw(MACRO_UNITS, 3))


@dataclass
class BypassedFullTree:
    dest: Path  # the bypassed tree: read it, never write it (copy it first)
    pristine: Path  # the same tree before any bypass
    real_tree_ops_only: Path  # the same tree once REAL_TREE_OPS were bypassed, before MACRO_OPS: test_real_tree.py reverts them
    include: Path  # clean-build include dir: regenerated ATen over the wheel's hand-written headers
    out: Path  # = include/ATen, torchgen's output
    before: dict[str, str]  # files as they were before any bypass
    after: dict[str, dict[str, str]] = field(default_factory=dict)  # op -> the same files right after its bypass
    runs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    compiles: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def before_bypass(self, op: str) -> dict[str, str]:
        """The files as the bypass of OP found them (after the ops bypassed before it)."""
        index = BYPASSED.index(op)
        return self.after[BYPASSED[index - 1]] if index else self.before


def _torch_include() -> Path:
    import torch

    return Path(torch.__file__).parent / "include"


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


def build(base: Path, native_sources: Path) -> BypassedFullTree:
    """Under BASE: the tree around NATIVE_SOURCES, each of BYPASSED bypassed, ATen regenerated, the units compiled.
    Stops at the first step that fails, with what it recorded: the tests report the tools' own words."""
    dest, pristine, include = base / "tree", base / "pristine", base / "include"
    write_tree_from_torch(dest, native_sources)
    shutil.copytree(dest, pristine, symlinks=True)
    files = (NATIVE, DERIVATIVES, GEN_VARIABLE_TYPE)
    state = BypassedFullTree(dest, pristine, base / "real-tree-ops-only", include, include / "ATen", _read(dest, *files))

    # The harness build and its checks on this tree's captures, for a sample of the ops (what they test on target_tree,
    # test_bypass.py and test_build.py build and check for each): the compile of the edited sources below is the point.
    built = set(sampling.draw(BYPASSED, 2))

    def bypass(op: str) -> None:
        flags = () if op in built else ("--no-build",)
        state.runs[f"bypass {op}"] = run_codemod("bypass", op, "--tree", str(dest), "--no-verify", *flags)
        state.after[op] = _read(dest, *files)

    for op in REAL_TREE_OPS:
        bypass(op)
    shutil.copytree(dest, state.real_tree_ops_only, symlinks=True)
    for op in MACRO_OPS:
        bypass(op)
    if any(state.runs[f"bypass {op}"].returncode != 0 for op in BYPASSED):
        return state

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
        **{name: (dest / NATIVE_SOURCES / name,) for name in COMPILED_MACRO_UNITS},
    }
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {name: pool.submit(_compile, include, *job) for name, job in jobs.items()}
        state.compiles = {name: future.result() for name, future in futures.items()}
    return state
