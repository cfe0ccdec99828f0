"""The torchgen of other torch releases, for the tests and benchmarks that run them.

`torchgen_of(VERSION)` is the `torchgen/` package (with the codegen inputs under its `packaged/`) of torch VERSION's
wheel, unpacked once into the wheel cache ($CODEMOD_WHEEL_CACHE, default cpp_ext/wheels/) as torchgen-VERSION/torchgen,
a few MB. The wheel itself (about 540 MB) is downloaded with `pip download --no-deps` and deleted once its torchgen is
out. A pip whose configuration caps torch below VERSION (ours: "torch<=2.14.1") is retried without its configuration.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from codemod.capture.fromtorch import REPO_TARGET_TREE, extract_torchgen

RELEASES = ("2.14.1", "2.15.0")  # newer than the installed torch: their torchgen generates for other headers


class Unavailable(Exception):
    """The release's wheel could not be downloaded (no network, no such release): pip's last words."""


def wheel_cache() -> Path:
    return Path(os.environ.get("CODEMOD_WHEEL_CACHE", REPO_TARGET_TREE.parent / "cpp_ext" / "wheels"))


def torchgen_of(version: str) -> Path:
    """Torch VERSION's torchgen/ directory (holding packaged/), unpacked from its wheel the first time."""
    kept = wheel_cache() / f"torchgen-{version}"
    if not (kept / "torchgen" / "gen.py").is_file():
        wheel_cache().mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=wheel_cache(), prefix=f".torchgen-{version}-") as scratch:
            unpacked = Path(scratch, "unpacked")
            extract_torchgen(_download(version, Path(scratch)), unpacked)
            try:
                unpacked.rename(kept)  # whole or not at all
            except OSError:
                if not (kept / "torchgen" / "gen.py").is_file():  # else another run unpacked it first
                    raise
    return kept / "torchgen"


def _download(version: str, directory: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-d", str(directory), f"torch=={version}"]
    for environment in (os.environ, {**os.environ, "PIP_CONFIG_FILE": os.devnull}):
        print(f"$ {'PIP_CONFIG_FILE=/dev/null ' if 'PIP_CONFIG_FILE' in environment else ''}{' '.join(command[2:])}", flush=True)
        result = subprocess.run(command, env=environment, capture_output=True, text=True)
        if result.returncode == 0:
            return next(directory.glob("torch-*.whl"))
    raise Unavailable(f"`pip download --no-deps torch=={version}` failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
