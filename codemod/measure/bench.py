"""Time the dispatcher path against the bypass path (and the guarded bypass), in one process, and count instructions.

Wall time: the harness alternates rounds of the op's representative call through each path in one
process and reports every round in ns/call; bench shows each path's median and interquartile range
(the spread torch.utils.benchmark reports), the ratio of medians to the dispatcher's, the best round,
and flags what makes a ratio untrustworthy (`_compared`), with the load average before and after.
Instructions: callgrind runs the harness doing N1 and N2 calls of one path; the
difference over N2 - N1 cancels start-up and first-call initialisation. Callgrind's
call graph of the N2 runs gives each path's call path down to its kernel, and what each
path runs above it (the dispatcher's layers; the guard).
What is lost: the harness reports the profiler's events and the result's grad_fn per path.
The numbers are figures for a human, never assertions.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import textwrap
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codemod.measure import guarded_ext
from codemod.model import progress
from codemod.model.errors import BadInput, VerificationFailed
from codemod.plan.cpp import namespace_name
from codemod.verify.checks import run_json_lines
from codemod.verify.signature import ext_namespace

# Each mode's paths, as the harness names them, and their labels; the dispatcher first, the paths compared with it after.
LABELS = {
    "plain": {"dispatch": "dispatcher", "bypass": "bypass"},
    "guarded": {"dispatch": "dispatcher", "bypass": "plain", "guarded": "guarded"},
}
PATHS = tuple(LABELS["plain"])
SIZES = (1, 2, 16, 256, 4_096, 65_536, 1_048_576)
_TOTALS = re.compile(r"^totals:\s*(\d+)", re.MULTILINE)
# callgrind's compressed names: `fn=(12) name` defines id 12, a later `fn=(12)` refers to it; `ob=` likewise.
_NAMED = re.compile(r"^(c?fn|c?ob)=\((\d+)\)(?: (.*))?$")


# torch.utils.benchmark's warning threshold: an interquartile range above this share of the median
# "suggests significant environmental influence".
NOISY_IQR = 0.10
# A median this many times its best round: most rounds were slowed by something else (a loaded machine).
UNRELIABLE_SPREAD = 10


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages: how busy the machine was, for reading wall times."""
    return [round(load, 2) for load in os.getloadavg()]


def measure(executable: Path, op: str, mode: str, call: str, sizes: tuple[int, ...], count: bool) -> dict:
    """Wall times, what the profiler and autograd observe, and (COUNT) callgrind's instructions, of MODE's paths;
    the load average before and after."""
    paths = tuple(LABELS[mode])
    started = load_average()
    with progress.step(f"time {len(paths)} paths, interleaved"):
        times = wall_times(executable, sizes, paths)
    observed = observe(executable)
    counts = None
    if count:
        with progress.step("callgrind: instructions per call and call paths"):
            counts = callgrind(executable, op, paths)
    return {"op": op, "mode": mode, "executable": str(executable), "call": call,
            "load_average": {"start": started, "end": load_average()}, "wall": times, "observed": observed,
            "callgrind": counts}


def wall_times(executable: Path, sizes: tuple[int, ...] = SIZES, paths: tuple[str, ...] = PATHS) -> list[dict]:
    """The harness's rounds of PATHS at each size, summarized."""
    return summarized(run_json_lines([str(executable), "time", *map(str, sizes)]), paths)


def summarized(rows: list[dict], paths: tuple[str, ...]) -> list[dict]:
    """ROWS (per size: numel, and each path's best round P_ns and rounds P_rounds_ns) with, per size and path, the
    median and interquartile range (torch.utils.benchmark's spread: 25th and 75th percentiles, linear interpolation)
    and whether the median is unreliable; per path compared with the dispatcher, the ratio of medians and its flags
    (see `_compared`)."""
    for row in rows:
        for path in paths:
            q1, median, q3 = statistics.quantiles(row[f"{path}_rounds_ns"], n=4, method="inclusive")
            row[f"{path}_median_ns"], row[f"{path}_q1_ns"], row[f"{path}_q3_ns"] = median, q1, q3
            row[f"{path}_iqr_ns"] = q3 - q1
    for row in rows:
        for path in paths:
            row[f"{path}_unreliable"] = _unreliable(row, path, rows)
    for row in rows:
        row["compared"] = {path: _compared(row, path) for path in paths[1:]}
    return rows


def _unreliable(row: dict, path: str, rows: list[dict]) -> str | None:
    """Why PATH's median at ROW's size cannot be read as its cost: far above its best round, or above the median of
    a larger size (more work cannot take less time); None when neither."""
    median, best = row[f"{path}_median_ns"], row[f"{path}_ns"]
    if median > UNRELIABLE_SPREAD * best:
        return f"median {median / best:,.0f}x the best round"
    larger_but_faster = [r["numel"] for r in rows if r["numel"] > row["numel"] and r[f"{path}_median_ns"] < median]
    if larger_but_faster:
        return f"median above the {min(larger_but_faster):,}-element median"
    return None


def _compared(row: dict, path: str) -> dict:
    """PATH against the dispatcher at ROW's size: the ratio of medians (None when a median is unreliable), of best
    rounds, and the flags that say how far to trust it: `unreliable`; `~noise`, the two interquartile ranges
    overlap; `noisy`, a range passes NOISY_IQR of its median."""
    pair = ("dispatch", path)
    flags = []
    if any(row[f"{p}_unreliable"] for p in pair):
        flags.append("unreliable")
    if row["dispatch_q1_ns"] <= row[f"{path}_q3_ns"] and row[f"{path}_q1_ns"] <= row["dispatch_q3_ns"]:
        flags.append("~noise")
    if any(row[f"{p}_iqr_ns"] > NOISY_IQR * row[f"{p}_median_ns"] for p in pair):
        flags.append("noisy")
    return {
        "median_ratio": None if "unreliable" in flags else row["dispatch_median_ns"] / row[f"{path}_median_ns"],
        "best_ratio": row["dispatch_ns"] / row[f"{path}_ns"],
        "flags": flags,
    }


def observe(executable: Path) -> dict[str, dict]:
    """Per path: the profiler's events for one call, and whether a requires_grad input gives a grad_fn."""
    return {row.pop("path"): row for row in run_json_lines([str(executable), "observe"])}


# ---------------------------------------------------------------- callgrind

@dataclass
class CallGraph:
    """Callgrind's call graph: each function's own instructions, and its calls with their inclusive cost."""

    self_cost: Counter = field(default_factory=Counter)
    calls: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # caller -> callee -> count
    inclusive: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # caller -> callee -> Ir
    objects: dict[str, str] = field(default_factory=dict)  # function -> the executable or library holding it

    def functions(self) -> set[str]:
        return self.self_cost.keys() | self.calls.keys()

    def entry(self, fragment: str) -> str:
        found = next((name for name in self.functions() if fragment in name), None)
        if found is None:
            raise VerificationFailed(f"callgrind's call graph has no function `{fragment}...`: was the harness built "
                                     "from cpp_ext/harness.cpp.in?")
        return found

    def inclusive_cost(self, name: str) -> int:
        return sum(callees[name] for callees in self.inclusive.values())

    def reachable(self, start: str, avoiding: set[str]) -> set[str]:
        """Every function START calls, directly or not, without passing through AVOIDING."""
        found, frontier = set(), [start]
        while frontier:
            for callee in self.calls.get(frontier.pop(), ()):
                if callee not in avoiding and callee not in found:
                    found.add(callee)
                    frontier.append(callee)
        return found


def parse_callgrind(text: str) -> CallGraph:
    """The call graph of a callgrind output file (one event, Ir)."""
    graph, names, objects = CallGraph(), {}, {}
    function = callee = obj = None
    pending_call = 0  # set by `calls=N`: the next cost line is that call's inclusive cost
    for line in text.splitlines():
        named = _NAMED.match(line)
        if named:
            kind, ident, name = named.groups()
            if kind == "ob":
                obj = objects.setdefault(ident, name)
            elif kind == "fn":
                function = names.setdefault(ident, name)
                graph.objects.setdefault(function, obj)
            elif kind == "cfn":
                callee = names.setdefault(ident, name)
            else:  # cob: a callee's object, known again where the callee's own costs are listed
                objects.setdefault(ident, name)
        elif line.startswith("calls="):
            pending_call = int(line[len("calls="):].split()[0])
        elif function is not None and (line[:1].isdigit() or line[:1] in "+-*"):
            cost = int(line.split()[-1]) if len(line.split()) > 1 else 0
            if pending_call:
                graph.calls[function][callee] += pending_call
                graph.inclusive[function][callee] += cost
                pending_call = 0
            else:
                graph.self_cost[function] += cost
    return graph


def callgrind_run(executable: Path, path: str, calls: int, scratch: Path, client_requests: bool) -> str:
    out = scratch / f"callgrind.{path}.{calls}"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if client_requests:
        command.append("--instr-atstart=no")  # the harness switches it on around its loop
    command += [str(executable), "calls", path, str(calls)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not out.is_file():
        raise VerificationFailed(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr.strip()[-2000:]}")
    return out.read_text(errors="replace")


def _total(text: str, source: str) -> int:
    match = _TOTALS.search(text)
    if match is None:
        raise VerificationFailed(f"{source}: no `totals:` line in callgrind's output")
    return int(match.group(1))


def count(executable: Path, paths: tuple[str, ...], n1: int = 1_000, n2: int = 3_000) -> tuple[dict, dict[str, CallGraph]]:
    """Instructions per call of each path, (total(N2) - total(N1)) / (N2 - N1), and each path's call graph of N2 calls."""
    if shutil.which("valgrind") is None:
        raise BadInput("valgrind not found; install it or pass --no-callgrind")
    probe = run_json_lines([str(executable), "calls", "dispatch", "0"])
    client_requests = bool(probe and probe[0].get("client_requests"))
    runs = [(path, n) for path in paths for n in (n1, n2)]
    with tempfile.TemporaryDirectory(prefix="codemod-callgrind-") as scratch, ThreadPoolExecutor(len(runs)) as pool:
        texts = dict(zip(runs, pool.map(lambda run: callgrind_run(executable, *run, Path(scratch), client_requests), runs)))
    totals = {run: _total(text, f"callgrind {run[0]} {run[1]}") for run, text in texts.items()}
    instructions = {
        path: {
            "n1": n1, "n2": n2, "total_n1": totals[path, n1], "total_n2": totals[path, n2],
            "per_call": (totals[path, n2] - totals[path, n1]) / (n2 - n1),
        }
        for path in paths
    }
    return instructions, {path: parse_callgrind(texts[path, n2]) for path in paths}


def callgrind(executable: Path, op: str, paths: tuple[str, ...] = PATHS) -> dict:
    """Instructions per call of each path, each path's calls down to its kernel and what it runs above it; with a
    guarded path, the share of the dispatcher's extra instructions the guard removes."""
    instructions, graphs = count(executable, paths)
    counts = {"instructions": instructions, **call_paths(op, graphs, instructions["dispatch"]["n2"])}
    if "guarded" in paths:
        per_call = {path: instructions[path]["per_call"] for path in paths}
        extra = per_call["dispatch"] - per_call["bypass"]
        counts["guard_removes"] = (per_call["dispatch"] - per_call["guarded"]) / extra if extra else None
    return counts


def _common_name(name: str, op: str) -> str:
    """NAME with the extension's namespaces taken out, so its copy of the scaffolding matches libtorch's."""
    for namespace in (ext_namespace(op), namespace_name(op)):
        name = name.replace(f"{namespace}::", "")
    return name.removeprefix("at::") if name.startswith("at::(anonymous namespace)::") else name


def short_name(name: str) -> str:
    """`c10::Dispatcher::call` for a demangled name: no template arguments, parameters or return type."""
    name = re.sub(r" \[clone [^\]]*\]$", "", name.replace("(anonymous namespace)::", ""))
    while (shorter := re.sub(r"<[^<>]*>", "", name)) != name:
        name = shorter
    name = name.removesuffix(" const")
    if name.endswith(")"):
        depth = 0
        for index in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[index], 0)
            if depth == 0:
                name = name[:index]
                break
    return re.sub(r"^\w+ (?=[\w:~]+::)", "", name)  # the return type of a template function


def call_paths(op: str, graphs: dict[str, CallGraph], calls: int) -> dict:
    """Per path: its calls from the harness down to its kernel, by heaviest call (the kernel: the first function
    the path it is compared with also runs; the dispatcher is compared with the plain bypass, any other path
    with the dispatcher); and the functions it runs above the kernel on every call, with their instructions."""
    common = {path: {_common_name(n, op) for n in graph.functions()} for path, graph in graphs.items()}
    found = {"call_path": {}, "above_kernel": {}, "above_kernel_per_call": {}}
    for path, graph in graphs.items():
        shared = common[path] & common["bypass" if path == "dispatch" else "dispatch"]
        entry = graph.entry(f"{path}_functional(")
        steps = [entry]
        while _common_name(steps[-1], op) not in shared and graph.inclusive.get(steps[-1]) and len(steps) < 30:
            callees = graph.inclusive[steps[-1]]
            steps.append(max(callees, key=callees.get))
        kernel = steps[-1] if _common_name(steps[-1], op) in shared else None
        above = _above_kernel(graph, entry, kernel, calls)
        found["call_path"][path] = [
            {"function": linker_name(graph, n, op), "inclusive_per_call": round(graph.inclusive_cost(n) / calls)} for n in steps
        ]
        found["above_kernel"][path] = [{**f, "function": linker_name(graph, f["function"], op)} for f in above if f["every_call"]]
        found["above_kernel_per_call"][path] = sum(f["own_per_call"] for f in above)
    return found


def _above_kernel(graph: CallGraph, entry: str, kernel: str | None, calls: int) -> list[dict]:
    """What ENTRY runs besides KERNEL, per call, heaviest first: each function called from above the kernel, with
    the inclusive instructions of those calls and its own. A function that something else calls too (malloc, a
    TLS read, a destructor the harness's loop runs as well) is not split: the whole cost of the calls from above
    counts as its own. The own instructions add up to ENTRY's callees' inclusive cost less the kernel's."""
    callers = defaultdict(set)
    for caller, callees in graph.calls.items():
        for callee in callees:
            callers[callee].add(caller)
    only_above = graph.reachable(entry, {kernel} if kernel else set())
    while outside := {f for f in only_above if not callers[f] <= only_above | {entry}}:
        only_above -= outside  # called from elsewhere too, and so is what only it calls
    rows = []
    for function in {callee for caller in only_above | {entry} for callee in graph.calls.get(caller, ())} - {kernel}:
        from_above = [c for c in only_above | {entry} if function in graph.calls.get(c, ())]
        inclusive = sum(graph.inclusive[c][function] for c in from_above)
        own = graph.self_cost[function] if function in only_above else inclusive
        rows.append({"function": function, "inclusive_per_call": round(inclusive / calls, 1), "own_per_call": round(own / calls, 1),
                     "every_call": sum(graph.calls[c][function] for c in from_above) >= calls})
    return sorted(rows, key=lambda row: -row["inclusive_per_call"])


def linker_name(graph: CallGraph, function: str, op: str) -> str:
    """FUNCTION's short name; when the linker folded identical functions into one copy (callgrind names it after
    any of them: `structured_lcm_out_functional::maybe_get_output` for mul's), the one of OP among them if any,
    and the fold said."""
    names = {short_name(n) for n in _same_address(graph.objects.get(function), function)}
    shown = short_name(function)
    if len(names) <= 1:
        return shown
    own = sorted(n for n in names if re.search(rf"(?<![A-Za-z0-9]){re.escape(op)}(?![A-Za-z0-9])", n))
    if own and own[0] != shown:
        return f"{own[0]} (linker-folded with {len(names) - 1} identical functions; callgrind names it {shown})"
    return f"{shown} (linker-folded with {len(names) - 1} identical functions)"


def _same_address(obj: str | None, function: str) -> list[str]:
    """The demangled names OBJ defines at FUNCTION's address (FUNCTION alone when nm cannot tell)."""
    by_name, by_address = _symbols(obj) if obj and Path(obj).is_file() else ({}, {})
    return by_address[by_name[function]] if function in by_name else [function]


@functools.cache
def _symbols(obj: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The functions OBJ defines, by nm: demangled name -> address, and address -> names; empty without nm."""
    if shutil.which("nm") is None:
        return {}, {}
    listed = subprocess.run(["nm", "--defined-only", "-C", obj], capture_output=True, text=True, errors="replace")
    by_name, by_address = {}, defaultdict(list)
    for line in listed.stdout.splitlines():
        address, kind, name = (line.split(" ", 2) + ["", ""])[:3]
        if kind in ("t", "T", "w", "W") and name and name not in by_name:
            by_name[name] = address
            by_address[address].append(name)
    return by_name, by_address


# ---------------------------------------------------------------- report

FLAG_MEANINGS = {
    "unreliable": f"a median more than {UNRELIABLE_SPREAD}x its best round, or above a larger size's median: the rounds "
                  "were disturbed (a busy machine), so no ratio is shown; rerun when the machine is quieter",
    "~noise": "the two paths' interquartile ranges overlap at this size, so the ratio is within the noise",
    "noisy": f"an interquartile range above {NOISY_IQR:.0%} of its median (a busy machine); read the ratio with care",
}


def table(measured: dict) -> str:
    """bench's report, for either mode: the call timed and the load, wall times per size, what the profiler and
    autograd observe per path, and callgrind's figures."""
    labels = LABELS[measured["mode"]]
    paths, others = tuple(labels), tuple(labels)[1:]
    times = measured["wall"]
    ratio_head = {path: "ratio" if len(others) == 1 else f"{labels[path]} ratio" for path in others}
    heads = ("elements", *(labels[p] for p in paths), *(ratio_head[p] for p in others), *(labels[p] for p in paths))
    cells = [
        (f"{row['numel']:,}", *(_spread(row, p) for p in paths), *(_ratio(row["compared"][p]) for p in others),
         *(_ns(row[f"{p}_ns"]) for p in paths))
        for row in times
    ]
    right = {0, *range(len(heads) - len(paths), len(heads))}  # numbers alone right-aligned
    widths = [max(len(text) for text in column) for column in zip(heads, *cells)]

    def aligned(texts) -> str:
        return "  ".join(t.rjust(w) if i in right else t.ljust(w) for i, (t, w) in enumerate(zip(texts, widths))).rstrip()

    names = " vs ".join(f"{labels[p]} `{_path_call(measured['op'], p)}`" for p in paths)
    lines = [
        f"{measured['op']}: {names} (one process, interleaved), calling {measured['call']}",
        _load_line(measured["load_average"]),
        f"ns/call over {times[0]['rounds'] if times else 0} rounds: median [interquartile range], ratio of the medians, "
        "and the best round",
        aligned(heads),
        *(aligned(row) for row in cells),
    ]
    flags = {flag for row in times for p in others for flag in row["compared"][p]["flags"]}
    lines += [f"{flag}: {meaning}" for flag, meaning in FLAG_MEANINGS.items() if flag in flags]
    for path, seen in measured["observed"].items():
        events = ", ".join(seen["profiler_events"]) or "nothing"
        lines.append(f"{labels[path]}: profiler records {events}; requires_grad input -> grad_fn {seen['grad_fn'] or 'none'}")
    if measured["callgrind"]:
        lines += _callgrind_lines(measured["callgrind"], labels)
    return "\n".join(lines)


def _path_call(op: str, path: str) -> str:
    return {"dispatch": f"at::{op}", "bypass": f"{ext_namespace(op)}::", "guarded": f"{guarded_ext.ext_namespace(op)}::{op}"}[path]


def _load_line(load: dict) -> str:
    return (f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in load['start'])} at start, "
            f"{' '.join(f'{x:.2f}' for x in load['end'])} at end, on {os.cpu_count()} cores")


def _ratio(compared: dict) -> str:
    ratio = f"{compared['median_ratio']:.2f}x" if compared["median_ratio"] else "-"
    return " ".join([ratio, *compared["flags"]])


def _callgrind_lines(counts: dict, labels: dict[str, str]) -> list[str]:
    per_call = {path: counts["instructions"][path]["per_call"] for path in labels}
    n1, n2 = counts["instructions"]["dispatch"]["n1"], counts["instructions"]["dispatch"]["n2"]
    figures = ", ".join(
        f"{labels[p]} {c:,.0f}" + ("" if p == "dispatch" else f" ({per_call['dispatch'] / c:.2f}x)") for p, c in per_call.items()
    )
    lines = [f"callgrind, 2 elements, ({n2:,} - {n1:,} calls), instructions/call: {figures}"]
    if counts.get("guard_removes") is not None:
        lines.append(f"the guard removes {counts['guard_removes']:.0%} of the {per_call['dispatch'] - per_call['bypass']:,.0f} "
                     "instructions/call the dispatcher adds to the plain bypass")
    for path, label in labels.items():
        steps = [f"{s['function']} ({s['inclusive_per_call']:,})" for s in counts["call_path"][path]]
        lines += _wrapped(f"{label} call path (inclusive instructions/call): ", steps)
    for path, label in labels.items():
        above = counts["above_kernel"][path]
        lines.append(f"{label} path above the kernel, every call ({counts['above_kernel_per_call'][path]:,.0f} "
                     "own instructions/call in all), heaviest first:")
        lines += [f"  {f['function']}  {f['inclusive_per_call']:,.0f} inclusive, {f['own_per_call']:,.0f} own" for f in above[:8]]
    return lines


def _ns(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _spread(row: dict, path: str) -> str:
    return f"{_ns(row[f'{path}_median_ns'])} [{_ns(row[f'{path}_q1_ns'])}-{_ns(row[f'{path}_q3_ns'])}]"


def _wrapped(head: str, steps: list[str], width: int = 110) -> list[str]:
    """HEAD and STEPS joined by ` -> `, a new line `  -> ...` whenever the next step would pass WIDTH."""
    lines = [head + steps[0]] if steps else [head]
    for step in steps[1:]:
        if len(lines[-1]) + len(step) + 4 > width:
            lines.append(f"  -> {step}")
        else:
            lines[-1] += f" -> {step}"
    return lines


def pyplot():
    """matplotlib's pyplot, headless. Imported only for `--plot` (the optional `plot` extra), before measuring."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise BadInput("--plot needs matplotlib: pip install -e '.[plot]' (or drop --plot)") from None
    return pyplot


def plot(measured: dict, destination: Path, pyplot) -> None:
    """A PNG of `figure`."""
    drawn = figure(measured, pyplot)
    drawn.savefig(destination, dpi=100)
    pyplot.close(drawn)


def figure(measured: dict, pyplot):
    """Each path's median ns/call with its interquartile range as a band, and each ratio of medians, against tensor
    size; flagged sizes marked. The title names the call timed and the load average."""
    labels, times, op = LABELS[measured["mode"]], measured["wall"], measured["op"]
    sizes = [row["numel"] for row in times]
    drawn, (timing, ratio) = pyplot.subplots(2, 1, sharex=True, figsize=(7, 7.5))
    for path, marker in zip(labels, ("o-", "s-", "^-")):
        name = labels[path] if labels[path].endswith("bypass") else f"{labels[path]} bypass"  # "plain bypass"
        label = f"at::{op} via dispatcher" if path == "dispatch" else name
        line, = timing.plot(sizes, [row[f"{path}_median_ns"] for row in times], marker, label=label)
        timing.fill_between(
            sizes, [row[f"{path}_q1_ns"] for row in times], [row[f"{path}_q3_ns"] for row in times],
            color=line.get_color(), alpha=0.25, linewidth=0,
        )
    load = measured["load_average"]
    timing.set(xscale="log", yscale="log", ylabel="ns/call (median, band: interquartile range)",
               title=textwrap.fill(f"{op}: calling {measured['call']}", 80)
               + f"\nload average {load['start'][0]:.2f} at start, {load['end'][0]:.2f} at end")
    timing.title.set_fontsize(9)
    timing.legend()
    flagged_label = "flagged: ~noise or noisy"  # once in the legend
    for path in tuple(labels)[1:]:
        shown = [row for row in times if row["compared"][path]["median_ratio"] is not None]
        ratio.plot([row["numel"] for row in shown], [row["compared"][path]["median_ratio"] for row in shown], "o-",
                   label=f"dispatcher / {labels[path]} (medians)")
        flagged = [row for row in shown if row["compared"][path]["flags"]]
        if flagged:
            ratio.plot([row["numel"] for row in flagged], [row["compared"][path]["median_ratio"] for row in flagged], "x",
                       color="red", markersize=10, label=flagged_label)
            flagged_label = None
    ratio.axhline(1.0, color="grey", linewidth=0.8)
    ratio.set(xscale="log", xlabel="elements (unreliable sizes left out)", ylabel="dispatcher / bypass")
    ratio.legend()
    drawn.tight_layout()
    return drawn
