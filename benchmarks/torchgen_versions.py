"""`bypass` and `revert` on trees built from several torchgen releases.

For the installed torch and each torch wheel in the wheel cache ($CODEMOD_WHEEL_CACHE,
default cpp_ext/wheels/), build a tree with `codemod tree from-torch --torchgen WHEEL`
and our target_tree/'s native sources; for each op, on a fresh copy: `bypass OP --no-build`
(verified by that release's own codegen), `revert OP`, and check that every byte is back.
Prints one line per release and op: ok/failed and seconds. Figures for a person.

    python benchmarks/torchgen_versions.py [--ops mul,div] [VERSION ...]

A VERSION not in the cache is downloaded first (pip download --no-deps, the whole wheel).
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

from codemod.capture.fromtorch import REPO_TARGET_TREE, torch_wheels, wheel_cache


def download(version: str, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-d", str(directory), f"torch=={version}"]
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)


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
    parser.add_argument("versions", nargs="*", help="torch releases to download if not cached (default: the cached ones)")
    parser.add_argument("--ops", default="mul,div")
    args = parser.parse_args()
    cache = wheel_cache()
    for version in args.versions:
        if version not in torch_wheels(cache):
            download(version, cache)
    wanted = torch_wheels(cache)
    releases: dict[str, Path | None] = {f"{torch.__version__} (installed)": None}
    releases.update((v, w) for v, w in wanted.items() if not args.versions or v in args.versions)
    print(f"wheel cache: {cache}")
    for release, wheel in releases.items():
        with tempfile.TemporaryDirectory(prefix="codemod-versions-") as scratch:
            pristine = Path(scratch, "pristine")
            command = ["tree", "from-torch", str(pristine), "--sources", str(REPO_TARGET_TREE)]
            made, _ = codemod(*command, *(["--torchgen", str(wheel)] if wheel else []))
            if made.returncode != 0:
                print(f"torchgen {release:18} failed  tree from-torch: {made.stderr.strip()}", flush=True)
                continue
            for op in args.ops.split(","):
                print(f"torchgen {release:18} {op:5} {roundtrip(pristine, Path(scratch, op), op)}", flush=True)


if __name__ == "__main__":
    main()
