"""The codegen runs of `bypass` are kept in the build cache by their inputs (codemod.capture.codegen): a repeat on
the same inputs runs no codegen and says so, any changed input runs it again, a failure is never kept. Real
torchgen and autograd codegen, through the real CLI. Each test's build cache starts empty, unlike the session's: the
runs a first bypass makes are what is counted; nothing is compiled, so no precompiled header is made there."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from codemod.capture import codegen
from codemod.model import cache
from codemod.model.errors import VerificationFailed
from codemod.model.tree import TEMPLATES, locate
from codemod.verify import compile_check
from tests.conftest import REPO

FROM_CACHE = "ran clean before on the same inputs (build cache), not run again"
PLANNED = "ran clean on the planned bytes before writing; the tree now holds exactly those bytes, not run again"


def bypass(tree: Path, cache: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`bypass mul` on TREE (a copy of target_tree), its codegen verification but neither compile (unless FLAGS)."""
    return subprocess.run(
        [sys.executable, "-m", "codemod", "-v", "bypass", "mul", "--tree", str(tree), *(flags or ("--no-build", "--no-compile"))],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "CODEMOD_BUILD_CACHE": str(cache)},
    )


def runs(result: subprocess.CompletedProcess[str], module: str) -> int:
    return sum(line.startswith("$ ") and f" -m {module}" in line for line in result.stderr.splitlines())


def loader_runs(result: subprocess.CompletedProcess[str]) -> int:
    """Runs of torchgen's loader on the whole yaml, the check before planning (a script: its lines follow `$`)."""
    return result.stderr.count("parse_native_yaml(native, tags)")


def test_codegen_runs_once_per_set_of_inputs(target_tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    trees = [shutil.copytree(target_tree, tmp_path / name) for name in ("first", "again", "edited")]

    first = bypass(trees[0], cache)
    assert first.returncode == 0, first.stderr
    # capture: the entries as they are and as the bypass leaves them; then, on the planned bytes before writing, the
    # whole yaml's headers, the entries with the edited templates and the autograd codegen, each once: verify after
    # writing finds them all in the build cache
    assert runs(first, "torchgen.gen") == 4 and runs(first, "torchgen.packaged.autograd.gen_autograd") == 1
    assert first.stderr.count("--generate headers") == 1
    assert loader_runs(first) == 1
    assert FROM_CACHE not in first.stderr
    assert f"verified: torchgen on the whole yaml, torchgen on the op's entries, the autograd codegen: {PLANNED}" in first.stderr
    lines = first.stderr.splitlines()
    written = next(i for i, line in enumerate(lines) if line.startswith("bypass mul (mul.Tensor, mul_.Tensor, mul.out) changed"))
    assert all(i < written for i, line in enumerate(lines) if line.startswith("$ ")), "every codegen run comes before writing"

    again = bypass(trees[1], cache)  # a fresh copy of the same tree: the same inputs everywhere
    assert again.returncode == 0, again.stderr
    assert runs(again, "torchgen.gen") == 0 and runs(again, "torchgen.packaged.autograd.gen_autograd") == 0
    assert loader_runs(again) == 0
    assert f"verified: torchgen on the whole yaml, torchgen on the op's entries, the autograd codegen: {FROM_CACHE}" in again.stderr

    template = trees[2] / "aten/src/ATen/templates/NativeMetaFunctions.h"
    template.write_text(template.read_text() + "// one more line\n")  # an input of every torchgen run
    edited = bypass(trees[2], cache)
    assert edited.returncode == 0, edited.stderr
    assert runs(edited, "torchgen.gen") == 4 and runs(edited, "torchgen.packaged.autograd.gen_autograd") == 0
    assert loader_runs(edited) == 0  # the yaml and tags are those it accepted: the template is not its input
    assert f"verified: torchgen on the whole yaml, torchgen on the op's entries: {PLANNED}" in edited.stderr
    assert f"verified: the autograd codegen: {FROM_CACHE}" in edited.stderr


def test_the_python_a_run_keys_is_the_interpreter_not_the_name_that_started_it(target_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's first command runs `codemod` (a venv's python3), the tests `python -m codemod`: one interpreter by two
    names, whose runs the tests find in the cache that command filled."""
    tree = locate(target_tree)
    as_started = codegen.torchgen_code(tree)
    alias = tmp_path / "python3"
    alias.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(alias))
    assert codegen.torchgen_code(tree) == as_started


def test_compiles_are_keyed_by_the_headers_bytes_not_by_the_inputs_that_made_them(target_tree: Path, tmp_path: Path) -> None:
    """A source template (Functions.cpp) is an input of torchgen's headers run but not of any header: edited, its
    headers are the same, and so are the records of every compile that read them; a header template is another state."""
    def headers(edit: str) -> compile_check.Headers:
        tree = shutil.copytree(target_tree, tmp_path / edit.replace("/", "_"))
        template = tree / TEMPLATES / edit
        template.write_text(template.read_text() + "// one more line\n")
        return compile_check.regenerate_headers(locate(tree))

    source_edited, header_edited = headers("Functions.cpp"), headers("Functions.h")
    untouched = compile_check.regenerate_headers(locate(target_tree))
    assert source_edited.root != untouched.root and source_edited.digest == untouched.digest
    assert header_edited.digest != untouched.digest


def test_no_verify_runs_no_codegen(target_tree: Path, tmp_path: Path) -> None:
    """Only capture's torchgen runs (twice, on the op's entries): neither the autograd codegen nor the headers."""
    result = bypass(shutil.copytree(target_tree, tmp_path / "tree"), tmp_path / "cache", "--no-verify")
    assert result.returncode == 0, result.stderr
    assert runs(result, "torchgen.gen") == 2 and runs(result, "torchgen.packaged.autograd.gen_autograd") == 0
    assert "--generate headers" not in result.stderr and "verified:" not in result.stderr


def test_a_failing_codegen_run_is_not_kept(target_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that fails leaves nothing in the cache: the same inputs fail again, with torchgen's own words."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "cache"))
    tree = locate(shutil.copytree(target_tree, tmp_path / "tree"))
    for attempt in range(2):
        with pytest.raises(VerificationFailed, match="Tensr"):
            codegen.aten_on_yaml(tree, "- func: broken(Tensor self) -> Tensr\n", tmp_path / f"out{attempt}")
    assert not list((tmp_path / "cache").glob("torchgen-*"))


def test_the_autograd_codegen_on_the_op_s_entries_made_again_writes_the_same_bytes(target_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its outputs are compiled, by their bytes: a run made again (its entry corrupt, dropped or evicted) writes what
    the first wrote, so their compiles stay cached; the codegen's directory, which each output names, is not kept, nor
    is the lock its path is held by (each run once left a file in the temporary directory)."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "cache"))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    tree = locate(target_tree)
    entries = tree.path("aten/src/ATen/native/native_functions.yaml").read_text()
    entries = "\n".join(block for block in entries.split("\n\n") if "func: mul" in block) + "\n"

    def run() -> dict[str, bytes]:
        kept, cached = codegen.autograd_on_entries(tree, entries)
        assert not cached
        outputs = {p.relative_to(kept).as_posix(): p.read_bytes() for p in sorted(kept.rglob("*")) if p.is_file()}
        shutil.rmtree(kept)  # as a corrupt entry is dropped
        return outputs

    first = run()
    assert first == run()
    assert list(temporary.iterdir()) == []
    assert b"@generated from " in first[f"{codegen.AUTOGRAD_OUT}/ADInplaceOrViewType_0.cpp"]
    assert all(name.startswith((codegen.AUTOGRAD_OUT, ".")) for name in first)


def test_a_lock_removed_as_it_is_let_go_still_excludes_whoever_waited_for_it(tmp_path: Path) -> None:
    """held_then_removed: a thread that waited for the lock while its holder removed the file opens it anew and holds
    it alone; nothing is left after both."""
    lock = tmp_path / "run.lock"
    inside, entered = threading.Lock(), threading.Event()
    overlaps = []

    def hold() -> None:
        with cache.held_then_removed(lock):
            overlaps.append(not inside.acquire(blocking=False))
            entered.set()
            threading.Event().wait(0.2)
            inside.release()

    first = threading.Thread(target=hold)
    first.start()
    entered.wait()
    waiters = [threading.Thread(target=hold) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    for thread in (first, *waiters):
        thread.join()
    assert overlaps == [False] * 4 and not lock.exists()
