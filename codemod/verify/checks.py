"""Run a compiled harness: its correctness checks, or its JSON-lines measurements."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from codemod.model.errors import VerificationFailed


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    passed: int
    failed: int
    output: str


def run_checks(executable: Path) -> CheckResult:
    result = subprocess.run([str(executable), "check"], capture_output=True, text=True)
    output = result.stdout + result.stderr
    passed = sum(line.startswith("ok ") for line in output.splitlines())
    failed = sum(line.startswith("FAIL ") for line in output.splitlines())
    return CheckResult(result.returncode == 0 and failed == 0 and passed > 0, passed, failed, output)


def run_json_lines(command: list[str]) -> list[dict]:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise VerificationFailed(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
