"""What verification costs on a slim tree: `bypass OP --no-build` on fresh copies of target_tree/ (every bypass its journals record reverted), first with an
empty private build cache (every header generation and compile runs), then with the cache the first run filled
(generated headers found by their inputs, compiles by their bytes and what they read).

Prints, per run, the wall time of the whole command and of its verify step, the CPU time of the command and its
children, and the load average, which on a shared machine says how far apart wall and CPU time may be. Figures
for a person; nothing here asserts a time.

    python benchmarks/verify_cost.py [OP]
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codemod.apply.journal import pristine_copy

REPO = Path(__file__).resolve().parent.parent


def bypass(tree: Path, op: str, cache: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "codemod", "bypass", op, "--tree", str(tree), "--no-build", "--json"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "CODEMOD_BUILD_CACHE": str(cache)},
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    seconds = json.loads(result.stdout)["seconds"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"  wall {wall:6.1f} s (verify {seconds.get('verify', 0):6.1f} s), CPU {cpu:6.1f} s, load average {load}", flush=True)


def main(op: str) -> None:
    with tempfile.TemporaryDirectory(prefix="codemod-verify-cost-") as scratch:
        cache = Path(scratch, "cache")
        for label in ("empty build cache", "the cache the first run filled"):
            tree = pristine_copy(REPO / "target_tree", Path(scratch, label.replace(" ", "-"), "tree"))
            print(f"bypass {op} --no-build on a fresh copy of target_tree/, {label}:")
            bypass(tree, op, cache)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "mul")
