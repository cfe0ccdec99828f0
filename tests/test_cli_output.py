"""What a user sees: --json objects valid against the schema, progress lines, -q / -v, shell completion."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import OUTPUT_SCHEMA, REPO, run_codemod


def json_of(*args: str, exit_code: int = 0) -> dict:
    """Run codemod with --json: stdout is exactly one object valid against the schema."""
    run = run_codemod(*args, "--json")
    assert run.returncode == exit_code, run.stderr
    document = json.loads(run.stdout)
    OUTPUT_SCHEMA.validate(document)
    return document


def test_every_json_object_follows_the_schema(tree: Path) -> None:
    dry = json_of("bypass", "mul", "--tree", str(tree), "--dry-run")
    assert dry["applied"] is False and dry["patch"].startswith("diff --git ")
    assert {f["path"] for f in dry["files"]} >= {"aten/src/ATen/native/native_functions.yaml", "tools/autograd/derivatives.yaml"}
    assert all(f["hunks"] >= 1 for f in dry["files"])
    assert any("autograd" in loss for loss in dry["losses"]) and [x for x in dry["unrewritten"] if x["needs_edit"]] == []

    applied = json_of("bypass", "mul", "--tree", str(tree), "--no-verify")
    assert applied["applied"] is True and "patch" not in applied and set(applied["seconds"]) == {"plan", "apply"}
    assert json_of("bypass", "mul", "--tree", str(tree)) == {"command": "bypass", "op": "mul", "already_bypassed": True}

    status = json_of("status", "--tree", str(tree))
    assert [b["op"] for b in status["bypassed"]] == ["mul"] and status["bypassed"][0]["changed_since"] == []
    ops = json_of("ops", "--tree", str(tree))
    assert next(o for o in ops["ops"] if o["op"] == "mul")["reason"] == "bypassed"

    reverted = json_of("revert", "mul", "--tree", str(tree))
    assert {f["outcome"] for f in reverted["files"]} <= {"restored", "deleted"} and len(reverted["files"]) == len(applied["files"])

    unknown = json_of("bypass", "mull", "--tree", str(tree), exit_code=2)
    assert unknown["exit_code"] == 2 and "did you mean mul" in unknown["error"]


def test_guarded_json_names_its_mode(tree: Path) -> None:
    guarded = json_of("bypass", "mul", "--tree", str(tree), "--dry-run", "--guarded")
    assert guarded["mode"] == "guarded" and guarded["foreach_ops_losing_autograd"] == []


@pytest.mark.parametrize(("flags", "progress", "commands"), [((), True, False), (("-q",), False, False), (("-v",), True, True)])
def test_progress_lines_and_verbosity(tree: Path, flags: tuple[str, ...], progress: bool, commands: bool) -> None:
    run = run_codemod(*flags, "bypass", "sub", "--tree", str(tree), "--dry-run")
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert any(line.startswith("capture: torchgen on the entries of sub") and line.endswith(" s") for line in lines) == progress
    assert any(line.startswith("$ ") and "torchgen.gen" in line for line in lines) == commands
    assert run.stdout.startswith("diff --git ")  # the patch alone on stdout, whatever the verbosity


def test_shell_completion_offers_the_trees_ops(tree: Path) -> None:
    def complete(words: str) -> list[str]:
        env = dict(os.environ, _CODEMOD_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - (not words.endswith(" "))))
        run = subprocess.run([sys.executable, "-m", "codemod"], env=env, capture_output=True, text=True, cwd=REPO)
        return [line.split(",", 1)[1] for line in run.stdout.splitlines() if line]

    assert complete(f"codemod bypass --tree {tree} su") == ["sub", "sum"]
    assert "div" in complete(f"codemod explain --tree {tree} ")
    assert complete(f"codemod revert --tree {tree} ") == []
    assert run_codemod("bypass", "div", "--tree", str(tree), "--no-verify").returncode == 0
    assert complete(f"codemod revert --tree {tree} ") == ["div"]
