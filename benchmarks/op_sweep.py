"""Every op `codemod ops --bypassable` lists, bypassed with full verification and reverted, each on a fresh copy.

    python benchmarks/op_sweep.py TREE [--only OP ...] [--no-build] [--json] [--rows FILE [--resume]] [--record LABEL]

Counts: bypassed + verified + reverted byte for byte / refused (exit 2, or the tree's codegen or g++ rejecting the
bytes the bypass would write, the tree left as it was), by reason / failed (exit 1 from the verification, or a revert
that is not byte-identical), the files verification did not compile and why, the same per
source file defining the op's CPU kernel (as `explain` names it), seconds per op, the date and the load average before
and after. Figures for a person (docs/real-trees.md); nothing here asserts
a time. --record LABEL writes the totals to benchmarks/results/op_sweep-LABEL.json (dated, with the machine and the
load) for docs/generate.py to render; --resume takes the ops --rows already holds from it. A tree from
`codemod tree from-torch` laid over real native sources is the test that matters: see docs/real-trees.md for how to
lay one out.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
NO_SOURCE = "(kernel source not named)"  # explain failed, or a row from before rows named it
# The tree's codegen or g++ rejecting the bytes the bypass would write, said before writing (exit 1): a refusal with
# their reason, when the tree is left as it was. Not torchgen still generating the op's public names: codemod's own
# failure, said the same way.
REFUSED_BEFORE_WRITING = re.compile(r"the result of `bypass [^`]+` is refused by the tree's |in the result of `bypass [^`]+`, "
                                    r"the code the bypass leaves does not compile")
GXX_ERROR = re.compile(r"\berror: (.+)")


def codemod(*args: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "codemod", *args, "--json"], capture_output=True, text=True)
    if run.returncode < 0:  # a signal killed codemod itself (the check runs the kernels in a child process of its own)
        return run.returncode, {"error": f"codemod was killed by {signal.Signals(-run.returncode).name} after: "
                                         f"{(run.stderr.strip().splitlines() or ['no output'])[-1].strip()}"}
    try:
        return run.returncode, json.loads(run.stdout)
    except ValueError:
        return run.returncode, {"error": (run.stderr.strip().splitlines() or ["no output"])[-1]}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and ".codemod" not in p.parts}


def sweep_one(tree: Path, op: str, scratch: Path, extra: list[str]) -> dict:
    copy = scratch / op
    shutil.copytree(tree, copy, symlinks=True, ignore=shutil.ignore_patterns(".codemod", ".codemod.lock", "__pycache__"))
    source = kernel_source(copy, op)
    pristine = snapshot(copy)
    started = time.perf_counter()
    code, bypass = codemod("bypass", op, "--tree", str(copy), *extra)
    bypass_seconds = time.perf_counter() - started
    row = {"op": op, "source": source, "bypass_exit": code, "bypass_seconds": round(bypass_seconds, 1)}
    if code != 0:
        row["reason"] = bypass.get("error", "")
        untouched = snapshot(copy) == pristine
        row["outcome"] = "refused" if code == 2 or (untouched and REFUSED_BEFORE_WRITING.match(row["reason"])) else "failed"
        return row
    row["verified"] = bypass.get("verified", [])
    row["not_compiled"] = bypass.get("unchecked", [])  # "path: why", as verification names them
    started = time.perf_counter()
    code, revert = codemod("revert", op, "--tree", str(copy))
    row["revert_seconds"] = round(time.perf_counter() - started, 1)
    identical = code == 0 and snapshot(copy) == pristine
    row["outcome"] = "bypassed" if identical else "failed"
    if not identical:
        row["reason"] = revert.get("error", "revert left the tree different from the copy it started from")
    shutil.rmtree(copy)
    return row


def kernel_source(tree: Path, op: str) -> str:
    """The native source defining the op's CPU kernel (TORCH_IMPL_FUNC), as `explain` names it; the rows are
    totalled per source file for docs/real-trees.md."""
    _, explained = codemod("explain", op, "--tree", str(tree))
    at = explained.get("structured_kernel", {}).get("impl", {}).get("at", "")
    return at.rsplit(":", 1)[0] or NO_SOURCE


def by_source(rows: list[dict]) -> dict[str, dict]:
    """Per kernel source file: the ops bypassed, verified and reverted; refused, each with its reason (as the totals
    group it); failed (their reasons are the summary's `failed`)."""
    files: dict[str, dict] = {}
    for row in rows:
        entry = files.setdefault(row.get("source", NO_SOURCE), {"bypassed": [], "refused": {}, "failed": []})
        if row["outcome"] == "refused":
            entry["refused"][row["op"]] = reason_class(row["reason"])
        else:
            entry[row["outcome"]].append(row["op"])
    return dict(sorted(files.items()))


def sweep_load(rows: list[dict], at_start: tuple[float, ...]) -> dict | None:
    """The 1-min load average before the sweep, after it and at most; None when rows resumed from --rows do not
    record theirs (an earlier version of this script), rather than the load of the moment it resumed."""
    if any("load_average" not in row for row in rows):
        return None
    loads = [row["load_average"] for row in rows] or [round(os.getloadavg()[0], 2)]
    return {"before": round(at_start[0], 2), "after": loads[-1], "max": max(loads)}


def reason_class(reason: str) -> str:
    """The reason without the op's own names, so refusals group: g++'s first error, else the text after the last ': '
    up to ';' (symbols left undefined: their count and names left out)."""
    first_error = GXX_ERROR.search(reason)
    if first_error is not None:
        return f"g++: {first_error[1]}"[:100]
    reason = re.sub(r"\b\d+ symbols", "N symbols", reason.split(" (`", 1)[0])  # the symbols named, by count: one class
    return reason.rsplit(": ", 1)[-1].split(";")[0].strip()[:100] or "(no message)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--only", nargs="*", default=None, help="these ops instead of every bypassable one")
    parser.add_argument("--no-build", action="store_true", help="skip the compile-and-check gate before applying")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rows", type=Path, help="append each op's row to this JSON-lines file as it ends")
    parser.add_argument("--resume", action="store_true", help="with --rows: the ops it holds are not run again")
    parser.add_argument("--record", metavar="LABEL", help="write the totals to benchmarks/results/op_sweep-LABEL.json")
    args = parser.parse_args()
    code, listing = codemod("ops", "--tree", str(args.tree), "--bypassable")
    if code != 0:
        print(f"ops failed: {listing.get('error')}", file=sys.stderr)
        return 2
    ops = args.only or [row["op"] for row in listing["ops"] if row["bypassable"]]
    load_at_start = os.getloadavg()
    rows = [json.loads(line) for line in args.rows.read_text().splitlines()] if args.resume and args.rows and args.rows.is_file() else []
    rows = [row for row in rows if row["op"] in ops]
    with tempfile.TemporaryDirectory(prefix="op_sweep-") as scratch:
        for op in [op for op in ops if op not in {row["op"] for row in rows}]:
            row = sweep_one(args.tree, op, Path(scratch), ["--no-build"] if args.no_build else [])
            row["load_average"] = round(os.getloadavg()[0], 2)  # as the op ended: a resumed sweep's load is its rows'
            rows.append(row)
            if args.rows:
                with args.rows.open("a") as out:
                    out.write(json.dumps(row) + "\n")
            print(f"{op:24} {row['outcome']:9} bypass {row['bypass_seconds']:6.1f} s  {row.get('reason', '')[:110]}", file=sys.stderr)
    counts = Counter(row["outcome"] for row in rows)
    refused = Counter(reason_class(row["reason"]) for row in rows if row["outcome"] == "refused")
    failed = {row["op"]: row["reason"] for row in rows if row["outcome"] == "failed"}
    seconds = [row["bypass_seconds"] + row.get("revert_seconds", 0) for row in rows]
    not_compiled = Counter(reason_class(item) for row in rows for item in row.get("not_compiled", []))
    swept = {row["op"] for row in rows}
    summary = {
        "tree": str(args.tree),
        "date": datetime.date.today().isoformat(),
        "load_average": sweep_load(rows, load_at_start),
        "listed": sum(1 for row in listing["ops"] if row["bypassable"]),  # --only sweeps part of them
        "not_swept": [row["op"] for row in listing["ops"] if row["bypassable"] and row["op"] not in swept],
        "ops": len(rows),
        "bypassed_verified_reverted": counts["bypassed"],
        "with_files_not_compiled": sum(1 for row in rows if row.get("not_compiled")),
        "not_compiled": dict(not_compiled),
        "refused": dict(refused),
        "failed": failed,
        "by_source": by_source(rows),
        "seconds_per_op": {"median": sorted(seconds)[len(seconds) // 2] if seconds else 0, "max": max(seconds, default=0)},
        "rows": rows,
    }
    if args.record:
        record(args.record, summary)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"{len(rows)} ops: {counts['bypassed']} bypassed + verified + reverted byte for byte, "
              f"{counts['refused']} refused, {counts['failed']} failed")
        for reason, count in not_compiled.most_common():
            print(f"  a file not compiled ({count}): {reason}")
        for reason, count in refused.most_common():
            print(f"  refused ({count}): {reason}")
        for op, reason in failed.items():
            print(f"  failed {op}: {reason[:200]}")
        for source, entry in summary["by_source"].items():
            print(f"  {source}: {len(entry['bypassed'])} bypassed, {len(entry['refused'])} refused, {len(entry['failed'])} failed")
        print(f"seconds per op (bypass + revert): median {summary['seconds_per_op']['median']:.1f}, max {summary['seconds_per_op']['max']:.1f}; "
              f"{summary['date']}, load average {summary['load_average'] or 'not recorded by the resumed rows'}")
    return 0 if not failed else 1


def record(label: str, summary: dict) -> None:
    import torch
    from tutorial_steps import machine  # benchmarks/: the script's own directory

    path = RESULTS / f"op_sweep-{label}.json"
    kept = {key: value for key, value in summary.items() if key not in ("rows", "tree")}
    path.write_text(json.dumps({
        "script": Path(__file__).name, "machine": machine(), "cpus": os.cpu_count(),
        "torch": torch.__version__, **kept,
    }, indent=1) + "\n")
    print(f"wrote {path}; render it into the pages with `python docs/generate.py`", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
