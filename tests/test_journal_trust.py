"""The journal and the transaction log are data, not instructions (issue 13, item 3).

Each attack plants what an attacker could write into a tree (a journal with a valid hash, a transaction log, a
symlink) and runs the real CLI: exit 2 naming the entry, and nothing written, inside the tree or outside it.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from codemod.apply import journal, transaction
from codemod.apply.journal import Journal, JournalFile
from codemod.model.tree import NATIVE_FUNCTIONS
from tests.conftest import run_codemod, snapshot


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file beside the tree, which no command on the tree may touch."""
    path = tmp_path / "victim.txt"
    path.write_text("keep me\n")
    return path


def plant_journal(tree: Path, op: str, path: str, before: bytes | None = b"old\n") -> Path:
    """A journal with a valid hash whose one entry is PATH, as `bypass` would have written it."""
    (tree / journal.JOURNAL_DIR).mkdir(exist_ok=True)
    planted = tree / journal.JOURNAL_DIR / f"{op}.json"
    planted.write_text(Journal(op, (f"{op}.Tensor",), (JournalFile(path, before, b"new\n"),), sequence=1).to_json())
    return planted


def refused_and_untouched(tree: Path, victim: Path, message: str, *command: str) -> None:
    before = snapshot(tree)
    result = run_codemod(*command, "--tree", str(tree))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 or "Usage:" in result.stderr
    assert snapshot(tree) == before
    assert victim.read_text() == "keep me\n"


def test_a_journal_path_with_dotdot_is_refused(tree: Path, victim: Path) -> None:
    planted = plant_journal(tree, "mul", "../victim.txt")
    for command in (("revert", "mul"), ("revert", "--all"), ("status",), ("bypass", "mul", "--no-verify")):
        refused_and_untouched(tree, victim, f"{planted}: entry: '../victim.txt' points outside the tree", *command)


def test_an_absolute_journal_path_is_refused(tree: Path, victim: Path) -> None:
    planted = plant_journal(tree, "mul", str(victim), before=None)  # before None: revert would delete it
    refused_and_untouched(tree, victim, f"{planted}: entry: '{victim}' points outside the tree", "revert", "mul")


def test_a_journal_path_through_a_symlink_leading_out_is_refused(tree: Path, victim: Path) -> None:
    (tree / "innocent.txt").symlink_to(victim)
    planted = plant_journal(tree, "mul", "innocent.txt")
    refused_and_untouched(tree, victim, f"{planted}: entry: 'innocent.txt' resolves to {victim}, outside the tree", "revert", "mul")


def test_a_journal_may_not_name_codemods_own_state(tree: Path, victim: Path) -> None:
    planted = plant_journal(tree, "mul", ".codemod/sub.json")
    refused_and_untouched(tree, victim, f"{planted}: entry '.codemod/sub.json' is codemod's own state", "revert", "mul")


def test_a_tampered_journal_is_detected_by_its_hash(tree: Path, victim: Path) -> None:
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    path = tree / journal.JOURNAL_DIR / "mul.json"
    raw = json.loads(path.read_text())
    raw["files"][0]["before"] = base64.b64encode(b"planted\n").decode()
    path.write_text(json.dumps(raw))
    refused_and_untouched(tree, victim, f"{path}: the journal does not match its sha256", "revert", "mul")


def test_a_journal_under_another_ops_name_is_refused(tree: Path, victim: Path) -> None:
    plant_journal(tree, "mul", "README.md")
    (tree / journal.JOURNAL_DIR / "mul.json").rename(tree / journal.JOURNAL_DIR / "sub.json")
    refused_and_untouched(tree, victim, "records op 'mul', not 'sub'", "revert", "sub")


def test_a_planted_transaction_cannot_write_outside_the_tree(tree: Path, victim: Path) -> None:
    (tree / transaction.STATE_DIR).mkdir()
    log = tree / transaction.LOG
    log.write_text(transaction.Transaction("bypass mul", (("../victim.txt", b"owned\n"),)).to_json())
    for command in (("recover",), ("status",), ("revert", "mul")):
        refused_and_untouched(tree, victim, f"{log}: entry: '../victim.txt' points outside the tree", *command)


def test_a_state_directory_leading_out_of_the_tree_is_refused(tree: Path, victim: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tree / transaction.STATE_DIR).symlink_to(outside)
    refused_and_untouched(tree, victim, f"'{transaction.LOG}' resolves to {outside / 'transaction'}, outside the tree", "bypass", "mul", "--no-verify")
    assert not any(outside.iterdir())


@pytest.mark.parametrize("name", ["../../x", "/etc/passwd", "a" * 5000, "mul/../../x", ""])
def test_an_op_name_that_is_not_one_is_refused_at_the_edge(tree: Path, victim: Path, tmp_path: Path, name: str) -> None:
    (tmp_path / "x.json").write_text(Journal("x", (), (JournalFile("../victim.txt", None, b""),)).to_json())
    for command in ("revert", "bypass", "explain"):
        before = snapshot(tree)
        result = run_codemod(command, name, "--tree", str(tree))
        assert result.returncode == 2, result.stderr
        assert "is not an op name" in result.stderr
        assert len(result.stderr) < 1000  # a 5,000-character name is cut short in the message
        assert snapshot(tree) == before and victim.read_text() == "keep me\n"


@pytest.mark.parametrize("target", [".codemod/x", ".codemod.lock", ".codemod/mul.json"])
def test_the_patch_may_not_go_into_codemods_state(tree: Path, victim: Path, target: str) -> None:
    refused_and_untouched(tree, victim, "codemod's own state; write the patch elsewhere", "bypass", "mul", "--dry-run", "--patch", str(tree / target))


def test_a_bypass_in_the_other_mode_names_the_mode_it_is_in(tree: Path, victim: Path) -> None:
    assert run_codemod("bypass", "mul", "--guarded", "--tree", str(tree), "--no-verify").returncode == 0
    refused_and_untouched(tree, victim, "mul is already bypassed in guarded mode", "bypass", "mul", "--no-verify")
    same = run_codemod("bypass", "mul", "--guarded", "--tree", str(tree), "--no-verify")
    assert same.returncode == 0 and "mul is already bypassed (guarded)" in same.stderr
    assert json.loads((tree / journal.JOURNAL_DIR / "mul.json").read_text())["mode"] == "guarded"


def test_a_symlinked_yaml_stays_a_symlink_and_its_target_is_edited(tree: Path) -> None:
    real = tree / "aten/src/ATen/native/real_native_functions.yaml"
    (tree / NATIVE_FUNCTIONS).rename(real)
    (tree / NATIVE_FUNCTIONS).symlink_to(real.name)
    original = real.read_bytes()
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    assert (tree / NATIVE_FUNCTIONS).is_symlink() and b"manual_cpp_binding" in real.read_bytes()
    assert run_codemod("revert", "mul", "--tree", str(tree)).returncode == 0
    assert (tree / NATIVE_FUNCTIONS).is_symlink() and real.read_bytes() == original


def test_a_planted_lock_symlink_is_not_followed(tree: Path, victim: Path) -> None:
    (tree / ".codemod.lock").symlink_to(victim)
    refused_and_untouched(tree, victim, "cannot create the lock file", "revert", "mul")
