"""`bypass` and `revert` on trees built from several torchgen releases.

For the installed torch and each VERSION (default: the releases tests/test_torchgen_versions.py runs), build a tree
with `codemod tree from-torch --torchgen TORCHGEN` and our target_tree/'s native sources; for each op, on a fresh copy:
`bypass OP --no-build` (verified by that release's own codegen), `revert OP`, and check that every byte is back.
Prints one line per release and op: ok/failed and seconds. Figures for a person.

    python benchmarks/torchgen_versions.py [--ops mul,div] [VERSION ...]

A VERSION's torchgen is unpacked once from its wheel into the wheel cache (tests/torchgen_releases.py), downloading the
wheel (pip download --no-deps) if needed.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's codemod and tests, whatever is installed

from codemod.capture.fromtorch import REPO_TARGET_TREE  # noqa: E402
from tests.torchgen_releases import RELEASES, torchgen_of, wheel_cache  # noqa: E402


def codemod(*args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the CLI; its wall seconds and CPU seconds (its own and its subprocesses': the machine may be shared)."""
    started, cpu_before = time.perf_counter(), _children_cpu()
    run = subprocess.run([sys.executable, "-m", "codemod", *args], capture_output=True, text=True)
    return run, f"{time.perf_counter() - started:5.1f} s ({_children_cpu() - cpu_before:4.1f} s CPU)"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def roundtrip(pristine: Path, work: Path, op: str) -> str:
    """Bypass and revert OP on a copy of PRISTINE; one line of results."""
    shutil.copytree(pristine, work)
    bypass, bypass_seconds = codemod("bypass", op, "--tree", str(work), "--no-build", "--json")
    if bypass.returncode != 0:
        return f"failed  bypass exit {bypass.returncode} after {bypass_seconds}: {bypass.stderr.strip().splitlines()[-1:]}"
    report = json.loads(bypass.stdout)
    steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in report["seconds"].items())
    revert, revert_seconds = codemod("revert", op, "--tree", str(work))
    if revert.returncode != 0:
        return f"failed  revert exit {revert.returncode}: {revert.stderr.strip().splitlines()[-1:]}"
    if files(work) != files(pristine):
        return "failed  revert left the tree different from before the bypass"
    return f"ok      bypass {bypass_seconds} [{steps}; {len(report['verified'])} checks verified], revert {revert_seconds}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(RELEASES), help=f"torch releases (default: {' '.join(RELEASES)})")
    parser.add_argument("--ops", default="mul,div")
    args = parser.parse_args()
    releases: dict[str, Path | None] = {f"{torch.__version__} (installed)": None}
    releases.update((version, torchgen_of(version)) for version in args.versions)
    print(f"wheel cache: {wheel_cache()}")
    for release, torchgen in releases.items():
        with tempfile.TemporaryDirectory(prefix="codemod-versions-") as scratch:
            pristine = Path(scratch, "pristine")
            command = ["tree", "from-torch", str(pristine), "--sources", str(REPO_TARGET_TREE)]
            made, _ = codemod(*command, *(["--torchgen", str(torchgen)] if torchgen else []))
            if made.returncode != 0:
                print(f"torchgen {release:18} failed  tree from-torch: {made.stderr.strip()}", flush=True)
                continue
            for op in args.ops.split(","):
                print(f"torchgen {release:18} {op:5} {roundtrip(pristine, Path(scratch, op), op)}", flush=True)


if __name__ == "__main__":
    main()
