"""A tree patched with `bypass --dry-run`'s patch through `git apply` (issue 13, item 6): markers, no journal.

Real git apply, real planner: `status` names the op, `revert OP` says how, `revert OP --patch` checks the
patch by planning OP again on the reverse-applied tree and restores every byte.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_codemod, snapshot


def patched(tree: Path, tmp_path: Path, *mode: str) -> Path:
    dry = run_codemod("bypass", "mul", "--tree", str(tree), "--dry-run", *mode)
    assert dry.returncode == 0, dry.stderr
    patch_file = tmp_path / "mul.patch"
    patch_file.write_text(dry.stdout)
    subprocess.run(["git", "apply", str(patch_file)], cwd=tree, check=True)
    return patch_file


@pytest.mark.parametrize("mode", [(), ("--guarded",)])
def test_status_names_it_and_revert_with_the_patch_restores_every_byte(tree: Path, tmp_path: Path, mode: tuple[str, ...]) -> None:
    pristine = snapshot(tree)
    patch_file = patched(tree, tmp_path, *mode)
    status = run_codemod("status", "--tree", str(tree))
    assert status.returncode == 0 and f"mul is patched in {tree} without a journal (markers at aten/src/ATen/templates/" in status.stdout
    told = run_codemod("revert", "mul", "--tree", str(tree))
    assert told.returncode == 2 and f"codemod revert mul --patch PATCH --tree {tree}" in told.stderr
    reverted = run_codemod("revert", "mul", "--tree", str(tree), "--patch", str(patch_file))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tree) == pristine
    assert "without a journal" not in run_codemod("status", "--tree", str(tree)).stdout


def test_a_patch_that_is_not_the_bypass_is_refused_and_nothing_written(tree: Path, tmp_path: Path) -> None:
    """An edited patch reverse-applies, but planning mul on the result does not give it back."""
    dry = run_codemod("bypass", "mul", "--tree", str(tree), "--dry-run")
    edited = tmp_path / "edited.patch"
    edited.write_text(dry.stdout.replace("calls the CPU kernel directly", "calls the CPU kernel directly (edited)"))
    subprocess.run(["git", "apply", str(edited)], cwd=tree, check=True)
    before = snapshot(tree)
    refused = run_codemod("revert", "mul", "--tree", str(tree), "--patch", str(edited))
    assert refused.returncode == 1
    assert f"--patch {edited}: planning mul on the tree without it does not give this patch" in refused.stderr
    assert snapshot(tree) == before
