"""The README's set-up, as a new user runs it: a fresh clone, a fresh virtual environment, nothing cached.

    python benchmarks/fresh_setup.py

Clones this checkout's HEAD into a scratch directory (so `target_tree/` is as committed, and the build cache
`cpp_ext/build` is empty), makes a virtual environment there and times the README's set-up commands in it, read
from the README, each `&&` step whole: `pip install ... torch==2.13.0` with `--no-cache-dir` (every package fetched
from the indexes pip is configured with, which the result records: no local pip cache helps), then `codemod bypass
mul --tree ./target_tree` (nothing compiled yet: the precompiled header, the harness, the codegen and every compile
of verification run), then `pip install ... ".[test]"`. `apt-get install g++ valgrind` is not timed: this machine
has them, and a package manager's time is the mirror's; the tests are benchmarks/suite_cost.py's.
Per command: wall and CPU seconds (user + system of its processes). Writes benchmarks/results/fresh_setup.json
with the date, the machine and the load average before and after; `python docs/generate.py` renders it into the
README and docs/measurements.md. Takes minutes; figures for a person, nothing here asserts a time.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs"))

import generate  # noqa: E402  (docs/generate.py: where results live)
from tutorial_steps import readme_setup_lines, timed, write_result  # noqa: E402  (benchmarks/: the script's own directory)

RESULT = generate.RESULTS / "fresh_setup.json"
NOT_TIMED = ("apt-get ", "python -m pytest")


def readme_steps() -> list[str]:
    """The steps of the README's set-up block (each `&&` part of each line) that this script times, in order; pip's
    with --no-cache-dir."""
    steps = [step.strip() for line in readme_setup_lines() for step in line.split(" && ")]
    return [step.replace("pip install ", "pip install --no-cache-dir ", 1) for step in steps if not step.startswith(NOT_TIMED)]


COMMANDS = readme_steps()


def main() -> None:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="codemod-fresh-setup-") as scratch:
        clone = Path(scratch, "codemod")
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True)
        inherited = ("PYTHON", "VIRTUAL_ENV", "CODEMOD_", "PIP_NO_CACHE")  # nothing of this session leaks into the clone's
        env = {key: value for key, value in os.environ.items() if not key.startswith(inherited)}
        env.update(VIRTUAL_ENV=str(clone / ".venv"), PATH=f"{clone / '.venv' / 'bin'}{os.pathsep}{env['PATH']}")
        steps = [{"command": command, **timed(command, clone, env)} for command in COMMANDS]
    for step in steps:
        step.pop("stdout")
    configured = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    sources = [line for line in configured.splitlines() if "index-url" in line or "find-links" in line]
    write_result(Path(__file__).name, RESULT, load_before, {"steps": steps, "pip_sources": sources})


if __name__ == "__main__":
    main()
