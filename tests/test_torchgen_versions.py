"""Capture and verification on every torchgen from 2.13 on.

The installed torchgen (2.13.0) always; each newer release whose wheel is in the wheel
cache ($CODEMOD_WHEEL_CACHE, see `codemod.capture.fromtorch.wheel_cache`) too. Wheels are
hundreds of MB, so nothing here downloads one: the newer releases are skipped, saying how
to fetch them, when none is cached.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from torch.torch_version import TorchVersion

from codemod.capture import codegen
from codemod.capture.capture import capture
from codemod.capture.fromtorch import torch_wheels, wheel_cache
from codemod.model import native_yaml
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, locate
from codemod.plan.plan import op_entries

from .conftest import TARGET_TREE, run_codemod, snapshot

NEWER_WHEELS = {v: w for v, w in torch_wheels(wheel_cache()).items() if TorchVersion(v) > torch.__version__}
_NONE_CACHED = pytest.mark.skip(
    reason=f"no torch wheel newer than {torch.__version__} in {wheel_cache()}: fetch one with "
    f"`pip download --no-deps --no-cache-dir -d {wheel_cache()} torch==2.15.0` (or set CODEMOD_WHEEL_CACHE)"
)
RELEASES = [pytest.param(None, id=f"installed-{torch.__version__}")] + (
    [pytest.param(wheel, id=version) for version, wheel in NEWER_WHEELS.items()]
    or [pytest.param(None, id="newer", marks=_NONE_CACHED)]
)


def test_entries_a_cross_entry_check_names_join_the_run(tree: Path, tmp_path: Path) -> None:
    """The installed torchgen's own cross-entry check: a structured delegate needs its out entry."""
    located = locate(tree)
    doc = native_yaml.load(NATIVE_FUNCTIONS, located.path(NATIVE_FUNCTIONS).read_text())
    delegate = doc.entry_text(doc.by_name()["mul.Tensor"])
    with pytest.raises(VerificationFailed, match="mul.out is missing"):
        codegen.aten_on_yaml(located, delegate, tmp_path / "alone")
    codegen.aten_on_entries(located, delegate, tmp_path / "out")
    assert "structured_mul_out" in (tmp_path / "out" / "NativeFunctions.h").read_text()


@pytest.mark.parametrize("op", ["mul", "add"])  # add's CPU kernel is written by the ufunc codegen
def test_capture_takes_only_the_ops_code_from_a_yaml_holding_other_ops(tree: Path, op: str) -> None:
    """A newer torchgen needs other entries beside the op's; what capture takes must not change."""
    located = locate(tree)
    entries = op_entries(located, op)
    before, after = entries.capture_inputs()
    doc = native_yaml.load(NATIVE_FUNCTIONS, located.path(NATIVE_FUNCTIONS).read_text())
    others = "\n".join(doc.entry_text(e) for e in doc.entries if native_yaml.op_name(e.base) != op)
    # other structured ops' code is generated beside the op's (for mul, a ufunc op's too: add's)
    assert "structured: True" in others and ("ufunc_inner_loop" in others) == (op == "mul")
    alone = capture(located, op, before, after, entries.overloads)
    among_others = capture(located, op, f"{before}\n{others}", f"{after}\n{others}", entries.overloads)
    assert among_others == alone
    assert alone.cpu_scaffolding and alone.meta_structs and alone.native_structs and alone.cpu_functions
    assert bool(alone.ufunc_sources) == (op == "add")


@pytest.mark.parametrize("wheel", RELEASES)
def test_bypass_verifies_and_reverts_on_the_trees_own_torchgen(tmp_path: Path, wheel: Path | None) -> None:
    pristine = tmp_path / "pristine"
    made = run_codemod("tree", "from-torch", str(pristine), "--sources", str(TARGET_TREE), *(["--torchgen", str(wheel)] if wheel else []))
    assert made.returncode == 0, made.stderr
    work = tmp_path / "work"
    shutil.copytree(pristine, work)
    bypass = run_codemod("bypass", "div", "--tree", str(work), "--no-build", "--json")
    assert bypass.returncode == 0, bypass.stderr
    verified = json.loads(bypass.stdout)["verified"]
    assert any("torchgen (ATen codegen) ran clean" in line for line in verified)
    assert any("at::__dispatch_div" in line for line in verified)
    assert snapshot(work) != snapshot(pristine)
    revert = run_codemod("revert", "div", "--tree", str(work))
    assert revert.returncode == 0, revert.stderr
    assert snapshot(work) == snapshot(pristine)


def test_tree_from_torch_refuses_what_is_not_a_torch_wheel(tmp_path: Path) -> None:
    not_a_wheel = tmp_path / "torch-9.9.9-py3-none-any.whl"
    not_a_wheel.write_text("not a zip")
    run = run_codemod("tree", "from-torch", str(tmp_path / "tree"), "--torchgen", str(not_a_wheel))
    assert run.returncode == 2
    assert f"{not_a_wheel}: not a wheel" in run.stderr
