"""Shared fixtures: pristine copies of our target_tree/ and a runner for the real CLI.

The tests never read REPO/target_tree itself: the user may have left it bypassed (the README's
first command does). They work on a copy with every bypass recorded in its journals reverted.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from codemod.apply import journal, transaction
from codemod.apply.lock import LOCK_FILE
from codemod.cli.report import SCHEMA
from codemod.model.errors import VerificationFailed
from codemod.model.tree import locate

REPO = Path(__file__).resolve().parent.parent
USERS_TARGET_TREE = REPO / "target_tree"  # as the user left it: read only through pristine_copy
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


def pristine_copy(source: Path, destination: Path) -> Path:
    """DESTINATION: SOURCE with every bypass its journals record reverted (newest first, so even the
    recorded bytes restore exactly), an interrupted one finished first, and no codemod state left."""
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns(LOCK_FILE, "__pycache__"))
    transaction.recover(destination)
    copy = locate(destination)
    state = destination / journal.JOURNAL_DIR
    for path in sorted(state.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True):
        try:
            journal.revert(copy, path.stem)
        except VerificationFailed:  # the user edited a bypass's lines: the recorded bytes win
            journal.revert(copy, path.stem, force=True)
    shutil.rmtree(state, ignore_errors=True)
    return destination


@pytest.fixture(scope="session")
def target_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our target_tree/ with no op bypassed, whatever the user did with codemod; shared, so never written."""
    return pristine_copy(USERS_TARGET_TREE, tmp_path_factory.mktemp("pristine") / "target_tree")


@pytest.fixture
def tree(tmp_path: Path, target_tree: Path) -> Path:
    copy = tmp_path / "tree"
    shutil.copytree(target_tree, copy)
    return copy
