"""Run a compiled harness: its correctness checks, or its JSON-lines measurements."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from codemod.model import cache
from codemod.model.errors import VerificationFailed
from codemod.verify.compiler import Built


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    passed: int
    failed: int
    output: str


def run_checks(executable: Path) -> CheckResult:
    result = subprocess.run([str(executable), "check"], capture_output=True, text=True)
    output = result.stdout + result.stderr
    passed, failed = tally(output)
    return CheckResult(result.returncode == 0 and failed == 0 and passed > 0, passed, failed, output)


def tally(output: str) -> tuple[int, int]:
    """The checks the harness's OUTPUT says passed, and failed."""
    lines = output.splitlines()
    return sum(line.startswith("ok ") for line in lines), sum(line.startswith("FAIL ") for line in lines)


def run_json_lines(command: list[str]) -> list[dict]:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise VerificationFailed(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


class Verdicts(TypedDict):
    """What a passing check of a build said: the harness's C++ checks' output, and the comparisons with torch (the
    summary line and what `build --json` reports of them); each None when that check did not run."""

    cpp_output: str | None
    torch_summary: str | None
    torch_comparisons: dict | None


def _verdicts_record(built: Built, op: str) -> Path:
    """Where the verdicts of OP's checks of BUILT are kept: by its compile's key (the harness's and the extension's
    bytes), our code (the checks, the samples' binding) and torch (the samples kept, the reference results). The
    same bytes checked by the same code against the same torch on the same samples say the same."""
    key = cache.digest(op, built.key, cache.own_code(), cache.installed_version("torch"))[:20]
    return cache.cache_dir() / "checks" / f"{op}-{key}.json"


def kept_verdicts(built: Built, op: str) -> Verdicts | None:
    """The verdicts of OP's checks of BUILT, when a run passed them before (else None: none, truncated, corrupt)."""
    return cache.kept_json(_verdicts_record(built, op), Verdicts)


def keep_verdicts(built: Built, op: str, verdicts: Verdicts) -> None:
    """Keep the verdicts of checks that passed (a failure is always run again, to be seen)."""
    record = _verdicts_record(built, op)
    record.parent.mkdir(parents=True, exist_ok=True)
    cache.publish_text(record, json.dumps(verdicts))
