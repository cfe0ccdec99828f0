"""Every bad input of issue 13 (item 5): exit 2, one clear line, nothing written.

Real processes, real files and a real full disk (a small tmpfs mounted for the test): nothing is mocked.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemod.apply import targets, transaction
from codemod.apply.lock import LOCK_FILE
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, NATIVE_SOURCES, TAGS, TEMPLATES
from tests.conftest import OUTPUT_SCHEMA, REPO, TARGET_TREE, run_codemod, snapshot

FAST = ("--no-build", "--no-verify")  # the refusals under test come before the compile and the codegen


def refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """The one `codemod:` line of a refusal (exit 2), which must hold WORDS."""
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "codemod: " in line]
    assert len(errors) == 1 and errors[0] == result.stderr.rstrip("\n").splitlines()[-1], result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def state(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """Every file's bytes and every directory, hidden ones included."""
    return snapshot(root), {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}


def held(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """Every file's bytes and every directory under ROOT; a symlink by where it points, never read through (it may
    lead to /proc/self/mem, or to /proc/self/status, whose bytes are the reader's)."""
    # os.walk, not rglob: Python 3.11.2's rglob raises on a symlink whose target's name is too long to stat
    found = sorted(Path(directory, name) for directory, dirs, files in os.walk(root) for name in (*dirs, *files))
    files = {p.relative_to(root).as_posix(): b"-> " + os.fsencode(os.readlink(p)) if p.is_symlink() else p.read_bytes()
             for p in found if p.is_symlink() or p.is_file()}
    return files, {p.relative_to(root).as_posix() for p in found if not p.is_symlink() and p.is_dir()}


def interrupt_bypass(tree: Path) -> None:
    """A real `bypass mul` killed right after its commit point (the transaction log renamed into place): the
    first write at which a crash leaves the log behind."""
    for crash_after in range(1, 16):
        env = {**os.environ, transaction.CRASH_ENV: str(crash_after)}
        killed = subprocess.run([sys.executable, "-m", "codemod", "bypass", "mul", "--tree", str(tree), *FAST],
                                capture_output=True, text=True, cwd=REPO, env=env, check=False)
        assert killed.returncode == transaction.CRASH_EXIT, killed.stderr
        if (tree / transaction.LOG).is_file():
            return
    raise AssertionError("no crash point of `bypass mul` left the transaction log behind")


TREE_COMMANDS = (
    ("bypass", "mul"), ("revert", "mul"), ("status",), ("ops",), ("explain", "mul"), ("build", "mul"),
    ("bench", "mul", "--no-callgrind"),
)


def test_a_file_named_codemod_is_refused_by_every_command(tree: Path) -> None:
    (tree / ".codemod").write_text("not ours\n")
    before = state(tree)
    for command in (*TREE_COMMANDS, ("recover",)):
        refused(run_codemod(*command, "--tree", str(tree)), f"{tree}/.codemod: not a directory", "move the file away")
    assert state(tree) == before


def test_a_refusal_under_json_is_one_error_object(tree: Path) -> None:
    (tree / ".codemod").write_text("not ours\n")
    for command in (("status",), ("ops",), ("bypass", "mul"), ("revert", "mul")):
        result = run_codemod(*command, "--tree", str(tree), "--json")
        refused(result, ".codemod: not a directory")
        report = json.loads(result.stdout)
        OUTPUT_SCHEMA.validate(report)
        assert report["command"] == command[0] and report["exit_code"] == 2 and "not a directory" in report["error"]


def test_every_command_but_recover_refuses_while_a_transaction_is_unfinished(tree: Path) -> None:
    interrupt_bypass(tree)
    before = state(tree)
    for command in TREE_COMMANDS:
        refused(run_codemod(*command, "--tree", str(tree)), "`codemod bypass mul` was interrupted half-way",
                f"run `codemod recover --tree {tree}`")
    assert state(tree) == before
    assert run_codemod("recover", "--tree", str(tree)).returncode == 0
    status = run_codemod("status", "--tree", str(tree)).stdout
    assert "mul (mul.Tensor, mul_.Tensor, mul.out): plain (`bypass mul`), " in status and ", matches the journal" in status


# Issue 18, item 4: the patch goes to a new file or over an earlier patch, outside the tree, and only at the end.
@pytest.mark.parametrize("target, why", [
    ("missing-directory/mul.patch", "no directory {tmp}/missing-directory"),
    ("notes.txt", "an existing file that codemod did not write"),
    ("linked.patch", "a hard link (2 names of one file)"),
    (f"TREE/{NATIVE_FUNCTIONS}", "a file of the tree"),
    (f"TREE/{NATIVE_SOURCES}/BinaryOps.cpp", "a file of the tree"),
])
@pytest.mark.parametrize("mode", ["--dry-run", "--no-verify"])
def test_a_patch_that_would_destroy_a_file_stops_the_bypass_before_anything_is_written(
    tree: Path, tmp_path: Path, target: str, why: str, mode: str
) -> None:
    (tmp_path / "notes.txt").write_text("my notes\n")
    (tmp_path / "earlier.patch").write_text(targets.PATCH_HEADER.format(command="bypass mul") + "diff --git a/x b/x\n")
    os.link(tmp_path / "earlier.patch", tmp_path / "linked.patch")
    patch = target.replace("TREE", str(tree)) if target.startswith(("TREE", "/")) else str(tmp_path / target)
    before, outside = state(tree), state(tmp_path)
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--patch", patch, mode, "--no-build")
    refused(result, f"--patch {patch}: {why.format(tmp=tmp_path)}", "nothing was written", "pass --patch a new file outside the tree")
    assert result.stdout == ""
    assert state(tree) == before and state(tmp_path) == outside


def test_the_patch_is_written_only_once_everything_succeeded(tree: Path, tmp_path: Path) -> None:
    patch = tmp_path / "mul.patch"
    before = state(tree)
    failed = subprocess.run([sys.executable, "-m", "codemod", "bypass", "mul", "--tree", str(tree), "--patch", str(patch), "--no-compile"],
                            capture_output=True, text=True, cwd=REPO, env={**os.environ, "CXX": "false"})
    assert failed.returncode == 1 and "codemod: false " in failed.stderr and "(exit 1)" in failed.stderr, failed.stderr  # the compiler failed
    assert state(tree) == before and not patch.exists()
    header = targets.PATCH_HEADER.format(command="bypass mul")
    patch.write_text(header + "diff --git a/x b/x\n")  # an earlier patch of codemod's is written over
    dry = run_codemod("bypass", "mul", "--tree", str(tree), "--patch", str(patch), "--dry-run")
    assert dry.returncode == 0 and patch.read_text() == header + dry.stdout and dry.stdout.startswith("diff --git a/"), dry.stderr
    applied = subprocess.run(["git", "apply", "--check", str(patch)], cwd=tree, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr  # git apply reads past the header
    assert state(tree) == before


@pytest.mark.parametrize("rel_path", [NATIVE_FUNCTIONS, DERIVATIVES])
def test_a_yaml_path_that_is_a_directory_is_refused(tree: Path, rel_path: str) -> None:
    (tree / rel_path).unlink()
    (tree / rel_path).mkdir()
    before = state(tree)
    for command in (("bypass", "mul", *FAST), ("ops",), ("explain", "mul"), ("status",)):
        refused(run_codemod(*command, "--tree", str(tree)), f"{tree / rel_path}: a directory, but it must be")
    assert state(tree) == before


def test_a_second_entry_of_one_name_is_refused_before_planning_with_both_lines(tree: Path) -> None:
    yaml_path = tree / NATIVE_FUNCTIONS
    text = yaml_path.read_text()
    first = text[: text.index("- func: mul.Tensor(")].count("\n") + 1
    yaml_path.write_text(text + "\n- func: mul.Tensor(Tensor self, Tensor other) -> Tensor\n  variants: function\n")
    second = text.count("\n") + 2
    before = state(tree)
    for command in (("bypass", "mul", *FAST), ("ops",), ("explain", "mul")):
        refused(run_codemod(*command, "--tree", str(tree)),
                f"{NATIVE_FUNCTIONS}:{second}: a second entry mul.Tensor (the first is at line {first})", "remove or rename one")
    assert state(tree) == before


def test_a_key_twice_in_one_entry_is_refused_with_its_line(tree: Path) -> None:
    yaml_path = tree / NATIVE_FUNCTIONS
    text = yaml_path.read_text()
    at = text.index("  structured_delegate: mul.out\n")
    yaml_path.write_text(text[:at] + "  variants: method\n" + text[at:])  # mul.Tensor's own `variants` follows
    inserted = text[:at].count("\n") + 1
    before = state(tree)
    refused(run_codemod("bypass", "mul", "--tree", str(tree), *FAST),
            f"{NATIVE_FUNCTIONS}:{inserted + 2}: the key 'variants' a second time in one mapping (first at line {inserted})",
            "torchgen refuses a duplicate key")
    assert state(tree) == before


@pytest.mark.parametrize("entry", ["add.Tensor", "mul.Tensor"])  # another op's entry, and the op's own
def test_an_entry_torchgen_refuses_is_named_before_planning(tree: Path, entry: str) -> None:
    yaml_path = tree / NATIVE_FUNCTIONS
    text = yaml_path.read_text()
    at = text.index(f"- func: {entry}(Tensor self, Tensor other")
    yaml_path.write_text(text[:at] + text[at:].replace("Tensor other", "Tensr other", 1))
    line = text[:at].count("\n") + 1
    before = state(tree)
    refused(run_codemod("bypass", "mul", "--tree", str(tree), *FAST),
            f"{NATIVE_FUNCTIONS}:{line}: torchgen refuses the file (RuntimeError: unrecognized type Tensr)", "fix it and run again")
    assert state(tree) == before


def interactive(tree: Path, answers: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemod", "-q", "bypass", "mul", "--tree", str(tree), "-i", *FAST],
        input=answers, capture_output=True, text=True, cwd=REPO, timeout=300,
    )


def test_review_quits_when_a_needed_hunk_is_refused_twice(tree: Path) -> None:
    before = state(tree)
    run = interactive(tree, "n\n" * 10_000)  # what `yes n` gives: it used to re-ask forever
    refused(run, "hunk 1/3 of `bypass mul` refused again, but it cannot be left out", "quit, nothing written")
    assert run.stderr.count("? [y,n,a,q]") == 2  # asked, refused with the reason, asked once more: quit
    assert state(tree) == before


def test_review_quits_at_the_end_of_its_input(tree: Path) -> None:
    before = state(tree)
    refused(interactive(tree, "y\n"), "no answer for hunk 2/3 (end of input)", "quit, nothing written")
    assert state(tree) == before


@contextlib.contextmanager
def small_disk(where: Path, size: str):
    """A tmpfs of SIZE mounted at WHERE: a real file system that runs out of space."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill(directory: Path) -> Path:
    """Write a file until the file system refuses with ENOSPC; return it (deleting it frees the space)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for chunk in (1 << 16, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError as error:
                assert error.errno == errno.ENOSPC
    return filler


def test_a_full_disk_during_recover_names_the_file_and_leaves_no_half_written_file(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "3m") as disk:
        tree = disk / "tree"
        shutil.copytree(TARGET_TREE, tree)
        interrupt_bypass(tree)
        filler = fill(disk)
        full = run_codemod("recover", "--tree", str(tree))
        refused(full, f"{tree}/", "No space left on device during `codemod bypass mul`",
                f"free space, permissions) and run `codemod recover --tree {tree}`")
        assert not [p for p in tree.rglob("*.codemod-tmp")], "a half-written temporary file was left"
        filler.unlink()
        assert run_codemod("recover", "--tree", str(tree)).returncode == 0
        assert not (tree / LOCK_FILE).exists()
        assert "10 files, matches the journal" in run_codemod("status", "--tree", str(tree)).stdout
        reverted = run_codemod("revert", "mul", "--tree", str(tree))
        assert reverted.returncode == 0, reverted.stderr
        assert snapshot(tree) == snapshot(TARGET_TREE)


@pytest.mark.parametrize("spare, where", [
    (0, f"{LOCK_FILE}: cannot write the lock file (No space left on device); nothing was changed"),
    # room for the lock, not the state directory's .gitignore (written before the log)
    (4096, f"{transaction.STATE_GITIGNORE}: No space left on device; nothing was changed in"),
])
def test_a_full_disk_during_bypass_changes_nothing(tmp_path: Path, spare: int, where: str) -> None:
    with small_disk(tmp_path / "disk", "3m") as disk:
        tree = disk / "tree"
        shutil.copytree(TARGET_TREE, tree)
        (disk / "spare").write_bytes(b"\0" * spare)
        fill(disk)
        (disk / "spare").unlink()
        before = state(tree)
        refused(run_codemod("bypass", "mul", "--tree", str(tree), *FAST), f"{tree}/{where}")
        assert state(tree) == before


# Issue 18, item 6: every file codemod reads back goes through one bounded, UTF-8-checked JSON reader.
UNREADABLE = {
    "not UTF-8": (lambda path: path.write_bytes(b'{"format": "\xff\xfe"}'), "not UTF-8 (byte 12)"),
    "nested 200,000 deep": (lambda path: path.write_text("[" * 200_000), "JSON nested deeper than 64 levels"),
    "a directory": (lambda path: path.mkdir(), "a directory, but it must be a"),
    "truncated": (lambda path: path.write_text('{"format": '), "malformed JSON at line 1"),
}


@pytest.mark.parametrize("spoil", UNREADABLE)
def test_an_unreadable_journal_is_one_line_naming_it(tree: Path, spoil: str) -> None:
    (tree / transaction.STATE_DIR).mkdir()
    journal = tree / transaction.STATE_DIR / "div.json"
    write, message = UNREADABLE[spoil]
    write(journal)
    before = state(tree)
    for command in (("status",), ("revert", "div"), ("revert", "--all"), ("bypass", "mul", *FAST)):
        refused(run_codemod(*command, "--tree", str(tree)), f"codemod: {journal}: ", message)
    assert state(tree) == before


@pytest.mark.parametrize("spoil", UNREADABLE)
def test_an_unreadable_transaction_log_blocks_every_command_until_recover_discards_it(tree: Path, spoil: str) -> None:
    (tree / transaction.STATE_DIR).mkdir()
    log = tree / transaction.LOG
    write, message = UNREADABLE[spoil]
    write(log)
    before = state(tree)
    for command in (*TREE_COMMANDS, ("recover",)):
        refused(run_codemod(*command, "--tree", str(tree)), f"codemod: {log}: ", message)
    assert state(tree) == before
    discarded = run_codemod("recover", "--discard", "--tree", str(tree))
    if spoil == "a directory":  # not codemod's to delete
        refused(discarded, f"{log}: a directory where codemod keeps its transaction log; move it away")
        return
    assert discarded.returncode == 0 and f"discarded {log}: it could not be replayed" in discarded.stderr
    assert not (tree / transaction.STATE_DIR).exists()
    assert run_codemod("status", "--tree", str(tree)).stdout == f"no op is bypassed in {tree}\n"


def test_recover_discards_no_log_it_can_replay(tree: Path) -> None:
    interrupt_bypass(tree)
    (tree / LOCK_FILE).unlink()  # left by the killed process; any command taking the lock removes it
    before = state(tree)
    refused(run_codemod("recover", "--discard", "--tree", str(tree)), "the log can be replayed, so it is not dropped",
            f"run `codemod recover --tree {tree}` to finish it")
    assert state(tree) == before


def test_a_hot_report_nested_too_deep_is_one_line(tree: Path, tmp_path: Path) -> None:
    report = tmp_path / "hot.json"
    report.write_text("[" * 200_000)
    refused(run_codemod("bypass", "--from-hot", str(report), "--tree", str(tree)), f"{report}: not a `codemod hot --json` report",
            "JSON nested deeper than 64 levels")
    refused(run_codemod("hot", "--trace", str(report), "--tree", str(tree)), f"{report}: not a JSON trace")


def test_a_source_symlinked_out_of_the_tree_is_read_by_its_name_and_never_written(tree: Path, tmp_path: Path) -> None:
    binary_ops = tree / NATIVE_SOURCES / "BinaryOps.cpp"
    outside = tmp_path / "BinaryOps.cpp"
    binary_ops.rename(outside)
    binary_ops.symlink_to(outside)
    kept = outside.read_bytes()
    ops = run_codemod("ops", "--tree", str(tree))
    assert ops.returncode == 0 and "Traceback" not in ops.stderr and "\nmul " in "\n" + ops.stdout, ops.stderr
    explained = run_codemod("explain", "mul", "--tree", str(tree))
    assert explained.returncode == 0 and f"{NATIVE_SOURCES}/BinaryOps.cpp:" in explained.stdout, explained.stderr
    before = state(tree)
    refused(run_codemod("bypass", "mul", "--tree", str(tree), *FAST),
            f"'{NATIVE_SOURCES}/BinaryOps.cpp' resolves to {outside}, outside the tree")
    assert state(tree) == before and outside.read_bytes() == kept


def test_a_directory_where_a_kernel_source_goes_is_listed_and_refused(tree: Path) -> None:
    (tree / NATIVE_SOURCES / "UfuncCPU_add.cpp").mkdir()
    ops = run_codemod("ops", "--tree", str(tree))
    assert ops.returncode == 0 and "Traceback" not in ops.stderr, ops.stderr
    before = state(tree)
    refused(run_codemod("bypass", "add", "--tree", str(tree), *FAST), f"{NATIVE_SOURCES}/UfuncCPU_add.cpp exists", "move it away")
    assert state(tree) == before


# What the tree's own codegen refuses in the tree as it is: known before anything is written (exit 2, one line), --dry-run
# too. The autograd codegen refuses the bypass's result first; run then on the tree as it is, it says whose fault it is.
@pytest.mark.parametrize("spoil, message", [
    (f"{TEMPLATES}/Functions.h", f"{TEMPLATES}/Functions.h: No such file or directory, and torchgen (ATen codegen) reads it"),
    (f"{TEMPLATES}/Functions.cpp", f"{TEMPLATES}/Functions.cpp: No such file or directory, and torchgen (ATen codegen) reads it"),
    (f"{TEMPLATES}/TensorBody.h", f"{TEMPLATES}/TensorBody.h: No such file or directory, and torchgen (ATen codegen) reads it"),
    (f"{TAGS}:", f"{TAGS}: torchgen refuses the file (AssertionError: Expected 'es' to be a list"),
    (f"{DERIVATIVES}:", f"{DERIVATIVES}: the tree's autograd codegen refuses the tree as it is, before any edit (TypeError:"),
    (f"{DERIVATIVES}:{{}}", f"{DERIVATIVES}: the tree's autograd codegen refuses the tree as it is, before any edit (AssertionError:"),
])
def test_what_the_trees_codegen_refuses_is_refused_before_writing(tree: Path, spoil: str, message: str) -> None:
    rel_path, emptied, content = spoil.partition(":")
    if emptied:
        (tree / rel_path).write_text(content)
    else:
        (tree / rel_path).unlink()
    before = state(tree)
    commands = [("bypass", "mul", "--no-build"), ("bypass", "mul", "--dry-run")]
    if rel_path != DERIVATIVES:  # explain and build read no formula
        commands += [("explain", "mul"), ("build", "mul")]
    for command in commands:
        refused(run_codemod(*command, "--tree", str(tree)), message)
    assert state(tree) == before


def test_a_non_utf8_derivatives_yaml_is_one_line_for_explain(tree: Path) -> None:
    """Issue 26: a traceback."""
    with (tree / DERIVATIVES).open("ab") as derivatives:
        derivatives.write(b"# \xff\n")
    refused(run_codemod("explain", "mul", "--tree", str(tree)), f"{DERIVATIVES}:", "not valid UTF-8")


def with_env(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codemod", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **env}, check=False)


def internal_error(result: subprocess.CompletedProcess[str], *words: str) -> Path:
    """The one line an unexpected exception becomes (exit 3), holding WORDS; the log file it names."""
    assert result.returncode == 3, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("codemod: ")]
    assert line == result.stderr.rstrip("\n").splitlines()[-1] and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in line, line
    log = Path(line.split("the traceback is in ")[1].split(": please report it")[0])
    try:
        assert "Traceback (most recent call last)" in log.read_text() and "RuntimeError: test hook" in log.read_text()
    finally:
        log.unlink()
    return log


def test_an_unexpected_exception_is_one_line_naming_the_state_of_the_tree(tree: Path) -> None:
    """Issue 26 §2, through the real commands: an exception nothing expects (transaction.RAISE_ENV) after the tree
    was written, at its commit point, and as the JSON error object."""
    raise_at = transaction.RAISE_ENV
    bypassed = with_env("bypass", "mul", "--tree", str(tree), *FAST, **{raise_at: "applied"})
    internal_error(bypassed, "internal error in `codemod bypass` (RuntimeError: test hook",
                   f"mul is bypassed and unverified: `codemod revert mul --tree {tree}` undoes it")
    halfway = with_env("revert", "mul", "--tree", str(tree), "--json", **{raise_at: "commit"})
    internal_error(halfway, f"{tree} is part-way through a change: `codemod recover --tree {tree}` finishes it")
    error = json.loads(halfway.stdout)
    OUTPUT_SCHEMA.validate(error)
    assert error["command"] == "revert" and error["exit_code"] == 3
    assert run_codemod("recover", "--tree", str(tree)).returncode == 0
    assert not (tree / transaction.STATE_DIR).exists()


def test_a_temporary_file_a_killed_run_left_is_named_by_status_and_removed_by_the_next_locking_command(tree: Path) -> None:
    """Issue 26 §7: a bypass killed before its commit point left `.codemod/..gitignore.codemod-tmp`, and nothing
    named it."""
    before = state(tree)
    for writes in range(1, 16):
        killed = with_env("bypass", "mul", "--tree", str(tree), *FAST, **{transaction.CRASH_ENV: str(writes)})
        assert killed.returncode == transaction.CRASH_EXIT, killed.stderr
        if transaction.strays(tree):
            break
    (stray,) = transaction.strays(tree)
    assert not (tree / transaction.LOG).exists()
    status = run_codemod("status", "--tree", str(tree))
    assert f"{stray}: a temporary file a killed run left; `codemod recover --tree {tree}` removes it" in status.stdout
    (tree / LOCK_FILE).unlink()  # the killed run's, stale
    assert run_codemod("revert", "mul", "--tree", str(tree)).returncode == 0  # not bypassed: said, exit 0
    assert state(tree) == before
