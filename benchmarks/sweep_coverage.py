"""The denominator of the op sweeps: every structured op with a CPU kernel in the installed torch's yaml, whether we
hold PyTorch's own kernel source of it, and which sweep took it there.

    python benchmarks/sweep_coverage.py SOURCES [SOURCES ...] [--record]

The denominator is what `codemod ops` says of a tree from the installed wheel with no native source: every op it
refuses only for want of its kernel source ("kernel source not in the tree"). Each SOURCES is a directory of PyTorch's
own files, as benchmarks/real_tree_steps.py --sources takes them (read from pytorch/pytorch into a scratch directory,
never committed): laid together over a tree from the wheel with none of target_tree/'s sources, the ops `ops
--bypassable` lists there are those whose kernel source is held; the rest of the denominator is named as not had.
Of the held ones, those a recorded sweep took on one of these files (benchmarks/results/op_sweep-LABEL.json, whose
`by_source` names each op under its kernel file) are named with the sweep; a record made before sweeps kept names
holds counts only and is named as such. With --record, the result goes to benchmarks/results/sweep_coverage.json,
which docs/generate.py renders into docs/real-trees.md. Nothing here asserts anything of the code.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from op_sweep import RESULTS, codemod  # benchmarks/: the script's own directory
from real_tree_steps import NATIVE, laid_over, native_files
from tutorial_steps import write_result

NEEDS_ITS_SOURCE = "kernel source not in the tree"  # what `ops` says of an op whose structured kernel file is missing


def listing(files: dict[str, Path]) -> list[dict]:
    """`ops` on a tree from the installed wheel whose native sources are FILES alone."""
    with tempfile.TemporaryDirectory(prefix="sweep-coverage-") as scratch:
        (Path(scratch) / "none").mkdir()
        code, listed = codemod("ops", "--tree", str(laid_over(Path(scratch) / "tree", Path(scratch) / "none", files)))
    if code != 0:
        sys.exit(f"ops failed: {listed.get('error')}")
    return listed["ops"]


def swept_by_name(real_files: set[str]) -> tuple[dict[str, str], list[str]]:
    """The ops each recorded sweep took on one of REAL_FILES, with its label; and the labels of records that keep counts
    only."""
    named: dict[str, str] = {}
    counts_only = []
    for path in sorted(RESULTS.glob("op_sweep-*.json")):
        label, record = path.stem.removeprefix("op_sweep-"), json.loads(path.read_text())
        if "by_source" not in record:
            counts_only.append(label)
        for source, entry in record.get("by_source", {}).items():
            if source.removeprefix(f"{NATIVE}/") in real_files:
                for op in (*entry["bypassed"], *entry["refused"], *entry["failed"]):
                    named.setdefault(op, label)
    return named, counts_only


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", type=Path, metavar="SOURCES")
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/sweep_coverage.json")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    found = [native_files(directory) for directory in args.sources]
    files = dict(sorted(item for each in found for item in each.items()))
    if len(files) != sum(map(len, found)):
        sys.exit("two SOURCES directories hold a file at the same path: give each file once")
    wanted = sorted(row["op"] for row in listing({}) if row["reason"] == NEEDS_ITS_SOURCE)
    held = sorted(row["op"] for row in listing(files) if row["bypassable"] and row["op"] in wanted)
    named, counts_only = swept_by_name(set(files))
    figures = {
        "denominator": len(wanted),
        "files": list(files),
        "held": len(held),
        "swept_by_name": {op: named[op] for op in held if op in named},
        "sweeps_keeping_counts_only": counts_only,
        "source_not_had": [op for op in wanted if op not in held],
    }
    print(f"{len(wanted)} structured ops with a CPU kernel: PyTorch's own kernel source of {len(held)} held "
          f"({len(figures['swept_by_name'])} of them swept by a record naming its ops), of {len(figures['source_not_had'])} not")
    if args.record:
        write_result(Path(__file__).name, RESULTS / "sweep_coverage.json", load_before, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
