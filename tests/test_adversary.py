"""Issue 26 §8: the adversary, in the suite. One hypothesis test draws hostile inputs of every class the issue lists
and holds the three promises on each: no traceback reaches the user; a refusal (exit 2) writes nothing, in the tree or
beside it; and "verified" is said of a file only where g++ compiled the bytes on disk.

The classes: the faults of tests/test_faults.py (each a refusal with its words); a malformed compile_commands.json
(drawn bytes, JSON, or a valid entry spoiled); a corrupt or truncated build-cache entry (in a build cache of this test's
own, whose files are links to the session's: a corruption replaces a file, never writes into one); odd and special
paths (FIFO, /proc, /dev, a directory, an over-long name, a dangling symlink) for --tree, --patch and a file of the tree
(derivatives.yaml, a source, a template, a new source) made a symlink to one; a malformed
`hot --trace`; a non-UTF-8 byte in a file a command reads; a kill at a drawn write (transaction.CRASH_ENV), then
`status`, `recover` and `revert`. Where the run compiles, the tree may be poisoned: a header every BinaryOps.cpp
compile reads, planted in the tree, includes a header nobody has, so no claim that g++ compiled BinaryOps.cpp holds.

Sampled: a few examples per run, from the session's seed (tests/sampling.py; `--sample-seed N` replays them);
`python benchmarks/exhaustive.py tests/test_adversary.py --record` runs the larger budget, rendered into docs/safety.md.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from codemod.apply import transaction
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, NATIVE_SOURCES, TAGS, TEMPLATES
from tests import sampling
from tests.conftest import REPO, SESSION_CACHE, TARGET_TREE
from tests.test_bad_inputs import held, refused
from tests.test_faults import BINARY_OPS, FAULTS, LONG, entry
from tests.test_journal_trust import JSON_VALUES, mutated

FAST = ("--no-build",)  # the harness and its OpInfo check are the same build-cache reads on every example
POISON = f"{NATIVE_SOURCES}/BinaryOps.h"  # BinaryOps.cpp's first include: the tree's copy shadows the installed one
ABSENT = "codemod_adversary_absent.h"
TREE_FILES = (DERIVATIVES, BINARY_OPS, f"{TEMPLATES}/Functions.h", f"{NATIVE_SOURCES}/Extra.cpp")  # Extra.cpp: a new one
CLAIMED = re.compile(r"^verified: g\+\+ -c \([^)]*\) compiles (?P<files>.*?) against ", re.MULTILINE)
# Cache files whose corruption costs a second or so to make again (a capture, a parse, the yaml's load); under
# --sample-all, any file a warm bypass reads (a compile record: g++ again; torchgen's outputs: torchgen again).
CHEAP = ("capture-", "kernels/", "native-yaml-", "autograd-")
TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
     "args": {"Input Dims": [[2], [2]], "Input type": ["float", "float"], "Sequence number": 7}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 3, "args": {}},
]}


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codemod", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=600)  # a hang (a FIFO read) fails the example


def holds_the_promises(result: subprocess.CompletedProcess[str], before: tuple, after: tuple, poisoned: bool) -> None:
    """No traceback; a refusal wrote nothing (BEFORE and AFTER: the tree's and its neighbours' states); a compile claimed
    only by a run that ended well, and never of the poisoned BinaryOps.cpp."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode in (0, 1, 2), result.stderr
    if result.returncode == 2:
        refused(result)
        assert after == before, "a refusal wrote"
    claimed = [f for found in CLAIMED.finditer(result.stderr) for f in re.split(r", (?![^(]*\))", found["files"])]
    assert not claimed or result.returncode == 0, result.stderr
    assert not (poisoned and any(f.startswith(BINARY_OPS) for f in claimed)), f"a false compile verdict: {claimed}"


def linked_copy(source: Path, dest: Path) -> None:
    """DEST: SOURCE's files, each a hard link (a symlink linked as itself). The other workers write the session's cache
    meanwhile: a file they rename or remove before it is linked (an entry being made) is left out, as `cp -al` could
    not (it failed, and this test was skipped: 2026-12-07, in CI)."""
    for directory, subdirectories, names in os.walk(source):
        here = dest / Path(directory).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in [*names, *(d for d in subdirectories if os.path.islink(os.path.join(directory, d)))]:
            try:
                os.link(os.path.join(directory, name), here / name, follow_symlinks=False)
            except FileNotFoundError:
                continue


@functools.cache
def private_cache() -> tuple[Path, tuple[str, ...]]:
    """A build cache of this test's own (every file a hard link to the session's), and the files of it a warm
    `bypass mul` reads (their access times, set to the epoch first: the file system's relatime updates them once)."""
    root = Path(tempfile.mkdtemp(prefix="codemod-adversary-cache-"))
    atexit.register(shutil.rmtree, root, True)
    cache = root / "build"
    try:
        linked_copy(SESSION_CACHE, cache)
    except OSError as error:
        pytest.skip(f"the session's build cache cannot be hard-linked to a private one: {error}")
    for lock in cache.glob(".*.lock"):  # a lock is its inode: held here, it would hold the session's entry
        lock.unlink()
    files = [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")]
    for path in files:
        os.utime(path, ns=(0, path.stat().st_mtime_ns))
    tree = Path(shutil.copytree(TARGET_TREE, root / "warm"))
    assert run("bypass", "mul", "--tree", str(tree), *FAST, env={"CODEMOD_BUILD_CACHE": str(cache)}).returncode == 0
    shutil.rmtree(tree)
    read = tuple(sorted(p.relative_to(cache).as_posix() for p in files if p.exists() and p.stat().st_atime_ns > 0))
    return cache, tuple(r for r in read if sampling.every_item() or r.startswith(CHEAP))


def corrupt(data: st.DataObject, path: Path) -> None:
    """PATH's file replaced (never written through: the session's cache shares its bytes) by a spoiled copy."""
    original = path.read_bytes()
    spoiled = data.draw(st.sampled_from([
        original[: len(original) // 2], b"", b"[]", b"\xff\xfe" + original, original[:-1] + b"\x00",
        json.dumps({"entry": "../../etc", "executable": True}).encode(),
    ]), label="spoiled bytes")
    path.unlink()
    path.write_bytes(spoiled)


def odd_path(data: st.DataObject, beside: Path, name: str) -> str:
    """A path that is no regular file of a sensible name, made in BESIDE where it needs making."""
    kind = data.draw(st.sampled_from(["fifo", "proc", "dev", "directory", "long", "symlink to /proc", "dangling"]), label=f"{name} is")
    target = beside / name
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "symlink to /proc":
        target.symlink_to("/proc/self/status")
    elif kind == "dangling":
        target.symlink_to(beside / "nowhere")
    return {"proc": "/proc/self/mem", "dev": "/dev/zero", "long": str(beside / LONG)}.get(kind, str(target))


def non_utf8(data: st.DataObject, tree: Path) -> tuple[str, ...]:
    relative = data.draw(st.sampled_from([NATIVE_FUNCTIONS, TAGS, DERIVATIVES, BINARY_OPS, f"{TEMPLATES}/Functions.h"]), label="file")
    text = (tree / relative).read_bytes()
    at = data.draw(st.integers(0, len(text)), label="at")
    (tree / relative).write_bytes(text[:at] + data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80abc"])) + text[at:])
    return data.draw(st.sampled_from([("bypass", "mul", *FAST), ("explain", "mul"), ("status",), ("ops",)]), label="command")


def compile_database(data: st.DataObject, tree: Path) -> None:
    valid = json.loads(entry(tree, "-DCODEMOD_ADVERSARY=1"))
    text = data.draw(st.one_of(
        st.binary(max_size=40),
        JSON_VALUES.map(lambda value: json.dumps(value).encode()),
        mutated(valid, rehash=False),
    ), label="compile_commands.json")
    (tree / "compile_commands.json").write_bytes(text)


@sampling.examples(6, 100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_hostile_input_makes_codemod_lie_lose_a_byte_or_print_a_traceback(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["fault", "compile database", "cache entry", "odd path", "trace", "non-UTF-8", "kill"]), label="class")
    with tempfile.TemporaryDirectory(prefix="codemod-adversary-") as scratch:
        tree, beside = Path(shutil.copytree(TARGET_TREE, Path(scratch, "tree"))), Path(scratch, "beside")
        beside.mkdir()
        poisoned = kind in ("compile database", "cache entry", "non-UTF-8") and data.draw(st.booleans(), label="poisoned")
        if poisoned:
            (tree / POISON).write_text(f"#include <{ABSENT}>\n")
        command, env = ("bypass", "mul", *FAST), {}
        if kind == "fault":  # each one a refusal in its own words
            fault = data.draw(st.sampled_from(sorted(FAULTS)), label="fault")
            spoil, arguments, words = FAULTS[fault]
            env = spoil(tree, beside) or {}
            command = ("bypass", "mul", *(a.replace("BESIDE", str(beside)) for a in arguments))
        elif kind == "compile database":
            compile_database(data, tree)
        elif kind == "cache entry":
            cache, read = private_cache()
            for relative in data.draw(st.lists(st.sampled_from(read), min_size=1, max_size=3, unique=True), label="cache files"):
                corrupt(data, cache / relative)
            env = {"CODEMOD_BUILD_CACHE": str(cache)}
        elif kind == "odd path":
            where = data.draw(st.sampled_from(["--tree", "--patch", *TREE_FILES]), label="odd")
            path = odd_path(data, beside, "odd")
            if where in TREE_FILES:  # the tree's file a symlink to it
                (tree / where).unlink(missing_ok=True)
                (tree / where).symlink_to(path)
            command = data.draw(st.sampled_from([("bypass", "mul", *FAST), ("explain", "mul"), ("status",)]), label="command")
            command = (*command, *((where, path) if where == "--patch" and command[0] == "bypass" else ()))
            if where == "--tree":
                command, tree = (*command, "--tree", path), Path(path)
        elif kind == "trace":
            trace = beside / "trace.json"
            trace.write_bytes(data.draw(mutated(TRACE, rehash=False), label="trace"))
            command = ("hot", "--trace", str(trace), "--no-measure")
        elif kind == "non-UTF-8":
            command = non_utf8(data, tree)
        if kind == "kill":
            killed_after(data, tree, beside)
            return
        if "--tree" not in command:
            command = (*command, "--tree", str(tree))
        before = (held(tree), held(beside)) if os.path.isdir(tree) and not tree.is_relative_to("/proc") else None
        result = run(*command, env=env)
        after = (held(tree), held(beside)) if before is not None else None
        holds_the_promises(result, before, after, poisoned)
        if kind == "fault" and "no g++" not in fault:
            refused(result, *words)


def killed_after(data: st.DataObject, tree: Path, beside: Path) -> None:
    """A bypass killed at a drawn write: the next commands end as codemod's do, `recover` leaves the tree whole (as it
    was, or bypassed), and `revert` brings every byte back."""
    before = (held(tree), held(beside))
    writes = data.draw(st.integers(1, 30), label="killed at write")
    killed = run("bypass", "mul", "--tree", str(tree), "--no-build", "--no-verify", env={transaction.CRASH_ENV: str(writes)})
    assert killed.returncode in (0, transaction.CRASH_EXIT) and "Traceback" not in killed.stderr, killed.stderr
    for command in (("status",), ("recover",), ("status",)):
        result = run(*command, "--tree", str(tree))
        holds_the_promises(result, (), (), poisoned=False)
        assert result.returncode in (0, 2), result.stderr
    if (tree / ".codemod" / "mul.json").is_file():  # the bypass had reached its commit point
        reverted = run("revert", "mul", "--tree", str(tree))
        assert reverted.returncode == 0, reverted.stderr
    assert (held(tree), held(beside)) == before
