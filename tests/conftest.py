"""Shared fixtures: fresh copies of our target_tree/ and a runner for the real CLI."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from codemod.cli.report import SCHEMA

REPO = Path(__file__).resolve().parent.parent
TARGET_TREE = REPO / "target_tree"
FIXTURES = REPO / "fixtures"


OUTPUT_SCHEMA = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def run_codemod(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codemod", *args], capture_output=True, text=True, cwd=REPO)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    shutil.copytree(TARGET_TREE, copy)
    return copy
