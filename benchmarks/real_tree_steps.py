"""Where the time of `codemod bypass OP` goes on a real tree: cold and warm, wall and CPU, with the load average.

    python benchmarks/real_tree_steps.py [--op mul] [--sources DIR] [--record]

Builds a tree from the installed torch wheel (`codemod tree from-torch`), lays the files of DIR over its
aten/src/ATen/native/ (PyTorch's own BinaryOps.cpp, read from pytorch/pytorch: never committed), and runs
`bypass OP` three times, each in a fresh process on a fresh copy of the tree:

- first ever: an empty build cache (the regenerated headers' PCH is made in this run; the libtorch one is not,
  the cache's first harness compile leaves a note that the next one makes it);
- cold: a cache holding only the precompiled headers (what two earlier ops leave: between the two runs, another op's
  bypass, not measured, made the libtorch one), so the op's own compiles, codegen and checks all run;
- warm: the cache the cold run filled.

For each: the command's steps (its --json `seconds`), every child process by kind (wall, CPU), codemod's own
Python CPU, and the load average before and after. CPU seconds are the figure to compare on a shared machine
(load does not inflate them much); wall is only meaningful at a load average below the core count. Figures for
a person; nothing here asserts a time. With --record, the figures go to benchmarks/results/real_tree_steps.json,
which docs/generate.py renders into the README and docs/real-trees.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from codemod.capture.fromtorch import write_tree_from_torch

REPO = Path(__file__).resolve().parent.parent
NATIVE = "aten/src/ATen/native"
RESULT = REPO / "benchmarks" / "results" / "real_tree_steps.json"
PRIMER = "div"  # bypassed between the first and the cold run, not measured


def kind(args: list[str]) -> str:
    """A child process by what it does: `torchgen`, `g++ -c harness.cpp`, `g++ -fsyntax-only BinaryOps.cpp`..."""
    if "torchgen.gen" in args:
        return "torchgen --generate headers (whole yaml)" if "--generate" in args else "torchgen (op's entries)"
    if any("gen_autograd" in a for a in args):
        return "autograd codegen"
    if "parse_native_yaml" in " ".join(args):
        return "torchgen's loader on the whole yaml"
    if Path(args[0]).name in ("g++", "c++", os.environ.get("CXX", "g++")):
        what = next((a for a in ("-M", "-E", "-fsyntax-only", "-shared", "-c", "c++-header") if a in args), "link")
        named = [Path(a).name for a in args if re.search(r"\.(cpp|h|o)$", a) and not a.startswith("-")]
        return f"g++ {what} {named[-1] if named else ''}".rstrip()
    return Path(args[0]).name


def measure_one(op: str, tree: Path) -> None:
    """In this process: `codemod bypass OP --json`, every child process's wall and CPU recorded (os.wait4)."""
    children: list[dict] = []
    started_at: dict[int, tuple[float, list[str]]] = {}
    lock = threading.Lock()
    popen_init, waitpid = subprocess.Popen.__init__, os.waitpid

    def init(self, args, *rest, **options):
        start = time.monotonic()
        popen_init(self, args, *rest, **options)
        with lock:
            started_at[self.pid] = (start, [str(a) for a in (args if isinstance(args, (list, tuple)) else [args])])

    def wait(pid, options):
        if pid <= 0:
            return waitpid(pid, options)
        got, status, usage = os.wait4(pid, options)
        if got == pid and pid in started_at:
            with lock:
                start, args = started_at.pop(pid)
            children.append({"kind": kind(args), "wall": time.monotonic() - start, "cpu": usage.ru_utime + usage.ru_stime})
        return got, status

    subprocess.Popen.__init__, os.waitpid = init, wait
    from codemod.cli.main import main

    load_before, start, own = os.getloadavg(), time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    out = tempfile.TemporaryFile("w+")
    saved = os.dup(1)
    os.dup2(out.fileno(), 1)  # the command's --json
    try:
        main(["-q", "bypass", op, "--tree", str(tree), "--json"], standalone_mode=False)
    except SystemExit as exit:
        code = exit.code
    else:
        code = 0
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
    now = resource.getrusage(resource.RUSAGE_SELF)
    out.seek(0)
    report = json.loads(out.read() or "{}")
    print(json.dumps({
        "exit": code, "wall": time.monotonic() - start, "load": [load_before, os.getloadavg()],
        "python_cpu": now.ru_utime + now.ru_stime - own.ru_utime - own.ru_stime,
        "steps": report.get("seconds", {}), "children": children, "error": report.get("error"),
    }))


def run(op: str, tree: Path, cache: Path, label: str) -> dict:
    copy = tree.parent / f"{label}-tree"
    shutil.copytree(tree, copy, symlinks=True)
    env = {**os.environ, "CODEMOD_BUILD_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    child = subprocess.run([sys.executable, __file__, "--measure-one", op, str(copy)], capture_output=True, text=True, env=env)
    if child.returncode != 0 or not child.stdout.strip():
        sys.exit(f"{label}: the measuring process failed:\n{child.stderr[-3000:]}")
    result = json.loads(child.stdout.strip().splitlines()[-1])
    if result["exit"] != 0:
        sys.exit(f"{label}: bypass {op} exited {result['exit']}: {result['error']}")
    return result


def summary(label: str, result: dict) -> dict:
    """A run's figures: wall, CPU (codemod's Python and every child's), the load, the steps, the children by kind."""
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for child in result["children"]:
        row = by_kind[child["kind"]]
        row[0] += 1
        row[1] += child["wall"]
        row[2] += child["cpu"]
    before, after = result["load"]
    return {
        "run": label, "wall_s": round(result["wall"], 1),
        "cpu_s": round(result["python_cpu"] + sum(c["cpu"] for c in result["children"]), 1),
        "python_cpu_s": round(result["python_cpu"], 1), "load_average": {"before": before[0], "after": after[0]},
        "steps": result["steps"],
        "children": [{"kind": name, "count": count, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
                     for name, (count, wall, cpu) in sorted(by_kind.items(), key=lambda item: -item[1][2]) if cpu >= 0.05],
    }


def show(run: dict) -> None:
    load = run["load_average"]
    print(f"\n{run['run']}: wall {run['wall_s']:.1f} s, CPU {run['cpu_s']:.1f} s (codemod's Python {run['python_cpu_s']:.1f} s); "
          f"load average {load['before']:.1f} before, {load['after']:.1f} after (1 min)")
    print("  steps (wall): " + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in run["steps"].items()))
    for child in run["children"]:
        print(f"  {child['count']:3d} x {child['kind']:48} wall {child['wall_s']:7.1f} s  CPU {child['cpu_s']:7.1f} s")


def record(op: str, sources: list[str], runs: list[dict], load_before: float) -> None:
    import torch
    from tutorial_steps import machine  # benchmarks/: the script's own directory

    RESULT.write_text(json.dumps({
        "script": Path(__file__).name, "date": datetime.date.today().isoformat(), "machine": machine(),
        "cpus": os.cpu_count(), "torch": torch.__version__,
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
        "op": op, "sources": sources, "runs": runs,
    }, indent=1) + "\n")
    print(f"wrote {RESULT.relative_to(REPO)}; render it into the pages with `python docs/generate.py`", file=sys.stderr)


def native_files(directory: Path) -> dict[str, Path]:
    """The files under DIRECTORY (PyTorch's own, as they sit under its native/: `sparse/SparseCsrTensorMath.cpp` in a
    subdirectory), by that path."""
    return {path.relative_to(directory).as_posix(): path for path in sorted(directory.rglob("*")) if path.is_file()}


def laid_over(tree: Path, native_sources: Path, files: dict[str, Path]) -> Path:
    """A `tree from-torch` tree at TREE around NATIVE_SOURCES, with FILES (PyTorch's own, by their path under native/)
    laid over its native sources."""
    write_tree_from_torch(tree, native_sources)
    for relative, source in files.items():
        (tree / NATIVE / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tree / NATIVE / relative)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="mul")
    parser.add_argument("--sources", type=Path, help=f"files laid over the tree's {NATIVE}/, each at its path under DIR (PyTorch's own BinaryOps.cpp)")
    parser.add_argument("--record", action="store_true", help=f"write the figures to {RESULT.relative_to(REPO)}")
    parser.add_argument("--measure-one", nargs=2, metavar=("OP", "TREE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_one:
        measure_one(args.measure_one[0], Path(args.measure_one[1]))
        return
    load_before = os.getloadavg()[0]
    sources = native_files(args.sources) if args.sources else {}
    with tempfile.TemporaryDirectory(prefix="codemod-bench-") as scratch:
        tree = laid_over(Path(scratch) / "tree", REPO / "target_tree", sources)
        cache = Path(scratch) / "cache"
        runs = [summary("first ever (empty build cache)", run(args.op, tree, cache, "first"))]
        # another op's bypass: the cache's second harness compile, which makes the libtorch PCH the first one noted
        run(PRIMER if args.op != PRIMER else "mul", tree, cache, "primer")
        # in place: a PCH of generated headers is keyed by their path, which is in the cache
        for entry in cache.iterdir():
            if not entry.name.startswith(("pch-", ".pch-")):  # a PCH, the note that one is wanted, its lock
                (shutil.rmtree if entry.is_dir() else Path.unlink)(entry)
        runs.append(summary("cold (a cache holding only the precompiled headers)", run(args.op, tree, cache, "cold")))
        runs.append(summary("warm (the cache the cold run filled)", run(args.op, tree, cache, "warm")))
    for each in runs:
        show(each)
    if args.record:
        record(args.op, list(sources), runs, load_before)


if __name__ == "__main__":
    main()
