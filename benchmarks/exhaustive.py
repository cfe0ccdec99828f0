"""The suite's sampled tests in full: every item each one draws a sample of, and the hypothesis tests' larger budget.

    python benchmarks/exhaustive.py [TEST ...] [--seed N] [--record]

Runs pytest (on the suite's xdist workers; it collects in this process first, to know what each test draws from) on
the tests marked `sampled` (tests/sampling.py) under TEST (default: tests/), with --sample-all: every ordered pair of
ops in every pair of modes, every op stacked, every signature class in one verified bypass, every layout the issues
named and 100 drawn ones, every op `ops` lists dry-run, every op against torch, 30 spoiled journals, logs and reports
each, every crash point, every math op's dry run. Per test: how many
items (or hypothesis examples) ran, which failed and why, seconds. Takes hours at full load: run it with `nice`.
--record merges each test's figures, with the date, the seed and the load, into benchmarks/results/exhaustive.json;
`python docs/generate.py` renders them into docs/layout.md and docs/safety.md. Stopped by SIGINT or SIGTERM (Ctrl-C,
`timeout 1h python benchmarks/exhaustive.py ...`), it records each test as far as it got: how many of its items ran,
of how many. Exits 1 if a test failed, 2 if stopped.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's codemod and tests, whatever is installed

import pytest  # noqa: E402

RESULT = REPO / "benchmarks" / "results" / "exhaustive.json"


class Outcomes:
    """A pytest plugin: per test function, its items, examples, failures and seconds."""

    def __init__(self) -> None:
        self.tests: dict[str, dict] = {}

    def row(self, nodeid: str) -> dict:
        return self.tests.setdefault(
            nodeid.split("[")[0],
            {"population": None, "examples": None, "collected": 0, "items": 0, "failed": [], "seconds": 0.0},
        )

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("sampled")
            if marker is not None:  # what the test draws from (a stack of them may be one item), or its budget
                row = self.row(item.nodeid)
                row.update(population=marker.kwargs.get("of"), examples=marker.kwargs.get("examples"))
                row["collected"] += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.row(report.nodeid)
        row["seconds"] = round(row["seconds"] + report.duration, 1)
        row["items"] += report.when == "call" or report.when == "setup" and not report.passed
        if report.failed:
            errors = [line[2:] for line in report.longreprtext.splitlines() if line.startswith("E ")]
            row["failed"].append(f"{report.nodeid.split('::')[-1]}: {(errors or ['(no message)'])[0].strip()[:200]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests", nargs="*", default=["tests"], help="test files or ids (default: tests/)")
    parser.add_argument("--seed", type=int, help="the seed of the tests' own random choices (default: random)")
    parser.add_argument("--record", action="store_true", help=f"merge the figures into {RESULT.relative_to(REPO)}")
    args = parser.parse_args()
    os.chdir(REPO)
    load_before, started = os.getloadavg()[0], time.monotonic()
    for stop in (signal.SIGINT, signal.SIGTERM):  # pytest ends the session, and the figures so far are recorded
        signal.signal(stop, signal.default_int_handler)
    outcomes = Outcomes()
    seed = ["--sample-seed", str(args.seed)] if args.seed is not None else []
    selected = ["-q", "-p", "no:cacheprovider", "--sample-all", *seed, "-m", "sampled", *args.tests]
    # What each test draws from, and how many items: collected here, in this process (xdist's workers, which run the
    # tests, collect for themselves, and this plugin sees only their reports).
    collected = pytest.main([*selected, "--collect-only", "-n", "0"], plugins=[outcomes])
    if collected != pytest.ExitCode.OK:
        print(f"collecting the tests: pytest exited {collected}", file=sys.stderr)
        return 2
    code = pytest.main(selected, plugins=[outcomes])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED):
        print(f"pytest exited {code}", file=sys.stderr)
        return 2
    from tests import sampling  # after pytest.main, which imports it as a plugin (to rewrite its asserts)

    ran_tests = {test: row for test, row in outcomes.tests.items() if row["items"]}  # a stopped run: those that began
    print(f"\nin full, sample seed {sampling.seed()}, {time.monotonic() - started:.0f} s:")
    for test, row in ran_tests.items():
        ran = f"{row['examples']} examples" if row["examples"] else f"all {row['population']} in {row['items']} items"
        stopped = f" (stopped: {row['items']} of {row['collected']} items ran)" if row["items"] < row["collected"] else ""
        print(f"  {test}: {ran}{stopped}, {len(row['failed'])} failed, {row['seconds']:.0f} s")
        print("".join(f"    {failure}\n" for failure in row["failed"]), end="")
    if args.record:
        record(ran_tests, sampling.seed(), load_before)
    if code == pytest.ExitCode.INTERRUPTED:
        return 2
    return 1 if any(row["failed"] for row in outcomes.tests.values()) else 0


def record(tests: dict[str, dict], seed: int, load_before: float) -> None:
    """Each test's row, dated, with the seed and the load, over what RESULT held for it."""
    import torch
    from tutorial_steps import machine  # benchmarks/: the script's own directory

    recorded = json.loads(RESULT.read_text()) if RESULT.is_file() else {"tests": {}}
    when = {"date": datetime.date.today().isoformat(), "seed": seed, "nice": os.nice(0),
            "load_average": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}}
    RESULT.write_text(json.dumps({
        "script": Path(__file__).name, "machine": machine(), "cpus": os.cpu_count(), "torch": torch.__version__,
        "tests": dict(sorted({**recorded["tests"], **{test: {**row, **when} for test, row in tests.items()}}.items())),
    }, indent=1) + "\n")
    print(f"wrote {RESULT.relative_to(REPO)}; render it into the pages with `python docs/generate.py`")


if __name__ == "__main__":
    sys.exit(main())
