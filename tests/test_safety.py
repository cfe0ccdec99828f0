"""Safe by construction (issue 6): a crash at any write, the lock, revert over later work, bad input, --check.

Real processes and real files throughout: a crash is os._exit in a child process, the lock is held by
another `codemod` process, later work is bytes edited in the tree.
"""
from __future__ import annotations

import dataclasses
import difflib
import itertools
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from codemod.apply import journal, lock, transaction
from codemod.apply.lock import LOCK_FILE
from codemod.model.tree import NATIVE_FUNCTIONS, NATIVE_SOURCES, TEMPLATES, locate
from codemod.plan.plan import FileChange, make_plan
from codemod.verify import fixed_point
from tests import sampling
from tests.conftest import REPO, run_codemod, snapshot

BINARY_OPS = f"{NATIVE_SOURCES}/BinaryOps.cpp"
OPS_CPP = "torch/csrc/jit/runtime/static/ops.cpp"

# Applies a pickled plan in a child process under the lock, as `codemod bypass` does, without planning again.
APPLY_CHILD = """
import pickle, sys
from codemod.apply import journal
from codemod.apply import lock
from codemod.model.tree import locate
tree = locate(sys.argv[1])
with open(sys.argv[2], "rb") as handle:
    plan = pickle.load(handle)
with lock.held(tree):
    journal.apply(tree, [plan])
"""


def state(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """Every file's bytes and every directory: what must be identical, not only similar."""
    return snapshot(root), {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}


def copy_of(source: Path, destination: Path) -> Path:
    shutil.rmtree(destination, ignore_errors=True)
    shutil.copytree(source, destination)
    return destination


def crash_after(writes: int, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, transaction.CRASH_ENV: str(writes)}
    return subprocess.run([sys.executable, *command], capture_output=True, text=True, cwd=REPO, env=env, check=False)


@pytest.fixture(scope="module")
def mul_plan(tmp_path_factory: pytest.TempPathFactory, target_tree: Path) -> Path:
    """mul's plan on target_tree/, planned once and pickled for the crash children."""
    where = tmp_path_factory.mktemp("plan")
    plan = make_plan(locate(copy_of(target_tree, where / "tree")), "mul")
    (where / "mul.plan").write_bytes(pickle.dumps(plan))
    return where / "mul.plan"


# Where a crash may come: after the first write, or any later one, up to past the last write of either command (about
# 25 today), where the command completes.
CRASH_POINTS = range(1, 41)


@sampling.parametrize("points", CRASH_POINTS, 5, together=True)
def test_a_crash_at_any_write_of_bypass_and_revert_recovers_to_one_whole_state(
    points: tuple[int, ...], mul_plan: Path, tmp_path: Path, target_tree: Path
) -> None:
    """After the first write and drawn later ones each run; after every write, up to the last, under
    `benchmarks/exhaustive.py`."""
    pristine = state(target_tree)
    clean = copy_of(target_tree, tmp_path / "clean")
    assert subprocess.run([sys.executable, "-c", APPLY_CHILD, str(clean), str(mul_plan)], cwd=REPO, check=False).returncode == 0
    bypassed = state(clean)

    def outcomes(start: dict, finished: dict, crash: callable) -> list[str]:
        """Crash after write 1, then after each point, until the command completes (to FINISHED); recover each
        time; name the state reached."""
        reached = []
        for writes in sorted({1, *points}):
            tree = copy_of(start, tmp_path / "tree")
            result = crash(writes, tree)
            if result.returncode == 0:
                assert state(tree) == finished, f"completed before write {writes}: not the finished state"
                return [*reached, "completed"]
            assert result.returncode == transaction.CRASH_EXIT, result.stderr
            with lock.held(locate(tree)):  # what `codemod recover` runs (tested through the CLI below), minus start-up
                transaction.recover(tree)
            now = state(tree)
            assert now in (pristine, bypassed), f"crash after write {writes}: the tree is neither untouched nor bypassed"
            reached.append("pristine" if now == pristine else "bypassed")
            if now == bypassed:
                journal.revert(locate(tree), ["mul"])
                assert state(tree) == pristine, f"crash after write {writes}: revert did not restore every byte"
        return reached

    bypass = outcomes(target_tree, bypassed, lambda n, tree: crash_after(n, "-c", APPLY_CHILD, str(tree), str(mul_plan)))
    revert = outcomes(clean, pristine, lambda n, tree: crash_after(n, "-m", "codemod", "revert", "mul", "--tree", str(tree)))

    # Uncommitted (the log not yet renamed into place) -> untouched; committed -> finished by recover.
    for reached, before, after in ((bypass, "pristine", "bypassed"), (revert, "bypassed", "pristine")):
        crashed = [outcome for outcome in reached if outcome != "completed"]
        committed = crashed.index(after) if after in crashed else len(crashed)
        assert committed >= 1 and crashed == [before] * committed + [after] * (len(crashed) - committed), reached
    if sampling.every_item():  # every write, up to past the last one: a write and a rename per file, journal included
        assert bypass[-1] == revert[-1] == "completed" and len(bypass) > 2 * 10 and len(revert) > 2 * 9
    print(f"crash points: bypass {len(bypass)}, revert {len(revert)}")


def test_an_interrupted_bypass_blocks_other_commands_until_recovered(mul_plan: Path, tree: Path) -> None:
    assert crash_after(5, "-c", APPLY_CHILD, str(tree), str(mul_plan)).returncode == transaction.CRASH_EXIT
    assert (tree / LOCK_FILE).exists()  # left by the killed process: stale, taken over below
    for command in (["bypass", "mul"], ["revert", "mul"], ["status"]):
        refused = run_codemod(*command, "--tree", str(tree))
        assert refused.returncode == 2
        assert "`codemod bypass mul` was interrupted half-way; run `codemod recover" in refused.stderr
    recovered = run_codemod("recover", "--tree", str(tree))
    assert "recovered: finished `codemod bypass mul`" in recovered.stderr
    assert not (tree / LOCK_FILE).exists()
    assert "matches the journal" in run_codemod("status", "--tree", str(tree)).stdout


def test_a_second_process_is_refused_while_the_first_holds_the_lock(tree: Path) -> None:
    first = subprocess.Popen(
        [sys.executable, "-m", "codemod", "bypass", "mul", "--tree", str(tree), "--no-compile"],  # verification keeps the lock ~10 s
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lock = tree / LOCK_FILE
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip()) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lock.read_text().strip() == str(first.pid)
    second = run_codemod("revert", "mul", "--tree", str(tree))
    _, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_err
    assert second.returncode == 2
    assert f"{lock}: another codemod (pid {first.pid}) is changing this tree" in second.stderr
    assert not lock.exists()
    assert "mul (mul.Tensor, mul_.Tensor, mul.out): plain (`bypass mul`), 10 files, matches the journal" in run_codemod("status", "--tree", str(tree)).stdout


def test_a_stale_lock_of_a_dead_process_is_taken_over(tree: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tree / LOCK_FILE).write_text(f"{dead.pid}\n")
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify")
    assert result.returncode == 0, result.stderr
    assert not (tree / LOCK_FILE).exists()


def bypass_all(tree: Path, *ops: str) -> None:
    for op in ops:
        result = run_codemod("bypass", op, "--tree", str(tree), "--no-verify")
        assert result.returncode == 0, result.stderr


def line_changes(before: bytes, after: bytes) -> tuple[Counter, Counter]:
    """The lines BEFORE -> AFTER removes and adds, as multisets."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    removed, added = Counter(), Counter()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed.update(old[i1:i2])
            added.update(new[j1:j2])
    return removed, added


def test_ops_bypassed_together_revert_one_at_a_time_in_any_order(tree: Path, tmp_path: Path) -> None:
    """mul, sub, div share BinaryOps.cpp and the templates; each revert takes out exactly its own op's lines."""
    pristine = state(tree)
    bypass_all(tree, "mul", "sub", "div")
    all_three = copy_of(tree, tmp_path / "all_three")

    for op in ("mul", "div", "sub"):  # mul, bypassed first, reverted first: not LIFO
        own = journal.load(locate(tree), op)
        before_revert = snapshot(tree)
        result = run_codemod("revert", op, "--tree", str(tree))
        assert result.returncode == 0, result.stderr
        after_revert = snapshot(tree)
        for entry in own.files:
            bypass_removed, bypass_added = line_changes(entry.before or b"", entry.after)
            assert line_changes(before_revert[entry.path], after_revert.get(entry.path, b"")) == (bypass_added, bypass_removed), (
                f"reverting {op}: {entry.path}"
            )
    assert state(tree) == pristine

    for order in itertools.permutations(["mul", "sub", "div"]):
        again = copy_of(all_three, tmp_path / "again")
        for op in order:
            journal.revert(locate(again), [op])
        assert state(again) == pristine, f"revert order {order}"


def test_revert_keeps_later_edits_and_shows_them(tree: Path) -> None:
    pristine = snapshot(tree)
    bypass_all(tree, "mul")
    ops_cpp = tree / OPS_CPP
    ops_cpp.write_bytes(ops_cpp.read_bytes() + b"// a later edit\n")
    result = run_codemod("revert", "mul", "--tree", str(tree))
    assert result.returncode == 0, result.stderr
    assert f"{OPS_CPP}  (the bypass's hunks undone, later edits kept)" in result.stderr
    assert f"{OPS_CPP} was edited since the bypass:" in result.stderr and "+// a later edit" in result.stderr
    assert snapshot(tree) == {**pristine, OPS_CPP: pristine[OPS_CPP] + b"// a later edit\n"}


def test_revert_refuses_an_edit_inside_a_hunk_writes_nothing_and_force_restores(tree: Path) -> None:
    pristine = snapshot(tree)
    bypass_all(tree, "mul")
    binary_ops = tree / BINARY_OPS
    edited = binary_ops.read_text().replace("// @codemod-bypass mul end", "// @codemod-bypass mul end (edited)", 1)
    edited = re.sub(r"(?m)^(// @codemod-bypass mul begin:.*)$", r"\1 (edited)", edited, count=1)
    binary_ops.write_text(edited)
    before = snapshot(tree)
    refused = run_codemod("revert", "mul", "--tree", str(tree))
    assert refused.returncode == 1
    first = next(i for i, text in enumerate(edited.splitlines()) if text.endswith(" (edited)") and " begin:" in text) + 1
    line = edited.splitlines().index("// @codemod-bypass mul end (edited)") + 1
    assert f"{BINARY_OPS}:{first}: a later edit overlaps a hunk of the bypass" in refused.stderr  # every clash, not the first
    assert f"{BINARY_OPS}:{line}: a later edit overlaps a hunk of the bypass" in refused.stderr
    assert "+// @codemod-bypass mul end (edited)" in refused.stderr and "nothing was written" in refused.stderr
    assert snapshot(tree) == before
    forced = run_codemod("revert", "mul", "--tree", str(tree), "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"{BINARY_OPS}  (--force: dropped the later edits at {BINARY_OPS}:{first}, {BINARY_OPS}:{line} (inside the bypass's lines))" in forced.stderr
    assert snapshot(tree) == pristine


def replace_line(path: Path, old: str, new: str) -> int:
    """Replace the first line starting with OLD; its 1-based number."""
    lines = path.read_text().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.startswith(old))
    lines[index] = new
    path.write_text("".join(lines))
    return index + 1


def test_malformed_yaml_names_file_line_and_parser_message(tree: Path) -> None:
    line = replace_line(tree / NATIVE_FUNCTIONS, "- func: mul.out(", "- func: [mul.out(\n")
    before = snapshot(tree)
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-compile")
    assert result.returncode == 2
    assert f"{NATIVE_FUNCTIONS}:{line + 1}: malformed YAML:" in result.stderr  # the parser stops on the next line
    assert snapshot(tree) == before


def test_an_entry_with_a_key_the_tool_does_not_understand(tree: Path) -> None:
    replace_line(tree / NATIVE_FUNCTIONS, "- func: mul.out(", "- func: mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)\n  frobnicate: True\n")
    before = snapshot(tree)
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-compile")
    assert result.returncode == 2
    assert "frobnicate" in result.stderr and "mul.out" in result.stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize(
    ("path", "spoil", "message"),
    [
        (BINARY_OPS, lambda data: data.replace(b"\n", b"\r\n"), f"{BINARY_OPS}:1: a carriage return (CRLF line endings?)"),
        (NATIVE_FUNCTIONS, lambda data: data.replace(b"\n", b"\r\n"), f"{NATIVE_FUNCTIONS}:1: a carriage return"),
        (OPS_CPP, lambda data: data + b"// caf\xe9\n", OPS_CPP + ":{}: not valid UTF-8 (invalid continuation byte)"),
    ],
)
def test_a_file_that_would_not_print_back_byte_identical_is_reported_not_edited(tree: Path, path: str, spoil, message: str) -> None:
    target = tree / path
    original = target.read_bytes()
    target.write_bytes(spoil(original))
    before = snapshot(tree)
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-compile")
    assert result.returncode == 2
    assert message.format(original.count(b"\n") + 1) in result.stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"format": "codemod-journal/2", "op": "mul"}', "journal format 'codemod-journal/2', this codemod reads 'codemod-journal/4'"),
        ('{"format": "codemod-journal/4", "op": "mul", "files": [{"path": "x", "before": "!!"}]}', "corrupt journal"),
        ("not json", "not a journal: malformed JSON at line 1 (Expecting value)"),
    ],
)
def test_a_corrupt_or_foreign_journal_is_refused(tree: Path, content: str, message: str) -> None:
    (tree / journal.JOURNAL_DIR).mkdir()
    (tree / journal.JOURNAL_DIR / "mul.json").write_text(content)
    before = snapshot(tree)
    for command in ("revert", "bypass"):
        result = run_codemod(command, "mul", "--tree", str(tree))
        assert result.returncode == 2
        assert f"{tree / journal.JOURNAL_DIR / 'mul.json'}: {message}" in result.stderr
    assert snapshot(tree) == before


def test_a_read_only_file_is_refused_before_anything_is_written(tree: Path) -> None:
    target = tree / BINARY_OPS
    target.chmod(0o444)  # root may still write it: the tool checks the mode bits too
    before = snapshot(tree)
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-compile")
    assert result.returncode == 2
    assert f"{target}: not writable" in result.stderr
    assert snapshot(tree) == before


def test_an_immutable_file_is_refused_before_anything_is_written(tree: Path) -> None:
    """chattr +i: what a read-only file system does to root, on one file (mounting needs privileges tests lack)."""
    target = tree / TEMPLATES / "Functions.h"
    if subprocess.run(["chattr", "+i", str(target)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        before = snapshot(tree)
        result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-compile")
        assert result.returncode == 2
        assert f"{target}: not writable" in result.stderr
        assert snapshot(tree) == before
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=True)


@pytest.mark.parametrize("op", ["mul", "sub", "div", "add"])
def test_bypass_is_a_fixed_point(tree: Path, op: str) -> None:
    before = snapshot(tree)
    result = run_codemod("bypass", op, "--tree", str(tree), "--check")
    assert result.returncode == 0, result.stderr
    assert f"checked: planning {op} again after the bypass finds" in result.stderr
    assert snapshot(tree) == before


def test_a_bypass_that_leaves_the_op_structured_is_not_a_fixed_point(tree: Path) -> None:
    plan = make_plan(locate(tree), "mul")
    without_yaml_edit = tuple(
        FileChange(c.path, c.before, c.before) if c.path == NATIVE_FUNCTIONS else c for c in plan.changes
    )
    problem = fixed_point.second_plan_problem(locate(tree), dataclasses.replace(plan, changes=without_yaml_edit))
    assert problem is not None and problem.startswith("a second bypass of mul would change")


def refused_before_the_commit(tree: Path, message: str, *command: str) -> None:
    """Exit 2, one line naming the path, and nothing written: no transaction log left for `recover` to trip on."""
    before = state(tree)
    result = run_codemod(*command, "--tree", str(tree))
    assert result.returncode == 2, result.stderr
    assert result.stderr.rstrip("\n").splitlines()[-1] == f"codemod: {message}; nothing was written: move it away and run again"
    assert "Traceback" not in result.stderr
    assert state(tree) == before
    recovered = run_codemod("recover", "--tree", str(tree))
    assert recovered.returncode == 0 and "nothing to recover" in recovered.stderr, recovered.stderr


# Issue 18, item 5: every condition a write can meet is checked before the commit point.
def test_a_file_where_a_directory_goes_is_refused_before_the_commit(tree: Path) -> None:
    (tree / NATIVE_SOURCES / "cpu").write_text("x\n")
    refused_before_the_commit(
        tree, f"{tree / NATIVE_SOURCES / 'cpu'}: a file where a directory must be, to hold {NATIVE_SOURCES}/cpu/UfuncCPUKernel_add.cpp",
        "bypass", "add", "--no-build", "--no-verify",
    )
    refused_before_the_commit(  # planned together, in a scratch copy first
        tree, f"{tree / NATIVE_SOURCES / 'cpu'}: a file where a directory must be, to hold {NATIVE_SOURCES}/cpu/UfuncCPUKernel_add.cpp",
        "bypass", "mul", "add", "--no-build", "--no-verify",
    )


def test_a_directory_where_revert_writes_a_file_is_refused_before_the_commit(tree: Path) -> None:
    bypass_all(tree, "mul")
    functions_h = tree / TEMPLATES / "Functions.h"
    functions_h.unlink()
    functions_h.mkdir()
    refused_before_the_commit(tree, f"{functions_h}: a directory where codemod writes a file", "revert", "mul", "--force")
    functions_h.rmdir()
    forced = run_codemod("revert", "mul", "--tree", str(tree), "--force")
    assert forced.returncode == 0, forced.stderr


def test_a_directory_at_a_temporary_name_is_refused_before_the_commit(tree: Path) -> None:
    (tree / TEMPLATES / ".Functions.h.codemod-tmp").mkdir()
    refused_before_the_commit(tree, f"{tree / TEMPLATES / '.Functions.h.codemod-tmp'}: a directory where codemod writes "
                              f"{TEMPLATES}/Functions.h's temporary file", "bypass", "mul", "--no-build", "--no-verify")
