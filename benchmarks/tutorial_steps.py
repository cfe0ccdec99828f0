"""The README's tutorial, timed step by step, and `bench mul` (plain and guarded): the figures docs/ shows.

    python benchmarks/tutorial_steps.py

Walks the tutorial (the set-up's bypass first, as a user does) twice on fresh copies of target_tree/ with one
private build cache: first empty (a fresh clone's first walk), then filled by that walk. Per command: wall seconds
and the CPU seconds (user + system) of its processes. Then `codemod bench mul --json` and `bench mul --guarded
--json` on a fresh copy. Writes benchmarks/results/tutorial_steps.json with the date, the machine and the load
average before and after; `python docs/generate.py` renders it into the pages. Takes minutes (cold compiles).
"""
from __future__ import annotations

import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs"))
sys.path.insert(0, str(REPO))

import generate  # noqa: E402  (docs/generate.py: the tutorial's steps and how a session is set up)

from codemod.measure import bench as bench_step  # noqa: E402

RESULT = generate.RESULTS / "tutorial_steps.json"


def readme_setup_lines() -> list[str]:
    """The lines of the README's set-up block (its first code block after `## Set up`), as .ci/run reads them: the
    main job, then the test command."""
    readme = (REPO / "README.md").read_text()
    return readme[readme.index("## Set up"):].split("```", 2)[1].strip("\n").splitlines()


def timed(command: str, cwd: Path, env: dict[str, str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    run = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"`{command}` exited {run.returncode}:\n{run.stdout}{run.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "stdout": run.stdout}


def walk(cache: Path) -> list[dict]:
    """Every command of the tutorial session, hidden set-up first, on a fresh copy, with CACHE as the build cache."""
    with tempfile.TemporaryDirectory(prefix="codemod-tutorial-steps-") as scratch:
        env = {**generate.session_environment(Path(scratch)), "CODEMOD_BUILD_CACHE": str(cache)}
        clone = generate.fresh_clone(Path(scratch), env)
        steps = generate.SESSIONS["tutorial"].steps.values()
        return [{"command": step.command, **timed(step.command, clone, env)} for step in steps]


def bench(cache: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="codemod-tutorial-bench-") as scratch:
        env = {**generate.session_environment(Path(scratch)), "CODEMOD_BUILD_CACHE": str(cache)}
        clone = generate.fresh_clone(Path(scratch), env)
        measured = {}
        for mode, flags in (("plain", ""), ("guarded", " --guarded")):
            document = json.loads(timed(f"codemod bench mul --tree ./target_tree --json{flags}", clone, env)["stdout"])
            for row in document["wall"]:
                row.pop("dispatch_rounds_ns", None), row.pop("bypass_rounds_ns", None), row.pop("guarded_rounds_ns", None)
            document.pop("executable", None)
            measured[mode] = document
        return measured


def machine() -> str:
    return bench_step.machine()["cpu"]


def write_result(script: str, result: Path, load_before: float, figures: dict) -> None:
    """RESULT: SCRIPT's FIGURES, with the date, the machine, the load average before (LOAD_BEFORE) and after, and
    torch's version."""
    import torch

    record = {
        "script": script,
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
        "torch": torch.__version__,
        **figures,
    }
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {result.relative_to(REPO)}; render it into the pages with `python docs/generate.py`")


def main() -> None:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="codemod-tutorial-cache-") as cache:
        cold = walk(Path(cache))
        warm = walk(Path(cache))
        benched = bench(Path(cache))
    steps = [
        {"command": c["command"], "cold": {k: c[k] for k in ("wall_s", "cpu_s")}, "warm": {k: w[k] for k in ("wall_s", "cpu_s")}}
        for c, w in zip(cold, warm)
    ]
    write_result(Path(__file__).name, RESULT, load_before, {"steps": steps, "bench": benched})


if __name__ == "__main__":
    main()
