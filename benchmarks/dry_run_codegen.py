"""What the codegen's verdict on the planned bytes (verify.codegen_ahead) costs `bypass OP --dry-run` on TREE: with a
private, empty build cache (cold: the tree's autograd codegen and torchgen run), then again (their clean runs kept by
their inputs), with the load average. Figures for a person; nothing here asserts a time.

    python benchmarks/dry_run_codegen.py TREE [OP]     # e.g. a tree from `codemod tree from-torch DEST`
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time


def dry_run(tree: str, op: str, cache: str) -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "codemod", "-q", "bypass", op, "--dry-run", "--tree", tree],
                   env={**os.environ, "CODEMOD_BUILD_CACHE": cache}, capture_output=True, check=True)
    return time.monotonic() - start


def main(tree: str, op: str = "mul") -> None:
    with tempfile.TemporaryDirectory(prefix="codemod-dry-run-codegen-") as cache:
        cold, cached = dry_run(tree, op, cache), dry_run(tree, op, cache)
    print(f"bypass {op} --dry-run on {tree}: {cold:.1f} s with the verdict cold, {cached:.1f} s cached "
          f"(ratio {cold / cached:.2f}); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
