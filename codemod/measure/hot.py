"""`codemod hot`: which aten ops of a real run are worth bypassing, from a torch.profiler trace.

The trace is the user's (`export_chrome_trace`) or made by running their script under the
profiler in a subprocess (profile_script.py). Per aten op name, as the profiler names it
(`aten::add_`), it counts calls through the dispatcher and self CPU time, and judges for
each call whether the guarded bypass's guard (plan/guarded.py) would take the fast path,
from what the trace records. The per-call saving is measured once per op and torch version
with callgrind on guarded_bench's harness (dispatcher, plain bypass and guarded paths) and
cached; the estimate for the run is calls x that saving, in instructions.
"""
from __future__ import annotations

import bisect
import contextlib
import ctypes
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from codemod.measure import bench, guarded_bench, profile_script
from codemod.model import cache, json_file, paths
from codemod.model.errors import BadInput, CodemodError
from codemod.model.native_yaml import op_name
from codemod.model.tree import Tree

MODES = ("plain", "guarded")
GUARDED_PATHS = tuple(bench.LABELS["guarded"])
_CPU_CATEGORIES = {"cpu_op", "user_annotation", "python_function"}
# dtypes whose tensors carry a Quantized key, which the guard sends to the dispatcher
_QUANTIZED = {"c10::quint8", "c10::qint8", "c10::qint32", "c10::quint4x2", "c10::quint2x4"}
REFUSALS = ("requires_grad", "view", "device", "layout", "dtype")

GUARD_JUDGED = (
    "A call counts as let through unless the trace shows an input the guard refuses: one that requires grad "
    "(the call made an autograd node: grad mode was on and the next autograd-recorded call has a higher sequence "
    "number, or a forward-backward link leaves it; or, for a script run by codemod, the input is a leaf tensor still "
    "alive at the end that requires grad: a parameter), a view (alive at the end), a device other than cpu or a layout other than strided "
    "(recorded for a script run by codemod), or a quantized dtype. The trace cannot tell views and other tensors with "
    "autograd metadata that were freed before the end, the Conjugate/Negative bits, tensor subclasses and modes; so "
    "the share is an upper bound. While profiling, the guard lets nothing through (the profiler is a RecordFunction "
    "callback): the share is for the same run without a profiler."
)
ESTIMATE = (
    "calls x the instructions a bypass saves per call (callgrind, the functional overload on 2-element float32 "
    "tensors: in-place and out= calls are assumed to cost the same, calls of overloads the bypass does not cover count "
    "none, and a trace without overload names counts every call of the name), in time at the rate this machine runs "
    "the dispatcher's path (its best round over its instructions)"
)
ESTIMATE_LEAVES_OUT = (
    "cache and branch effects",
    "the guard's own cost on the calls it sends to the dispatcher",
    "what a plain bypass breaks (autograd, the profiler, other backends: see `codemod bypass OP --dry-run`)",
)
MEASURED_AND_ESTIMATED = (
    "Measured: calls (through the dispatcher, as the trace records them) and self CPU time, by the profiler; "
    "instructions/call saved, by callgrind. Estimated: the calls the guard lets through (judged from the trace, of the "
    "calls of the overloads a bypass covers: the others stay with the dispatcher) and the saving."
)
# Below this share of the profiled run, a bypass is not worth its cost (losses, or the guard's upkeep) for the script.
WORTH_IT_SHARE = 0.01


@dataclass
class OpCalls:
    """One aten op name of the trace, as the profiler names it: "aten::add_"."""

    name: str
    calls: int = 0  # as key_averages() counts them
    nested_in_same_name: int = 0  # calls key_averages() merges into their caller of the same name (the dispatcher's are both)
    self_cpu_us: float = 0.0
    overloads: Counter = field(default_factory=Counter)  # "add_.Tensor" -> dispatcher calls; "" when not recorded
    refused: dict[str, Counter] = field(default_factory=dict)  # overload -> refusal -> calls the guard refuses
    refused_calls: Counter = field(default_factory=Counter)  # overload -> calls refused for any reason
    without_autograd_record: Counter = field(default_factory=Counter)  # overload -> calls recorded outside grad mode


# ---------------------------------------------------------------- get a trace

def profile(script: Path, args: tuple[str, ...], output: TextIO) -> dict:
    """Run SCRIPT ARGS under the profiler in a subprocess, leading a process group of its own (children.owned ends
    it on SIGINT or SIGTERM), its output passed through (stdout to OUTPUT, stderr to ours); its trace. Only the
    script is waited for, and what it leaves running is ended then (_descendants_ended). A script that fails is bad
    input (exit 2): its traceback shown above, the message names the script's line it raised from."""
    paths.regular_file(script, "the Python script to profile")
    with tempfile.TemporaryDirectory(prefix="codemod-hot-") as scratch:
        trace_path, failure_path = Path(scratch) / "trace.json", Path(scratch) / "failure.json"
        command = [sys.executable, profile_script.__file__, str(trace_path), str(failure_path), str(script), *args]
        output.flush()
        sys.stderr.flush()
        # the profiler hot starts writes its own start and stop markers to stderr ("USDT: ... profiler_start"): not the
        # script's output, so silenced unless the user set kineto's level
        env = {"KINETO_LOG_LEVEL": "6", **os.environ}
        with _descendants_ended():
            returncode = subprocess.Popen(command, stdout=output, env=env, start_new_session=True).wait()
        if returncode != 0:
            raise BadInput(f"{script} failed under the profiler ({_ended(returncode)}){_failure(failure_path)}")
        return read_trace(trace_path)


PR_SET_CHILD_SUBREAPER = 36  # prctl(2)


@contextlib.contextmanager
def _descendants_ended() -> Iterator[None]:
    """While the block runs, this process is the subreaper of its descendants (prctl PR_SET_CHILD_SUBREAPER): a
    process the script leaves behind, in its process group or in a session of its own, becomes our child when its
    parent exits, not init's. When the block ends, each child started in it is killed (SIGKILL) and reaped, then
    those its end hands over, until none is left."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = _children()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        while left := _children() - before:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for pid in left:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _children() -> set[int]:
    """This process's children (zombies included), from /proc."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # ended meanwhile
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


def _ended(returncode: int) -> str:
    return f"killed by {signal.Signals(-returncode).name}" if returncode < 0 else f"exit {returncode}"


def _failure(failure_path: Path) -> str:
    """`: where: error` from the script's failure record (profile_script), or nothing when it left none (an exit)."""
    try:
        failure = json.loads(failure_path.read_text())
    except (OSError, ValueError):
        return ""
    return f": {failure['where']}: {failure['error']} (its traceback is above)"


def read_trace(path: Path) -> dict:
    """PATH's trace, once every event `aggregate` and `run_span_us` read has the shape they read it in."""
    fix = "save the trace with torch.profiler's export_chrome_trace"
    trace = json_file.read(path, "JSON trace", fix)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise BadInput(f"{path}: no `traceEvents` list; {fix}")
    for index, event in enumerate(trace["traceEvents"]):
        problem = _malformed(event)
        if problem:
            raise BadInput(f"{path}: event {index} of `traceEvents` {problem}; {fix}")
    return trace


def _malformed(event: object) -> str | None:
    """What about EVENT (a trace event) the aggregation could not read, if anything."""
    if not isinstance(event, dict):
        return f"is {_json_type(event)}, not an object"
    if "cat" in event and not isinstance(event["cat"], str):
        return f"has `cat` {_json_type(event['cat'])}, not a string"
    counted = event.get("ph") == "X" and event.get("cat") in _CPU_CATEGORIES
    flow = event.get("ph") == "s" and event.get("cat") == "fwdbwd"
    if not (counted or flow):
        return None
    if not _is_number(event.get("ts")):
        return f"has {'no `ts`' if 'ts' not in event else '`ts` ' + _json_type(event['ts'])}, not a number"
    for key in ("pid", "tid"):
        if key in event and not isinstance(event[key], (str, int)):
            return f"has `{key}` {_json_type(event[key])}, not a number or a string"
    if not counted:
        return None
    if not isinstance(event.get("name"), str):
        return f"has {'no `name`' if 'name' not in event else '`name` ' + _json_type(event['name'])}, not a string"
    if "dur" in event and not _is_number(event["dur"]):
        return f"has `dur` {_json_type(event['dur'])}, not a number"
    args = event.get("args", {})
    if not isinstance(args, dict):
        return f"has `args` {_json_type(args)}, not an object"
    if "Sequence number" in args and not _is_number(args["Sequence number"]):
        return f"has `args.Sequence number` {_json_type(args['Sequence number'])}, not a number"
    for key in ("Input type", profile_script.DEVICES, profile_script.LAYOUTS, profile_script.AUTOGRAD_META):
        if key in args and not (isinstance(args[key], list) and all(isinstance(item, str) for item in args[key])):
            return f"has `args.{key}` {_json_type(args[key])}, not a list of strings"
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value: object) -> str:
    """VALUE as the JSON it was read from names its type: `5` is "the number 5", `[1, 2]` "an array"."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "an array"
    return f"the {'string' if isinstance(value, str) else 'number' if _is_number(value) else 'value'} {json.dumps(value)[:40]}"


# ---------------------------------------------------------------- aggregate

def aggregate(trace: dict) -> list[OpCalls]:
    """Per aten op name: calls and self CPU time as key_averages() counts them, and per overload the dispatcher
    calls and those the guard would refuse, by reason."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in _CPU_CATEGORIES]
    rows: dict[str, OpCalls] = {}
    overloads_recorded = any(e["name"].startswith("aten::") and "." in e["name"] for e in events)
    flow_starts = {(e.get("tid"), e.get("ts")) for e in trace["traceEvents"] if e.get("ph") == "s" and e.get("cat") == "fwdbwd"}
    for thread in _by_thread(events).values():
        made_node = _autograd_nodes(thread, flow_starts)
        for event, self_us, own_row in _profiler_calls(thread):
            if not event["name"].startswith("aten::"):
                continue
            name, _, overload = event["name"].partition(".")
            row = rows.setdefault(name, OpCalls(name))
            base = name.removeprefix("aten::")
            entry = f"{base}.{overload}" if overload else base if overloads_recorded else ""
            row.calls += own_row
            row.nested_in_same_name += not own_row
            row.self_cpu_us += self_us
            row.overloads[entry] += 1
            args = event.get("args", {})
            if "Sequence number" not in args:
                row.without_autograd_record[entry] += 1
            reasons = _refusals(args, made_node.get(id(event)))
            row.refused.setdefault(entry, Counter()).update(reasons)
            row.refused_calls[entry] += bool(reasons)
    return sorted(rows.values(), key=lambda r: (-r.calls, r.name))


def _by_thread(events: list[dict]) -> dict[tuple, list[dict]]:
    threads: dict[tuple, list[dict]] = {}
    for event in sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0))):
        threads.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    return threads


@dataclass
class _Node:
    event: dict
    end: float
    children: list[_Node] = field(default_factory=list)


def _profiler_calls(thread: list[dict]):
    """Each event of THREAD (sorted by start), its self time (its duration minus its children's), and whether
    key_averages() counts it as a call: the profiler merges an event into its parent of the same name when it is
    that parent's only child (`mul` calling `mul`: one row, one call, the parent's time)."""
    roots: list[_Node] = []
    stack: list[_Node] = []
    for event in thread:
        node = _Node(event, event["ts"] + event.get("dur", 0))
        while stack and event["ts"] >= stack[-1].end:
            stack.pop()
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    pending = roots
    while pending:
        node = pending.pop()
        merged = []
        while len(node.children) == 1 and _profiler_name(node.children[0].event) == _profiler_name(node.event):
            merged.append(node.children[0].event)
            node.children = node.children[0].children
        yield node.event, node.event.get("dur", 0) - sum(c.event.get("dur", 0) for c in node.children), True
        for event in merged:
            yield event, 0.0, False
        pending.extend(node.children)


def _profiler_name(event: dict) -> str:
    """The name key_averages() groups by: the aten op without its overload."""
    name = event["name"]
    return name.partition(".")[0] if name.startswith("aten::") else name


def _autograd_nodes(thread: list[dict], flow_starts: set[tuple]) -> dict[int, bool]:
    """For each forward call recorded by autograd (it has a sequence number): did it (or its callees) make an
    autograd node? Yes when a forward-backward flow starts at it, or when the next such call after it ends has a
    higher number; unknown (absent) for the last one without a flow."""
    recorded = [e for e in thread if "Sequence number" in e.get("args", {}) and not e["args"].get("Fwd thread id")]
    starts = [e["ts"] for e in recorded]
    made = {}
    for event in recorded:
        following = bisect.bisect_left(starts, event["ts"] + event.get("dur", 0))
        if (event.get("tid"), event["ts"]) in flow_starts:
            made[id(event)] = True
        elif following < len(recorded):
            made[id(event)] = recorded[following]["args"]["Sequence number"] > event["args"]["Sequence number"]
    return made


def _refusals(args: dict, made_node: bool | None) -> set[str]:
    """Why the guard would send this call to the dispatcher, from what the trace recorded."""
    reasons = set()
    meta = args.get(profile_script.AUTOGRAD_META, [])
    if made_node or "requires_grad" in meta:
        reasons.add("requires_grad")
    if "view" in meta:
        reasons.add("view")
    if any(device not in ("", "cpu") for device in args.get(profile_script.DEVICES, [])):
        reasons.add("device")
    if any(layout not in ("", "torch.strided") for layout in args.get(profile_script.LAYOUTS, [])):
        reasons.add("layout")
    if _QUANTIZED & set(args.get("Input type", [])):
        reasons.add("dtype")
    return reasons


# ---------------------------------------------------------------- per-call cost

def per_call_cost(tree: Tree, op: str) -> dict:
    """Callgrind instructions per call of at::OP through the dispatcher, the plain bypass and the guarded bypass
    (guarded_bench's harness), and the best round's ns/call of each on 2-element tensors; measured once per op and
    torch version and cached in the build cache."""
    version = importlib.metadata.version("torch")
    cached = cache.cache_dir() / f"hot-cost-{op}-torch-{version}-timed.json"
    kept = cache.kept_json(cached, dict[str, object])  # None: none, truncated or corrupt, measured again
    if kept is not None:
        return kept
    executable = guarded_bench.build(tree, op).executable
    instructions = bench.count(executable, GUARDED_PATHS)[0]
    (timed,) = bench.wall_times(executable, (2,), GUARDED_PATHS)
    cost = {"torch": version, "load_average": bench.load_average(),
            **{path: round(instructions[path]["per_call"], 1) for path in GUARDED_PATHS},
            "ns": {path: timed[f"{path}_ns"] for path in GUARDED_PATHS}}
    cache.publish_text(cached, json.dumps(cost))
    return cost


def measured_cost(tree: Tree, op: str) -> dict:
    """per_call_cost, or why it could not be measured: {"not_measured": reason}."""
    try:
        cost = per_call_cost(tree, op)
    except CodemodError as error:
        return {"not_measured": str(error).splitlines()[0]}
    return {
        "instructions_per_call": {path: cost[path] for path in GUARDED_PATHS},
        "saving_per_call": {"plain": round(cost["dispatch"] - cost["bypass"], 1),
                            "guarded": round(cost["dispatch"] - cost["guarded"], 1)},
        "ns_per_instruction": round(cost["ns"]["dispatch"] / cost["dispatch"], 4),
    }


# ---------------------------------------------------------------- the report

def report(rows: list[OpCalls], statuses: dict, costs: dict[str, dict], source: dict, run_us: float, top: int) -> dict:
    """The `hot` object of output.schema.json. STATUSES: op -> the tree's catalog status (codemod ops), ops absent
    from the tree left out; COSTS: op -> measured_cost, or {"not_measured": why} for ops not measured; RUN_US: the
    profiled run's wall time; TOP: how many ops the total and the verdict are about."""
    ops = [_op_report(row, statuses.get(_op_of(row.name, statuses)), costs, run_us) for row in rows]
    ops.sort(key=lambda o: (-(o["estimate"]["plain"] or -1), -(o["estimate"]["guarded"] or -1), not o["bypassable"],
                            -o["dispatcher_calls"], o["name"]))
    hot = {
        "command": "hot",
        **source,
        "torch": importlib.metadata.version("torch"),
        "total_self_cpu_us": round(sum(r.self_cpu_us for r in rows), 3),
        "run_us": round(run_us, 3),
        "ranked_by": "estimated instructions saved by a plain bypass, then by a guarded one; then bypassable ops first, by calls",
        "guard_judged": GUARD_JUDGED,
        "estimate_is": ESTIMATE,
        "estimate_leaves_out": list(ESTIMATE_LEAVES_OUT),
        "ops": ops,
    }
    bypassable = [o for o in ops if o["bypassable"]]
    hot["top"] = _top_total(ops, top_ops(hot, "plain", top), run_us) if bypassable else None
    hot["verdict"] = verdict(hot)
    return hot


def run_span_us(trace: dict) -> float:
    """The profiled run's wall time: from the first CPU event's start to the last one's end (profiler included)."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in _CPU_CATEGORIES]
    return max(e["ts"] + e.get("dur", 0) for e in events) - min(e["ts"] for e in events) if events else 0.0


def _top_total(ops: list[dict], names: list[str], run_us: float) -> dict:
    """The estimated saving of bypassing the ops NAMES (each op's profiler names summed), against the run."""
    chosen = [o for o in ops if o["bypassable"] and o["op"] in names]
    total = {"ops": names}
    for mode in MODES:
        measured = [o["estimate"][mode] for o in chosen if o["estimate"][mode] is not None]
        total[mode] = sum(measured) if measured else None
        time_us = [o["estimate"][f"{mode}_us"] for o in chosen if o["estimate"][f"{mode}_us"] is not None]
        total[f"{mode}_us"] = round(sum(time_us), 3) if time_us else None
        total[f"{mode}_share"] = _share(total[f"{mode}_us"], run_us)
    return total


def _share(time_us: float | None, run_us: float) -> float | None:
    return round(time_us / run_us, 6) if time_us is not None and run_us else None


def verdict(hot: dict) -> str:
    """One sentence a user can act on: what bypassing the top ops would save of this run, and whether to."""
    top = hot["top"]
    if top is None:
        return "No op of this run is bypassable in this tree, so no bypass can speed it up."
    names = _names(top["ops"])
    if top["plain_us"] is None:
        return (f"{names} {'is' if len(top['ops']) == 1 else 'are'} bypassable here; run `codemod hot` without --no-measure "
                "(or see why an op was not measured above) to estimate what bypassing would save.")
    run = _time(hot["run_us"])
    saving = f"about {_time(top['plain_us'])} of this {run} run ({_percent(top['plain_share'])})"
    if (top["plain_share"] or 0) < WORTH_IT_SHARE:
        return f"Bypassing {names} would save {saving}: not worth it for this script."
    return (f"Bypassing {names} would save {saving}: worth trying with `codemod hot ... --json > hot.json` then "
            f"`codemod bypass --from-hot hot.json --top {len(top['ops'])}` (add --guarded to keep autograd and the "
            "profiler), and profiling the run again.")


def _names(ops: list[str]) -> str:
    return ops[0] if len(ops) == 1 else f"{', '.join(ops[:-1])} and {ops[-1]}"


def _time(us: float) -> str:
    return f"{us / 1e6:,.2f} s" if us >= 1e6 else f"{us / 1e3:,.1f} ms" if us >= 1e3 else f"{us:,.1f} us"


def _percent(share: float | None) -> str:
    return "-" if share is None else "<0.01%" if 0 < share < 0.0001 else f"{share:.2%}"


def ops_to_measure(rows: list[OpCalls], statuses: dict) -> list[str]:
    """The bypassable ops the run calls, whose per-call cost the estimate needs."""
    return sorted({op for op in (_op_of(r.name, statuses) for r in rows) if op in statuses and statuses[op].bypassable})


def _op_of(name: str, statuses: dict) -> str:
    """The op `bypass` takes for a profiler name: "aten::add_" -> "add"."""
    base = name.removeprefix("aten::")
    return base if base in statuses else op_name(base)


def _op_report(row: OpCalls, status, costs: dict[str, dict], run_us: float) -> dict:
    op = _op_of(row.name, {status.op: status} if status else {})
    covered_by = set(status.overloads) if status is not None and status.bypassable else None
    covered = [o for o in row.overloads if covered_by is None or o == "" or o in covered_by]
    covered_calls = sum(row.overloads[o] for o in covered)
    refused = sum((row.refused.get(o, Counter()) for o in covered), Counter())
    let_through = covered_calls - sum(row.refused_calls[o] for o in covered)
    cost = costs.get(op) or {"not_measured": "not bypassable: no bypass to compare with" if covered_by is None else "not measured"}
    return {
        "name": row.name,
        "op": op,
        "calls": row.calls,
        "nested_in_same_name": row.nested_in_same_name,
        "dispatcher_calls": row.calls + row.nested_in_same_name,
        "self_cpu_us": round(row.self_cpu_us, 3),
        "overloads": dict(row.overloads),
        "in_tree": status is not None,
        "bypassable": covered_by is not None,
        "reason": status.reason if status is not None else "not in the tree's native_functions.yaml",
        "detail": status.detail if status is not None else "",
        "covered_calls": covered_calls,
        "guard": {
            "let_through": let_through,
            "share": round(let_through / covered_calls, 4) if covered_calls else None,
            "refused": {reason: refused[reason] for reason in REFUSALS if refused[reason]},
            "without_autograd_record": sum(row.without_autograd_record[o] for o in covered),
        },
        "cost": cost,
        "estimate": _estimate({"plain": covered_calls, "guarded": let_through}, cost, run_us) if covered_by is not None
        else _estimate({}, {}, run_us),
    }


def _estimate(calls: dict[str, int], cost: dict, run_us: float) -> dict:
    """Per mode: CALLS x the instructions saved per call, that in time at the measured rate, and its share of the run."""
    estimate = {}
    for mode in MODES:
        saving = cost.get("saving_per_call")
        instructions = round(calls[mode] * saving[mode]) if saving and mode in calls else None
        time_us = round(instructions * cost["ns_per_instruction"] / 1000, 3) if instructions is not None else None
        estimate |= {mode: instructions, f"{mode}_us": time_us, f"{mode}_share": _share(time_us, run_us)}
    return estimate


# ---------------------------------------------------------------- show

def table(hot: dict) -> str:
    source = hot.get("script") or hot.get("trace")
    width = max([len("op"), *(len(o["name"]) for o in hot["ops"])])
    lines = [
        f"{source}: {len(hot['ops'])} aten ops, {sum(o['dispatcher_calls'] for o in hot['ops']):,} calls, "
        f"{hot['total_self_cpu_us'] / 1000:,.1f} ms self CPU in a {_time(hot['run_us'])} profiled run (torch {hot['torch']}); "
        "ranked by estimated saving",
        f"{'':<{width}} {'':>7} {'self CPU':>10} {'guard lets':>12} {'instructions/call saved':>24} "
        f"{'estimated saving: time (share of the run)':>44}",
        f"{'op':<{width}} {'calls':>7} {'us':>10} {'through':>12} {'plain':>11} {'guarded':>12} {'plain':>21} {'guarded':>22}  bypass",
    ]
    for o in hot["ops"]:
        guard = f"{o['guard']['let_through']}/{o['covered_calls']}" if o["covered_calls"] else "-"
        saving = o["cost"].get("saving_per_call")
        per_call = f"{saving['plain']:>11,.0f} {saving['guarded']:>12,.0f}" if saving else f"{'-':>11} {'-':>12}"
        estimated = f"{_saved(o['estimate'], 'plain'):>21} {_saved(o['estimate'], 'guarded'):>22}"
        if o["bypassable"]:
            verdict = "plain, guarded" + (f" (not measured: {o['cost']['not_measured']})" if not saving else "")
        else:
            verdict = "no: " + "; ".join(filter(None, (o["reason"], o["detail"])))
        lines.append(f"{o['name']:<{width}} {o['dispatcher_calls']:>7,} {o['self_cpu_us']:>10,.1f} {guard:>12} {per_call} {estimated}  {verdict}")
    top = hot["top"]
    if top and top["plain"] is not None:
        lines.append(f"top {len(top['ops'])} by estimated saving ({_names(top['ops'])}): "
                     + "; ".join(f"{mode} {top[mode]:,} instructions, {_time(top[f'{mode}_us'])} "
                                 f"({_percent(top[f'{mode}_share'])} of the run)" for mode in MODES))
    lines.append(textwrap.fill(MEASURED_AND_ESTIMATED + _merged_by_key_averages(hot["ops"]), 120))
    lines.append(textwrap.fill("guard lets through: " + hot["guard_judged"], 120))
    lines.append(textwrap.fill(f"The estimate is {hot['estimate_is']}; it leaves out {_names(hot['estimate_leaves_out'])}. "
                               "The run's time is under the profiler, which slows every op.", 120))
    lines.append(hot["verdict"])
    return "\n".join(lines)


def _merged_by_key_averages(ops: list[dict]) -> str:
    """Where calls differ from the profiler's own table: key_averages() counts a call made inside one of the same
    name as part of it; the dispatcher (and a bypass) runs both."""
    merged = [o for o in ops if o["nested_in_same_name"]]
    if not merged:
        return ""
    named = _names([f"{o['name']} {o['dispatcher_calls']:,} here, {o['calls']:,} there" for o in merged])
    return (" torch.profiler's key_averages() counts a call made inside one of the same name as part of it, "
            f"which the dispatcher runs too: {named}.")


def _saved(estimate: dict, mode: str) -> str:
    if estimate[f"{mode}_us"] is None:
        return "-"
    return f"{_time(estimate[f'{mode}_us'])} ({_percent(estimate[f'{mode}_share'])})"


def plot(hot: dict, destination: Path, pyplot, limit: int = 20) -> None:
    """A PNG: the estimated saving of the top ops (plain and guarded bars), over their calls, bypassable ops in green."""
    ops = hot["ops"][:limit]
    if not ops:
        raise BadInput("the run called no aten op: nothing to plot")
    names = [o["name"].removeprefix("aten::") for o in ops]
    positions = range(len(ops))
    figure, (saving, calls) = pyplot.subplots(2, 1, sharex=True, figsize=(max(7, 0.45 * len(ops) + 2), 7),
                                              gridspec_kw={"height_ratios": [2, 1]})
    width = 0.4
    saving.bar([p - width / 2 for p in positions], [o["estimate"]["plain"] or 0 for o in ops], width, label="plain bypass")
    saving.bar([p + width / 2 for p in positions], [o["estimate"]["guarded"] or 0 for o in ops], width, label="guarded bypass")
    saving.set(ylabel="instructions saved (estimate)", title=f"codemod hot: {Path(hot.get('script') or hot.get('trace')).name}, "
                                                           "estimated saving for this run (callgrind instructions/call x calls)")
    saving.yaxis.set_major_formatter("{x:,.0f}")
    for position, o in zip(positions, ops):
        note = f"{o['estimate']['plain']:,}" if o["estimate"]["plain"] is not None else "not measured" if o["bypassable"] else ""
        saving.annotate(note, (position, o["estimate"]["plain"] or 0), ha="center", va="bottom", fontsize=8,
                        xytext=(0, 2), textcoords="offset points")
    saving.legend()
    colors = ["tab:green" if o["bypassable"] else "tab:gray" for o in ops]
    calls.bar(list(positions), [o["dispatcher_calls"] for o in ops], color=colors)
    calls.set(ylabel="calls", yscale="log", ylim=(0.8, max(o["dispatcher_calls"] for o in ops) * 2))
    calls.set_xticks(list(positions), names, rotation=60, ha="right")
    for label, color in zip(calls.get_xticklabels(), colors):
        label.set_color(color)
    calls.legend(handles=[pyplot.Rectangle((0, 0), 1, 1, color=c) for c in ("tab:green", "tab:gray")],
                 labels=["bypassable in the tree", "not bypassable"], loc="upper right")
    figure.tight_layout()
    figure.savefig(destination, dpi=100)
    pyplot.close(figure)


# ---------------------------------------------------------------- bypass --from-hot

def read_report(path: Path, schema: dict) -> dict:
    """A saved `codemod hot --json` object, checked against the output schema (bad input, exit 2, if not one)."""
    try:
        import jsonschema
    except ImportError:
        raise BadInput("--from-hot checks the report with jsonschema: pip install jsonschema") from None
    document = json_file.read(path, "`codemod hot --json` report", "save one with `codemod hot SCRIPT --json > REPORT.json`")
    if not isinstance(document, dict) or document.get("command") != "hot":
        raise BadInput(f"{path}: not the output of `codemod hot --json`")
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError as error:
        where = "/".join(map(str, error.absolute_path)) or "the top level"
        raise BadInput(f"{path}: not a valid `codemod hot --json` report at {where}: {error.message}") from None
    return document


def top_ops(hot: dict, mode: str, top: int) -> list[str]:
    """The TOP bypassable ops of a hot report with the largest estimated saving in MODE (the profiler's names of
    one op, aten::add and aten::add_, summed); ops not measured follow, by calls the bypass covers."""
    if mode not in MODES:
        raise BadInput(f"mode {mode}: one of {', '.join(MODES)}")
    saved: Counter = Counter()
    covered: Counter = Counter()
    for o in hot["ops"]:
        if o["bypassable"]:
            saved[o["op"]] += o["estimate"][mode] or 0
            covered[o["op"]] += o["covered_calls"]
    if not covered:
        raise BadInput("the report has no bypassable op: nothing to bypass")
    return sorted(covered, key=lambda op: (-saved[op], -covered[op], op))[:top]


def ranked(hot: dict, mode: str, ops: list[str]) -> str:
    """How top_ops ranked OPS of a hot report, as --from-hot says it: by estimated saving, or by calls for the ops the
    report has no estimate of (a --no-measure report has none)."""
    unmeasured = [op for op in ops if not any(o["op"] == op and o["estimate"][mode] is not None for o in hot["ops"])]
    if not unmeasured:
        return f"by estimated {mode} saving"
    why = next(o["cost"].get("not_measured", "not measured") for o in hot["ops"] if o["op"] == unmeasured[0])
    if len(unmeasured) == len(ops):
        return f"by calls the bypass covers (the report has no estimate: not measured, {why})"
    return f"by estimated {mode} saving, then by calls the bypass covers ({_names(unmeasured)}: not measured, {why})"
