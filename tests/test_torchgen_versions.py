"""Capture and verification on every torchgen from 2.13 on.

The installed torchgen (2.13.0), and the newer releases' (tests/torchgen_releases.py: each downloaded once, its
torchgen kept in the wheel cache; skipped, saying why, where the download fails). A tree whose torchgen is not the
installed torch's is verified by its own codegen on its own inputs, and its edited files are named as not compiled,
with why: the installed torch's headers were generated for another codegen.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codemod.capture import codegen
from codemod.capture.capture import capture
from codemod.model import native_yaml
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, TEMPLATES, locate
from codemod.plan.plan import op_entries
from codemod.verify import compile_check

from .conftest import TARGET_TREE, run_codemod, snapshot
from .torchgen_releases import RELEASES, Unavailable, torchgen_of

FOREIGN = "the tree's torchgen is not the installed torch"


@pytest.fixture(scope="module", params=[None, *RELEASES], ids=lambda v: v or "installed")
def release(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str | None, Path]:
    """A release (None: the installed torch), and a tree `tree from-torch` wrote from its torchgen."""
    try:
        torchgen = ["--torchgen", str(torchgen_of(request.param))] if request.param else []
    except Unavailable as why:
        pytest.skip(str(why))
    tree = tmp_path_factory.mktemp("release") / "pristine"
    made = run_codemod("tree", "from-torch", str(tree), "--sources", str(TARGET_TREE), *torchgen)
    assert made.returncode == 0, made.stderr
    return request.param, tree


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


def test_bypass_verifies_and_reverts_on_the_trees_own_torchgen(release: tuple[str | None, Path], tmp_path: Path) -> None:
    """The repro class: a newer torchgen's tree (2.15's templates include NativeAotStubs.h, its yaml lacks some of
    the installed torch's operators) once had its headers made by its torchgen on the installed torch's templates,
    which failed after writing. Every codegen run is the tree's own on its own inputs; the compile, which would stand on
    the installed torch's headers, is not made, and each edited file is named with why."""
    version, pristine = release
    work = tmp_path / "work"
    shutil.copytree(pristine, work)
    # the installed torchgen's tree compiles as test_compile_check.py's trees do (`tree from-torch` writes them too):
    # here, only that it is not taken for another codegen's
    not_compiled_here = ["--no-compile"] if version is None else []
    bypass = run_codemod("bypass", "div", "--tree", str(work), "--no-build", "--json", *not_compiled_here)
    assert bypass.returncode == 0, bypass.stderr
    assert "Traceback" not in bypass.stderr
    report = json.loads(bypass.stdout)
    assert any("torchgen (ATen codegen) ran clean" in line for line in report["verified"])
    assert any("at::__dispatch_div" in line for line in report["verified"])
    foreign = [line for line in report["unchecked"] if FOREIGN in line]
    compiled = [line for line in report["verified"] if line.startswith("g++")]
    if version is None:
        assert not compiled and compile_check.foreign_torchgen(locate(work)) is None, report
    else:
        assert not compiled and len(foreign) == 1 and "aten/src/ATen/native/BinaryOps.cpp" in foreign[0], report
    assert snapshot(work) != snapshot(pristine)
    revert = run_codemod("revert", "div", "--tree", str(work))
    assert revert.returncode == 0, revert.stderr
    assert snapshot(work) == snapshot(pristine)


@pytest.mark.parametrize("mix", ["a template its torchgen reads", "its autograd codegen"])
def test_a_tree_mixing_codegen_of_two_releases_is_refused_before_writing(mix: str, tmp_path: Path) -> None:
    """Each codegen input is the tree's own, checked before the first write: what is missing is named, exit 2."""
    try:
        torchgen = torchgen_of(RELEASES[-1])
    except Unavailable as why:
        pytest.skip(str(why))
    tree = tmp_path / "tree"
    assert run_codemod("tree", "from-torch", str(tree), "--sources", str(TARGET_TREE), "--torchgen", str(torchgen)).returncode == 0
    missing = tree / (f"{TEMPLATES}/NativeAotStubs.h" if mix.startswith("a template") else "tools/autograd/gen_autograd.py")
    missing.unlink()
    before = snapshot(tree)
    bypass = run_codemod("bypass", "mul", "--tree", str(tree), "--no-build")
    assert bypass.returncode == 2, bypass.stderr
    assert f"codemod: {missing}: " in bypass.stderr and "Traceback" not in bypass.stderr
    assert snapshot(tree) == before


def test_tree_from_torch_refuses_what_is_not_a_torch_wheel(tmp_path: Path) -> None:
    not_a_wheel = tmp_path / "torch-9.9.9-py3-none-any.whl"
    not_a_wheel.write_text("not a zip")
    run = run_codemod("tree", "from-torch", str(tmp_path / "tree"), "--torchgen", str(not_a_wheel))
    assert run.returncode == 2
    assert f"{not_a_wheel}: not a wheel" in run.stderr
