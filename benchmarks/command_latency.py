"""How long the commands people run all day take: the figures docs/measurements.md shows.

    python benchmarks/command_latency.py [--runs N]

On a fresh copy of target_tree/ (every recorded bypass reverted), with `codemod` running this checkout's code and
the usual build cache: `codemod --help`, `ops`, `explain mul`, then `status` once `mul` is bypassed (its journal
read and its callers checked), each whole; and `bench mul --size 2 --no-callgrind` until its timing starts (the
moment its build step says it is done: what remains is the timing itself). A first run of each, not counted, fills
what the cache lacks (a harness compile takes a minute); then N runs each (default 9): their median and fastest
wall time, and their median CPU time (user + system of the command's processes; not known for a part of bench). Writes
benchmarks/results/command_latency.json with the date, the machine and the load average before and after;
`python docs/generate.py` renders it into the pages. Figures for a person; nothing asserts a time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs"))

import generate  # noqa: E402  (docs/generate.py: how a session is set up)
from tutorial_steps import timed, write_result  # noqa: E402  (benchmarks/: the script's own directory)

RESULT = generate.RESULTS / "command_latency.json"
TREE = generate.TREE
WHOLE = ("codemod --help", f"codemod ops {TREE}", f"codemod explain mul {TREE}")
BYPASSED = f"codemod status {TREE}"  # once mul is bypassed
BENCH = f"codemod bench mul {TREE} --size 2 --no-callgrind"
TIMING_STARTS = "build: "  # bench's build step ends, on stderr, the moment before its timing starts


def until_timing_starts(command: str, cwd: Path, env: dict[str, str]) -> float:
    """Wall seconds from starting COMMAND (a bench) to the line saying its build is done."""
    start = time.monotonic()
    run = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    seconds = None
    for line in run.stderr:
        if seconds is None and line.startswith(TIMING_STARTS):
            seconds = time.monotonic() - start
    if run.wait() != 0 or seconds is None:
        raise SystemExit(f"`{command}` exited {run.returncode} without saying its build was done")
    return seconds


def figures(command: str, walls: list[float], cpus: list[float] | None, measured: str) -> dict:
    return {"command": command, "measured": measured, "wall_s": round(statistics.median(walls), 3), "wall_min_s": round(min(walls), 3),
            "cpu_s": round(statistics.median(cpus), 3) if cpus else None}


def whole(command: str, runs: int, cwd: Path, env: dict[str, str], measured: str = "the whole command") -> dict:
    timed(command, cwd, env)  # not counted: fills what the build cache lacks
    runs_of = [timed(command, cwd, env) for _ in range(runs)]
    return figures(command, [r["wall_s"] for r in runs_of], [r["cpu_s"] for r in runs_of], measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="counted runs of each command (default 9)")
    runs = parser.parse_args().runs
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="codemod-command-latency-") as scratch:
        env = generate.session_environment(Path(scratch))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: Python keeps codemod's bytecode after the first run
        clone = generate.fresh_clone(Path(scratch), env)
        commands = [whole(command, runs, clone, env) for command in WHOLE]
        until_timing_starts(BENCH, clone, env)  # not counted: fills what the build cache lacks
        benched = [until_timing_starts(BENCH, clone, env) for _ in range(runs)]
        commands.append(figures(BENCH, benched, None, "until its timing starts"))
        timed(f"codemod bypass mul {TREE} --no-verify", clone, env)
        commands.append(whole(BYPASSED, runs, clone, env, "the whole command, `mul` bypassed"))
    write_result(Path(__file__).name, RESULT, load_before, {"runs": runs, "commands": commands})

if __name__ == "__main__":
    main()
