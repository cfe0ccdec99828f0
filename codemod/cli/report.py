"""The one JSON object each command prints with `--json`, as documented by output.schema.json.

Every object names its `command`; a failure prints `{"command", "error", "exit_code"}`.
"""
from __future__ import annotations

import json
from pathlib import Path

from codemod.apply import patch
from codemod.apply.journal import Journal, RevertedFile
from codemod.cli.catalog import OpStatus
from codemod.plan.plan import Plan

SCHEMA = Path(__file__).with_name("output.schema.json")


def dumps(report: dict) -> str:
    return json.dumps(report, indent=1)


def bypass(
    plan: Plan, *, applied: bool, verified: list[str], unchecked: list[str], seconds: dict[str, float], diff: str | None,
) -> dict:
    report = {
        "command": "bypass",
        "op": plan.op,
        "overloads": list(plan.overloads),
        "mode": "guarded" if plan.guarded else "plain",
        "applied": applied,
        "files": [vars(row) for row in patch.stat(plan.changes)],
        "losses": list(plan.losses),
        "foreach_ops_losing_autograd": list(plan.foreach_ops),
        "unrewritten": [
            {"path": x.path, "line": x.line, "text": x.text.strip(), "why": x.why, "needs_edit": x.needs_edit} for x in plan.leftovers
        ],
        "verified": verified,
        "unchecked": unchecked,
        "seconds": seconds,
    }
    if diff is not None:
        report["patch"] = diff
    return report


def already_bypassed(op: str) -> dict:
    return {"command": "bypass", "op": op, "already_bypassed": True}


def revert(op: str, reverted: list[RevertedFile]) -> dict:
    return {
        "command": "revert",
        "op": op,
        "files": [{"path": f.path, "outcome": f.outcome, "edited_since": f.since} for f in reverted],
    }


def status(tree_root: Path, bypassed: list[tuple[Journal, str, list[str]]]) -> dict:
    """BYPASSED: each journal, its mode (plain or guarded) and the files changed since."""
    return {
        "command": "status",
        "tree": str(tree_root),
        "bypassed": [
            {"op": j.op, "overloads": list(j.overloads), "mode": mode, "files": [f.path for f in j.files], "changed_since": changed}
            for j, mode, changed in bypassed
        ],
    }


def ops(statuses: list[OpStatus]) -> dict:
    return {"command": "ops", "ops": [s.to_dict() for s in statuses]}


def bench(measured: dict) -> dict:
    """MEASURED: op, mode ("plain": two paths, "guarded": three), call, load_average, wall, ... as bench measured them."""
    return {"command": "bench", **measured}


def error(command: str, message: str, exit_code: int) -> dict:
    return {"command": command, "error": message, "exit_code": exit_code}
