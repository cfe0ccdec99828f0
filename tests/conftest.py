"""Shared fixtures: pristine copies of our target_tree/ and a runner for the real CLI.

The tests never read REPO/target_tree itself: the user may have left it bypassed (the README's
first command does). They work on a copy with every bypass recorded in its journals reverted.
"""
from __future__ import annotations

import atexit
import errno
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from codemod.apply.journal import pristine_copy
from codemod.cli.report import SCHEMA
from codemod.model import cache

REPO = Path(__file__).resolve().parent.parent
USERS_TARGET_TREE = REPO / "target_tree"  # as the user left it: read only through pristine_copy
FIXTURES = REPO / "fixtures"
# The build cache of the whole session (the one the README's first command filled), before a test points elsewhere.
SESSION_CACHE = cache.cache_dir()

pytest_plugins = ["tests.sampling"]  # the session's sample seed: --sample-seed, --sample-all
# The CLI and the codegen the tests run keep their bytecode, as installed Python does: a shell that sets this (some
# CI images do) would have each of the suite's hundreds of `python -m codemod` compile the package from source again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


OUTPUT_SCHEMA = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def run_codemod(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codemod", *args], capture_output=True, text=True, cwd=REPO)


def alive(pid: int) -> bool:
    """Whether process PID runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def ended(pids: list[int], seconds: float = 60) -> bool:
    """Whether every process of PIDS ends within SECONDS (a signal takes a moment to land)."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not any(alive(pid) for pid in pids)


def descendants(pid: int) -> dict[int, str]:
    """The processes below PID (children, theirs, ...), by pid: their command names."""
    parents, names = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, fields = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        child = int(stat.parent.name)
        parents[child], names[child] = int(fields.split()[1]), name.split("(", 1)[1]
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = names[child]
                frontier.append(child)
    return found


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _session_pristine_tree() -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="codemod-tests-"))
    atexit.register(shutil.rmtree, scratch, True)
    return pristine_copy(USERS_TARGET_TREE, scratch / "target_tree")


# Made once per test process; tests read it or copy it, never write it.
TARGET_TREE = _session_pristine_tree()


@pytest.fixture(scope="session")
def target_tree() -> Path:
    """Our target_tree/ with no op bypassed, whatever the user did with codemod; shared, so never written."""
    return TARGET_TREE


@pytest.fixture
def tree(tmp_path: Path, target_tree: Path) -> Path:
    copy = tmp_path / "tree"
    shutil.copytree(target_tree, copy)
    return copy


@pytest.fixture(scope="session")
def bypassed_full_tree(tmp_path_factory: pytest.TempPathFactory, target_tree: Path):
    """tests/full_tree.py's tree: bypassed, regenerated and compiled once for the session; shared, so never written."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    from tests import full_tree  # it imports run_codemod from here

    return full_tree.build(tmp_path_factory.mktemp("full-tree"), target_tree)


# The files that read `bypassed_full_tree`: pytest-xdist runs them on one worker, so the session builds it once.
FULL_TREE_FILES = ("tests/test_real_tree.py", "tests/test_macro_kernels.py")


SUITE_COST = REPO / "benchmarks/results/suite_cost.json"  # benchmarks/suite_cost.py's last record


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _scope(nodeid: str) -> str:
    """What runs whole on one worker: a test file, or the files of FULL_TREE_FILES together."""
    path = _file_of(nodeid)
    return FULL_TREE_FILES[0] if path in FULL_TREE_FILES else path


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker more than the cores. A worker that waits for what another is making in the build cache (a
    harness, a compile, torchgen's run) holds no core, and on one worker per core the suite left a fifth of its cores'
    time idle (2026-12-07: 1922 s wall, 3099 s CPU on 2 cores); the extra worker takes it."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Each test file on one worker (its module fixtures are built once), the files of FULL_TREE_FILES together; in
    the order the workers collected them (pytest_collection_modifyitems: costliest first), not by number of tests."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False
    return ByFile(config, log)


CPU_PROPERTY = "cpu_s"  # junit XML: each test's CPU seconds, for benchmarks/suite_cost.py
_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """User + system seconds of this process and of the children it has waited for (g++, the CLI, the codegen)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_AT_SETUP] = _cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """Each test's CPU seconds, its fixtures' set-up and tear-down included (a module's fixtures count in its first and
    last test, as their seconds do), kept as a property of its junit XML report: wall seconds alone say more of the
    load beside the run than of the test."""
    try:
        return (yield)
    finally:
        if _CPU_AT_SETUP in item.stash:
            item.user_properties.append((CPU_PROPERTY, round(_cpu_seconds() - item.stash[_CPU_AT_SETUP], 1)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist's workers: the files in the order of their CPU seconds in the suite's last recorded run, costliest first,
    so that the long ones start first and the short ones fill in at the end (a file not recorded goes first). CPU, not
    seconds: a file's seconds grow with what runs beside it."""
    if not hasattr(config, "workerinput"):
        return
    seconds = recorded_cpu_seconds()
    items.sort(key=lambda item: -seconds.get(_scope(item.nodeid), math.inf))  # stable: a file's tests keep their order


def recorded_cpu_seconds() -> Counter[str]:
    """The CPU seconds of each scope (_scope) in SUITE_COST, none when there is no record; one that cannot be read
    (truncated, hand-edited, a merge's conflict markers) is a usage error naming it, never a traceback."""
    if not SUITE_COST.is_file():
        return Counter()
    seconds: Counter[str] = Counter()
    try:
        for file in json.loads(SUITE_COST.read_text())["files"]:
            seconds[_scope(file["file"])] += file["cpu_s"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise pytest.UsageError(
            f"{SUITE_COST}: not a record of benchmarks/suite_cost.py ({type(error).__name__}: {error}); restore it "
            f"(`git checkout -- {os.path.relpath(SUITE_COST, REPO)}`) or record it again (`python benchmarks/suite_cost.py`)"
        ) from None
    return seconds


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):  # xdist's controller
        recorded_cpu_seconds()  # the workers order their files by it: one they cannot read stops the run here, named
        config.pluginmanager.register(FileProgress(config), "codemod-file-progress")


class FileProgress:
    """Under pytest-xdist, a line as each test file finishes (its outcomes and seconds), as pytest names each file it
    reaches when it runs alone: the workers' dots alone say nothing of where the run is."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.left: Counter[str] = Counter()  # by file: the tests not yet torn down
        self.outcomes: dict[str, dict[str, str]] = {}
        self.seconds: Counter[str] = Counter()
        self.files = 0

    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        if not self.left:  # every worker collects the same tests
            self.left.update(map(_file_of, ids))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = _file_of(report.nodeid)
        outcomes = self.outcomes.setdefault(path, {})
        self.seconds[path] += report.duration
        if report.failed:
            outcomes[report.nodeid] = "error" if report.when != "call" else "failed"
        elif report.when == "call" or report.skipped:
            outcomes.setdefault(report.nodeid, report.outcome)
        if report.when == "teardown":
            self.left[path] -= 1
            if self.left[path] == 0:
                self.files += 1
                said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(Counter(outcomes.values()).items()))
                reporter = self.config.pluginmanager.get_plugin("terminalreporter")
                if reporter._tw.width_of_current_line:  # after the workers' dots: on a line of its own
                    reporter._tw.line()
                reporter.write_line(f"[{self.files}/{len(self.left)}] {path}: {said} in {self.seconds[path]:.0f} s")


def seeded_cache(destination: Path, entries: str = "pch-*", leave_out: str = "", source: Path = SESSION_CACHE) -> Path:
    """A build cache at DESTINATION (made, or added to) holding SOURCE's ENTRIES (a glob; by default the precompiled
    headers) but LEAVE_OUT, as hard links (entries are never edited in place; copies where SOURCE is on another file system): for a
    test of what a first build does, which is not making those entries. Never a lock file or a half-made entry (dot
    names): a lock shared through a hard link would tie the two caches' runs."""
    destination.mkdir(parents=True, exist_ok=True)
    for kept in source.glob(entries):
        if kept.name == leave_out or kept.name.startswith("."):
            continue
        if kept.is_dir():
            shutil.copytree(kept, destination / kept.name, copy_function=_linked)
        else:
            _linked(kept, destination / kept.name)
    return destination


def _linked(source: Path | str, destination: Path | str) -> None:
    try:
        os.link(source, destination)
    except OSError as error:
        if error.errno != errno.EXDEV:  # else on another file system: a copy
            raise
        shutil.copy2(source, destination)
