"""Time the dispatcher path against the bypass path, both in one process, and count instructions.

Wall time: the harness alternates rounds of `at::OP(a, b)` and the bypass forward
(`codemod_ext_OP::OP(a, b)`) in one process and reports each path's median ns/call.
Instructions: callgrind runs the harness doing N1 and N2 calls of one path; the
difference over N2 - N1 cancels start-up and first-call initialisation.
The numbers are figures for a human, never assertions.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codemod.build import run_json_lines
from codemod.errors import BadInput, VerificationFailed

PATHS = ("dispatch", "bypass")
SIZES = (1, 2, 1_000, 1_000_000)
_TOTALS = re.compile(r"^totals:\s*(\d+)", re.MULTILINE)


def wall_times(executable: Path, sizes: tuple[int, ...] = SIZES) -> list[dict]:
    rows = run_json_lines([str(executable), "time", *map(str, sizes)])
    for row in rows:
        row["ratio"] = row["dispatch_ns"] / row["bypass_ns"] if row["bypass_ns"] else None
    return rows


def _callgrind_total(executable: Path, path: str, calls: int, scratch: Path, client_requests: bool) -> int:
    out = scratch / f"callgrind.{path}.{calls}"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if client_requests:
        command.append("--instr-atstart=no")  # the harness switches it on around its loop
    command += [str(executable), "calls", path, str(calls)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not out.is_file():
        raise VerificationFailed(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr.strip()[-2000:]}")
    match = _TOTALS.search(out.read_text(errors="replace"))
    if match is None:
        raise VerificationFailed(f"{out}: no `totals:` line in callgrind's output")
    return int(match.group(1))


def instructions(executable: Path, n1: int = 1_000, n2: int = 3_000) -> dict[str, dict]:
    """Instructions per call of each path: (total(N2) - total(N1)) / (N2 - N1)."""
    if shutil.which("valgrind") is None:
        raise BadInput("valgrind not found; install it or pass --no-callgrind")
    probe = run_json_lines([str(executable), "calls", "dispatch", "0"])
    client_requests = bool(probe and probe[0].get("client_requests"))
    runs = [(path, n) for path in PATHS for n in (n1, n2)]
    with tempfile.TemporaryDirectory(prefix="codemod-callgrind-") as scratch, ThreadPoolExecutor(len(runs)) as pool:
        totals = dict(zip(runs, pool.map(lambda run: _callgrind_total(executable, *run, Path(scratch), client_requests), runs)))
    return {
        path: {
            "n1": n1, "n2": n2, "total_n1": totals[path, n1], "total_n2": totals[path, n2],
            "per_call": (totals[path, n2] - totals[path, n1]) / (n2 - n1),
        }
        for path in PATHS
    }


def table(op: str, times: list[dict], counts: dict[str, dict] | None) -> str:
    lines = [
        f"{op}: dispatcher `at::{op}(a, b)` vs bypass `codemod_ext_{op}::{op}(a, b)` (float32, one process, interleaved)",
        f"{'elements':>10}  {'dispatcher ns/call':>18}  {'bypass ns/call':>14}  {'ratio':>6}",
    ]
    for row in times:
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] else "-"
        lines.append(f"{row['numel']:>10,}  {row['dispatch_ns']:>18,.1f}  {row['bypass_ns']:>14,.1f}  {ratio:>6}")
    if counts:
        d, b = counts["dispatch"]["per_call"], counts["bypass"]["per_call"]
        lines.append(
            f"callgrind, 2 elements, ({counts['dispatch']['n2']:,} - {counts['dispatch']['n1']:,} calls): "
            f"dispatcher {d:,.0f} instructions/call, bypass {b:,.0f} instructions/call ({d / b:.2f}x)"
        )
    return "\n".join(lines)
