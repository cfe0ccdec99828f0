"""What the test suite costs: the README's test command, timed, with each file's and the slowest tests' seconds.

    python benchmarks/suite_cost.py [--again] [TEST_FILE ...]

Runs the pytest of the README's test command (the second line of its set-up block), with the same arguments and a
JUnit XML report, from the root of the checkout, its output passed through; given TEST_FILEs, on those alone (to try
the script: the record says what it covered, and the pages say it is not the whole suite); the build cache is the one the tests
use (the README's first command filled it). Records the wall time, the CPU time of the run's processes (user +
system), the seconds and CPU seconds of each test file (its tests' set-up, call and tear-down: a file's first test
carries the fixtures it shares with the files after it; CPU as tests/conftest.py records it per test, which a load
beside the run does not inflate as it does seconds) and of the slowest tests, the outcome counts, the date, the machine and
the load average before and after, in benchmarks/results/suite_cost.json; `python docs/generate.py` renders it into
the README and docs/layout.md. With --again, the same command runs a second time right after, on the build cache the
first run filled (as a newcomer's second run does), and that run's wall and CPU time and outcomes are recorded too
(`again`). Takes as long as the suite (twice with --again). Figures for a person; nothing asserts a time.
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs"))

import generate  # noqa: E402  (docs/generate.py: where results are kept)
from tutorial_steps import readme_setup_lines, write_result  # noqa: E402  (benchmarks/: the script's own directory)

RESULT = generate.RESULTS / "suite_cost.json"
TESTS = REPO / "tests"
SLOWEST = 15
CPU_PROPERTY = "cpu_s"  # the property of each test case that tests/conftest.py's CPU_PROPERTY writes
NO_TESTS = 5  # pytest's exit code when it collected no test: a broken command, never a result


def pytest_arguments(command: str) -> list[str]:
    """The arguments after `python -m pytest` in COMMAND (`pip install ... && python -m pytest ARGS`)."""
    (run,) = [part for part in command.split("&&") if "pytest" in part]
    words = shlex.split(run)
    return words[words.index("pytest") + 1:]


def outcomes(junit: Path) -> dict:
    """Per test file: its seconds, CPU seconds and test count; the slowest tests; the counts of each outcome."""
    files: dict[str, dict] = defaultdict(lambda: {"tests": 0, "seconds": 0.0, "cpu_s": 0.0})
    tests, counts = [], {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in ElementTree.parse(junit).getroot().iter("testsuite"):
        for kind in counts:
            counts[kind] += int(suite.get(kind, 0))
        for case in suite.iter("testcase"):
            seconds, cpu = float(case.get("time", 0)), _cpu_seconds(case)
            row = files[case.get("file")]
            row["tests"] += 1
            row["seconds"] += seconds
            row["cpu_s"] += cpu
            tests.append({"test": f"{case.get('file')}::{case.get('name')}", "seconds": round(seconds, 1), "cpu_s": round(cpu, 1)})
    by_file = sorted(({"file": f, **{k: round(v, 1) for k, v in row.items()}} for f, row in files.items()),
                     key=lambda row: -row["seconds"])
    return {"counts": counts, "files": by_file, "slowest": sorted(tests, key=lambda t: -t["seconds"])[:SLOWEST]}


def _cpu_seconds(case: ElementTree.Element) -> float:
    """The CPU seconds tests/conftest.py recorded for the test case (its process and the children it waited for)."""
    recorded = [float(p.get("value")) for p in case.iter("property") if p.get("name") == CPU_PROPERTY]
    if len(recorded) != 1:
        raise SystemExit(f"{case.get('file')}::{case.get('name')}: {len(recorded)} `{CPU_PROPERTY}` properties in the junit XML, not 1")
    return recorded[0]


def timed_run(arguments: list[str], run: str) -> dict:
    """The pytest of ARGUMENTS (shown as RUN), timed: its exit code, wall and CPU seconds (user + system of every
    process it ran), and what outcomes() finds in its junit XML report."""
    with tempfile.TemporaryDirectory(prefix="codemod-suite-cost-") as scratch:
        junit = Path(scratch) / "junit.xml"
        report = [f"--junitxml={junit}", "-o", "junit_family=xunit1"]  # xunit1: each test case names its file
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        exit_code = subprocess.run([sys.executable, "-m", "pytest", *arguments, *report], cwd=REPO).returncode
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if exit_code == NO_TESTS or not junit.is_file():
            raise SystemExit(f"`{run}` ran no test (pytest exit {exit_code}): nothing recorded")
        try:
            found = outcomes(junit)
        except ElementTree.ParseError as error:  # pytest ended before it finished writing the report
            raise SystemExit(f"`{run}` left an unreadable junit XML report ({error}; pytest exit {exit_code}): nothing recorded") from None
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exit_code": exit_code, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), **found}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test_files", nargs="*", metavar="TEST_FILE", help="Time these test files alone.")
    parser.add_argument("--again", action="store_true", help="Then run the command a second time and record it too.")
    options = parser.parse_args(argv)
    arguments = [*pytest_arguments(readme_setup_lines()[1]), *options.test_files]
    run = shlex.join(["python", "-m", "pytest", *arguments])  # recorded as run, less the report's options
    load_before = os.getloadavg()[0]
    first = timed_run(arguments, run)
    again = timed_run(arguments, run) if options.again else None
    figures = {"command": run, "covered": options.test_files or "the whole suite", "suite_files": len(list(TESTS.glob("test_*.py"))), **first}
    if again is not None:
        figures["again"] = {key: again[key] for key in ("exit_code", "wall_s", "cpu_s", "counts")}
    write_result(Path(__file__).name, RESULT, load_before, figures)
    return first["exit_code"] or (again["exit_code"] if again else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
