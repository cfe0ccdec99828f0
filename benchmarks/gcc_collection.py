"""What g++'s garbage collection costs the compile check: its flags with COLLECT_LESS (compile_check.py) against
the same flags without it, g++'s default.

    python benchmarks/gcc_collection.py [OP] [--rounds N]

`bypass OP --no-build` (default mul) on fresh copies of target_tree/ (every recorded bypass reverted), each in an
empty build cache of its own, ROUNDS times (default 2) each way, alternating which runs first. Per run: the CPU of
the command and every process it waited for (user + system; g++ nearly all of it), its wall time, and the largest
peak memory of one of those processes. Then whether the flag changes what g++ writes: target_tree/'s BinaryOps.cpp
compiled both ways at one path (an object holds its source's path: the runs' objects differ by their scratch
directories alone), against the installed torch's headers. Writes benchmarks/results/gcc_collection.json;
`python docs/generate.py` renders it. Figures for a person; nothing asserts a time.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codemod.apply.journal import pristine_copy
from codemod.verify import compiler
from codemod.verify.compile_check import COLLECT_LESS, FLAGS

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs"))

import generate  # noqa: E402  (docs/generate.py: where results are kept)
from tutorial_steps import write_result  # noqa: E402  (benchmarks/: the script's own directory)

RESULT = generate.RESULTS / "gcc_collection.json"
# The CLI with COLLECT_LESS left out of the compile check's flags (read at each compile, so set before the command runs).
WITHOUT = (
    "import sys; from codemod.verify import compile_check as c; "
    "c.FLAGS = tuple(flag for flag in c.FLAGS if flag != c.COLLECT_LESS); "
    "from codemod.cli.main import main; sys.argv[0] = 'codemod'; main(prog_name='codemod')"
)


def bypass(op: str, scratch: Path, collect_less: bool) -> dict:
    """`bypass OP --no-build` on a fresh copy of target_tree/ in an empty build cache under SCRATCH."""
    tree = pristine_copy(REPO / "target_tree", scratch / "tree")
    cache = scratch / "cache"
    command = [sys.executable, *(["-m", "codemod"] if collect_less else ["-c", WITHOUT]), "bypass", op, "--tree", str(tree), "--no-build"]
    with open(scratch / "output.txt", "w") as output:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "CODEMOD_BUILD_CACHE": str(cache)})
        _, status, usage = os.wait4(process.pid, 0)  # the rusage of the command and of every process it waited for
        wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit((scratch / "output.txt").read_text())
    return {
        "collect_less": collect_less, "wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_mb": round(usage.ru_maxrss / 1024), "objects": len(list((cache / "syntax").glob("*.o"))),
    }


def same_object(scratch: Path) -> bool:
    """Whether g++ writes the same object for target_tree/'s BinaryOps.cpp with the compile check's flags as with them
    less COLLECT_LESS, at one path, against the installed torch's headers."""
    tree = pristine_copy(REPO / "target_tree", scratch / "tree")
    include = compiler.torch_dir() / "include"
    dirs = (tree / "aten/src", tree, include, include / "torch/csrc/api/include")
    written = []
    for flags in (FLAGS, tuple(flag for flag in FLAGS if flag != COLLECT_LESS)):
        command = [compiler.CXX, *flags, *(f"-I{d}" for d in dirs), str(tree / "aten/src/ATen/native/BinaryOps.cpp"), "-o", str(scratch / "object.o")]
        subprocess.run(command, check=True)
        written.append((scratch / "object.o").read_bytes())
    return written[0] == written[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("op", nargs="?", default="mul")
    parser.add_argument("--rounds", type=int, default=2, help="runs each way (default 2)")
    arguments = parser.parse_args()
    load_before = os.getloadavg()[0]
    rounds = []
    for number in range(arguments.rounds):
        runs = []
        for collect_less in ((True, False) if number % 2 == 0 else (False, True)):
            with tempfile.TemporaryDirectory(prefix="codemod-gcc-collection-") as scratch:
                runs.append(bypass(arguments.op, Path(scratch), collect_less))
            print(f"round {number + 1}, {'with' if collect_less else 'without'} {COLLECT_LESS}: {runs[-1]['cpu_s']} s CPU, "
                  f"{runs[-1]['wall_s']} s wall, {runs[-1]['peak_mb']} MB peak", flush=True)
        rounds.append(runs)
    with tempfile.TemporaryDirectory(prefix="codemod-gcc-collection-") as scratch:
        same = same_object(Path(scratch))
    print(f"BinaryOps.cpp's object with and without {COLLECT_LESS}: {'the same bytes' if same else 'different bytes'}")
    write_result(Path(__file__).name, RESULT, load_before, {"op": arguments.op, "flag": COLLECT_LESS, "rounds": rounds, "same_object": same})


if __name__ == "__main__":
    main()
