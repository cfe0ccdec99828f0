"""The journal and the transaction log are data, not instructions (issue 13, item 3).

Each attack plants what an attacker could write into a tree (a journal with a valid hash, a transaction log, a
symlink) and runs the real CLI: exit 2 naming the entry, and nothing written, inside the tree or outside it.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from codemod.apply import journal, transaction
from codemod.apply.journal import Journal, JournalFile
from codemod.apply.lock import LOCK_FILE
from codemod.model.tree import NATIVE_FUNCTIONS, NATIVE_SOURCES
from tests import sampling
from tests.conftest import TARGET_TREE, run_codemod, snapshot


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


@pytest.mark.parametrize("leading", ["out of the tree", "into the tree"])
def test_a_state_directory_that_is_a_symlink_is_refused(tree: Path, victim: Path, tmp_path: Path, leading: str) -> None:
    """Issue 18, item 4: `ln -s aten T/.codemod` put the journals and a `.gitignore` holding `*` into aten/."""
    target = tmp_path / "elsewhere" if leading == "out of the tree" else tree / "aten"
    target.mkdir(exist_ok=True)
    (tree / transaction.STATE_DIR).symlink_to(target)
    inside_before = sorted(p.name for p in target.iterdir())
    for command in (("bypass", "mul", "--no-verify"), ("revert", "mul"), ("status",), ("recover",)):
        refused_and_untouched(tree, victim, f"{tree / transaction.STATE_DIR}: a symlink (to {target})", *command)
    assert sorted(p.name for p in target.iterdir()) == inside_before


def test_a_lock_file_hard_linked_elsewhere_is_refused(tree: Path, victim: Path) -> None:
    """Issue 18, item 4: O_NOFOLLOW stops a symlink, not a hard link; the pid went into the file's other name."""
    os.link(victim, tree / LOCK_FILE)
    for command in (("bypass", "mul", "--no-verify"), ("revert", "mul"), ("recover",)):
        refused_and_untouched(tree, victim, f"{tree / LOCK_FILE}: a hard link (2 names of one file) where codemod writes its lock", *command)


@pytest.mark.parametrize("link", ["symlink", "hard link"])
def test_a_link_planted_at_a_temporary_name_is_not_written_through(tree: Path, victim: Path, link: str) -> None:
    """The temporary file beside each file a transaction writes is created anew (O_EXCL | O_NOFOLLOW)."""
    planted = tree / "aten/src/ATen/native/.BinaryOps.cpp.codemod-tmp"
    planted.symlink_to(victim) if link == "symlink" else os.link(victim, planted)
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify")
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep me\n" and not planted.exists()
    assert "// @codemod-bypass mul begin" in (tree / "aten/src/ATen/native/BinaryOps.cpp").read_text()


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
    refused_and_untouched(tree, victim, "codemod's own state; nothing was written", "bypass", "mul", "--dry-run", "--patch", str(tree / target))


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


# Issue 18, item 6: a fuzz over codemod's own formats. Whatever a journal, the transaction log or a `hot --json`
# report holds, every command exits 0, 1 or 2, never with a traceback, a refusal is one line, and nothing outside
# the tree is written. A journal's hash is computed again after each change, so its fields are checked, not only it.
VICTIM = "VICTIM"  # stands for the path of a file beside the tree
HOSTILE = st.sampled_from([
    "../victim.txt", VICTIM, "", ".", "..", ".codemod", ".codemod/x.json", ".codemod.lock", "aten", "a\nb", "\x00",
    f"{NATIVE_FUNCTIONS}", "aten/new/dir/x.cpp", "mul", "mul.Tensor", "x" * 300, "bypass mul", "revert mul\nok",
])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8) | HOSTILE,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6) | HOSTILE, children, max_size=3),
    max_leaves=8,
)


@st.composite
def mutated(draw: st.DrawFn, document: object, rehash: bool) -> bytes:
    """DOCUMENT with one value replaced or deleted (somewhere down a random path), or its bytes spoiled."""
    kind = draw(st.sampled_from(["replace", "delete", "bytes", "deep"]))
    data = json.dumps(document).encode()
    if kind == "bytes":
        start = draw(st.integers(0, len(data)))
        return data[:start] + draw(st.binary(max_size=8)) + data[start + draw(st.integers(0, 8)):]
    if kind == "deep":
        return b"[" * draw(st.sampled_from([65, 1_000, 200_000])) + data
    changed = copy.deepcopy(document)
    parent, key, node = None, None, changed
    while isinstance(node, (dict, list)) and node and (parent is None or draw(st.booleans())):
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        parent, node = node, node[key]
    if kind == "delete" and parent is not None:
        del parent[key]
    else:
        parent[key] = draw(JSON_VALUES)
    if rehash and isinstance(changed, dict):
        changed.pop("sha256", None)
        changed["sha256"] = journal._digest(changed)
    return json.dumps(changed).encode()


def survives(tree: Path, planted: Path, data: bytes, *commands: tuple[str, ...]) -> None:
    """PLANTED holds DATA (VICTIM standing for the file beside the tree); each command ends as codemod's do."""
    victim = tree.parent / "victim.txt"
    victim.write_text("keep me\n")
    planted.parent.mkdir(exist_ok=True)
    planted.write_bytes(data.replace(json.dumps(VICTIM).encode(), json.dumps(str(victim)).encode()))
    outside = {p.name for p in tree.parent.iterdir()}
    for command in commands:
        result = run_codemod(*command, "--tree", str(tree))
        assert result.returncode in (0, 1, 2) and "Traceback" not in result.stderr, (command, result.stderr)
        if result.returncode == 2:
            errors = [line for line in result.stderr.splitlines() if line.startswith("codemod: ")]
            assert len(errors) == 1 and result.stderr.rstrip("\n").endswith(errors[0]), (command, result.stderr)
        assert victim.read_text() == "keep me\n" and {p.name for p in tree.parent.iterdir()} == outside, command


FUZZ = sampling.examples(3, 30, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def bypassed_mul(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("bypassed") / "tree"
    shutil.copytree(TARGET_TREE, tree)
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    return tree


@pytest.fixture(scope="module")
def hot_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    script = tmp_path_factory.mktemp("hot") / "run.py"
    script.write_text("import torch\ntorch.ones(2).mul(torch.ones(2))\n")
    run = run_codemod("hot", str(script), "--tree", str(TARGET_TREE), "--no-measure", "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@FUZZ
@given(data=st.data())
def test_any_journal_ends_in_an_exit_code_never_a_traceback(bypassed_mul: Path, data: st.DataObject) -> None:
    document = json.loads((bypassed_mul / journal.JOURNAL_DIR / "mul.json").read_text())
    spoiled = data.draw(mutated(document, rehash=True))
    with tempfile.TemporaryDirectory() as scratch:
        tree = shutil.copytree(bypassed_mul, Path(scratch) / "tree")
        survives(tree, tree / journal.JOURNAL_DIR / "mul.json", spoiled, ("status",), ("revert", "mul"))


@FUZZ
@given(data=st.data())
def test_any_transaction_log_ends_in_an_exit_code_never_a_traceback(data: st.DataObject) -> None:
    log = transaction.Transaction(
        "bypass mul",
        ((f"{NATIVE_SOURCES}/BinaryOps.cpp", b"// replayed\n"), ("aten/new/x.cpp", b"new\n"), (f"{NATIVE_SOURCES}/Lerp.cpp", None)),
        ("aten/new",),
    )
    spoiled = data.draw(mutated(json.loads(log.to_json()), rehash=False))
    with tempfile.TemporaryDirectory() as scratch:
        tree = shutil.copytree(TARGET_TREE, Path(scratch) / "tree")
        survives(tree, tree / transaction.LOG, spoiled, ("status",), ("recover",), ("recover", "--discard"))


@FUZZ
@given(data=st.data())
def test_any_hot_report_ends_in_an_exit_code_never_a_traceback(hot_report: dict, data: st.DataObject) -> None:
    spoiled = data.draw(mutated(hot_report, rehash=False))
    with tempfile.TemporaryDirectory() as scratch:
        tree = shutil.copytree(TARGET_TREE, Path(scratch) / "tree")
        report = Path(scratch) / "hot.json"
        survives(tree, report, spoiled, ("bypass", "--from-hot", str(report), "--dry-run"))


def test_a_journal_an_earlier_version_wrote_without_a_field_added_since_still_reverts(tree: Path) -> None:
    """A capture field added later (renamed_inside_at, with its default) is absent from the journals written before it:
    they read as they were written, and revert byte for byte; a field no version knows is still refused."""
    before = snapshot(tree)
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-build", "--no-verify").returncode == 0
    path = tree / ".codemod" / "mul.json"
    raw = json.loads(path.read_text())
    raw.pop("sha256")

    def write(content: dict) -> None:
        path.write_text(json.dumps({**content, "sha256": journal._digest(content)}))

    unknown = copy.deepcopy(raw)
    unknown["capture"]["codemod_no_such_field"] = []
    write(unknown)
    assert "corrupt journal" in run_codemod("status", "--tree", str(tree)).stderr
    del raw["capture"]["renamed_inside_at"]
    write(raw)
    reverted = run_codemod("revert", "mul", "--tree", str(tree))
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tree) == before
