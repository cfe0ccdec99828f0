"""The one JSON object each command prints with `--json`, as documented by output.schema.json.

Every object names its `command`; a failure prints `{"command", "error", "exit_code"}`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from codemod.apply import patch

if TYPE_CHECKING:  # annotations only: a usage error's JSON object needs none of the pipeline
    from codemod.apply.journal import Journal, Reverted
    from codemod.cli.catalog import OpStatus
    from codemod.model.cache_entries import Entry
    from codemod.plan.plan import Plan

SCHEMA = Path(__file__).with_name("output.schema.json")
SCHEMA_PATH = SCHEMA.relative_to(Path(__file__).parents[2]).as_posix()  # as the help names it: codemod/cli/output.schema.json


def dumps(report: dict) -> str:
    return json.dumps(report, indent=1)


def bypass(
    plans: list[Plan], *, already_bypassed: list[str], applied: bool, verified: list[str], unchecked: list[str],
    seconds: dict[str, float], diff: str | None,
) -> dict:
    """One object for the whole run, however many ops: each op planned, the ops skipped (already bypassed in this
    mode), and the run's verification and seconds."""
    report = {
        "command": "bypass",
        "applied": applied,
        "ops": [_planned(plan) for plan in plans],
        "already_bypassed": already_bypassed,
        "verified": verified,
        "unchecked": unchecked,
        "seconds": seconds,
    }
    if diff is not None:
        report["patch"] = diff
    return report


def _planned(plan: Plan) -> dict:
    return {
        "op": plan.op,
        "overloads": list(plan.overloads),
        "mode": "guarded" if plan.guarded else "plain",
        "files": [vars(row) for row in patch.stat(plan.changes)],
        "losses": list(plan.losses),
        "foreach_ops_losing_autograd": list(plan.foreach_ops),
        "unrewritten": [
            {"path": x.path, "line": x.line, "text": x.text.strip(), "why": x.why, "needs_edit": x.needs_edit} for x in plan.leftovers
        ],
    }


def revert(reverted: list[Reverted], not_bypassed: list[str]) -> dict:
    """One object for the whole run: each op reverted, in order, and the ops named that were not bypassed."""
    return {
        "command": "revert",
        "reverted": [
            {"op": each.op, "mode": each.mode, "files": [{"path": f.path, "outcome": f.outcome, "edited_since": f.since} for f in each.files]}
            for each in reverted
        ],
        "not_bypassed": not_bypassed,
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


def explain(explained: dict) -> dict:
    return {"command": "explain", **explained}


def build(op: str, built: dict) -> dict:
    """BUILT: what was compiled and checked (build_and_check), or what --checkout did."""
    return {"command": "build", "op": op, **built}


def recover(tree_root: Path, finished: str | None, discarded: str | None = None) -> dict:
    """FINISHED: the command whose transaction was finished (`bypass mul`), None when there was none; DISCARDED: the
    log `--discard` dropped."""
    return {"command": "recover", "tree": str(tree_root), "finished": finished, "discarded": discarded}


def tree_from_torch(dest: Path, torchgen_from: Path | None, sources: Path) -> dict:
    return {"command": "tree from-torch", "tree": str(dest), "torchgen": str(torchgen_from) if torchgen_from else None, "sources": str(sources)}


def bench(measured: dict) -> dict:
    """MEASURED: op, mode ("plain": two paths, "guarded": three), call, load_average, wall, ... as bench measured them."""
    return {"command": "bench", **measured}


def cache(where: dict, entries: list[Entry], made_under: dict) -> dict:
    """WHERE: the cache's path and whether $CODEMOD_BUILD_CACHE chose it; ENTRIES: what it holds; MADE_UNDER: this
    install's torch and Python, which a stale entry was not made under."""
    kinds = {}
    for entry in entries:
        kind = kinds.setdefault(entry.kind, {"kind": entry.kind, "entries": 0, "bytes": 0, "stale_entries": 0, "stale_bytes": 0})
        kind["entries"] += 1
        kind["bytes"] += entry.bytes
        kind["stale_entries"] += bool(entry.stale)
        kind["stale_bytes"] += entry.bytes if entry.stale else 0
    stale = [entry for entry in entries if entry.stale]
    reasons: dict[str, list[Entry]] = {}
    for entry in stale:
        reasons.setdefault(entry.stale, []).append(entry)
    return {"command": "cache", **where, **_count(entries), "made_under": made_under, "kinds": list(kinds.values()),
            "stale": {**_count(stale), "reasons": [{"reason": reason, **_count(of)} for reason, of in reasons.items()]}}


def cache_prune(where: dict, pruned: str, removed: list[Entry], left: list[Entry]) -> dict:
    return {"command": "cache prune", **where, "pruned": pruned, "removed": _count(removed), "left": _count(left)}


def _count(entries: list[Entry]) -> dict:
    return {"entries": len(entries), "bytes": sum(entry.bytes for entry in entries)}


def error(command: str, message: str, exit_code: int) -> dict:
    return {"command": command, "error": message, "exit_code": exit_code}
