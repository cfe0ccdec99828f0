"""docs/examples/fork-ci.yml cannot drift (issue 28): its steps that run codemod run here, in order, as GitHub
Actions would run them (bash -e -o pipefail, in the fork's checkout), on a copy of target_tree/ with ops bypassed."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO, run_codemod

sys.path.insert(0, str(REPO / "docs"))
import generate  # noqa: E402  (docs/generate.py: `codemod` on PATH running this checkout)

WORKFLOW = REPO / "docs" / "examples" / "fork-ci.yml"
RUNS_CODEMOD = re.compile(r"(?:^|[;&|(]\s*|\$\()codemod\s", re.M)


def codemod_steps() -> list[str]:
    """The `run:` scripts of the workflow's steps that call codemod (not the install), in order."""
    (job,) = yaml.safe_load(WORKFLOW.read_text())["jobs"].values()
    assert job["defaults"]["run"]["working-directory"] == "fork"  # the tree: `--tree .` below
    return [step["run"] for step in job["steps"] if "run" in step and RUNS_CODEMOD.search(step["run"])]


def run_steps(fork: Path, scratch: Path) -> list[subprocess.CompletedProcess[str]]:
    """Each codemod step as the runner runs it, stopping at the first that fails."""
    env = {**generate.session_environment(scratch), "RUNNER_TEMP": str(scratch)}
    ran = []
    for script in codemod_steps():
        ran.append(subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=fork, env=env, capture_output=True, text=True))
        if ran[-1].returncode != 0:
            break
    return ran


def test_the_workflow_plans_every_bypassed_op_again_on_the_pull_requests_sources(tree: Path, tmp_path: Path) -> None:
    assert run_codemod("bypass", "mul", "div", "--tree", str(tree), "--no-verify").returncode == 0
    ran = run_steps(tree, tmp_path)
    assert [run.returncode for run in ran] == [0, 0, 0], ran[-1].stderr
    assert len(codemod_steps()) == 3 and "--dry-run" in codemod_steps()[-1] and "--check" in codemod_steps()[-1]
    patch = (tmp_path / "bypass.patch").read_text()
    assert "+// @codemod-bypass mul begin" in patch and "+// @codemod-bypass div begin" in patch
    checked = ran[-1].stderr
    assert "checked: planning mul again after the bypass finds" in checked and "checked: planning div again" in checked


def test_the_workflow_fails_on_a_hand_edit_inside_a_bypass(tree: Path, tmp_path: Path) -> None:
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    kernel = tree / "aten/src/ATen/native/BinaryOps.cpp"  # as docs/safety.md's example edits it
    kernel.write_text(kernel.read_text().replace("op.meta(self, other);", "op.meta(self, other); // mine"))
    ran = run_steps(tree, tmp_path)
    assert [run.returncode for run in ran] == [0, 1], [run.stderr for run in ran]
    assert "codemod: " in ran[-1].stderr and "BinaryOps.cpp" in ran[-1].stderr


def test_a_fork_with_nothing_bypassed_passes(tree: Path, tmp_path: Path) -> None:
    ran = run_steps(tree, tmp_path)
    assert [run.returncode for run in ran] == [0, 0, 0] and "no op is bypassed in this fork" in ran[-1].stdout
