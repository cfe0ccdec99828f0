"""Time the dispatcher path against the bypass path (and the guarded bypass), in one process, and count instructions.

Wall time: the harness alternates rounds of the op's representative call through each path in one
process and reports every round in ns/call; bench shows each path's median and interquartile range
(the spread torch.utils.benchmark reports), the best round, and the ratio of medians to the dispatcher's
unless its own rounds cannot tell the paths apart (`_compared`), with the machine and its load.
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
import platform
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

# Fewer rounds than this, and a quartile is one or two rounds: their spread says nothing.
MIN_ROUNDS = 10
UNRELIABLE_RULE = (f"shown when the two paths' interquartile ranges at that size do not overlap and there were at least "
                   f"{MIN_ROUNDS} rounds; otherwise - (the rounds cannot tell the two paths apart)")


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
    return {"op": op, "mode": mode, "executable": str(executable), "call": call, "machine": machine(),
            "load_average": {"start": started, "end": load_average()}, "wall": times, "observed": observed,
            "callgrind": counts}


def wall_times(executable: Path, sizes: tuple[int, ...] = SIZES, paths: tuple[str, ...] = PATHS) -> list[dict]:
    """The harness's rounds of PATHS at each size, summarized."""
    return summarized(run_json_lines([str(executable), "time", *map(str, sizes)]), paths)


def summarized(rows: list[dict], paths: tuple[str, ...]) -> list[dict]:
    """ROWS (per size: numel, rounds, and each path's best round P_ns and rounds P_rounds_ns) with, per size and path,
    the median and interquartile range (torch.utils.benchmark's spread: 25th and 75th percentiles, linear
    interpolation); per path compared with the dispatcher, the ratios (`_compared`)."""
    for row in rows:
        for path in paths:
            q1, median, q3 = statistics.quantiles(row[f"{path}_rounds_ns"], n=4, method="inclusive")
            row[f"{path}_median_ns"], row[f"{path}_q1_ns"], row[f"{path}_q3_ns"] = median, q1, q3
            row[f"{path}_iqr_ns"] = q3 - q1
        row["compared"] = {path: _compared(row, path) for path in paths[1:]}
    return rows


def _compared(row: dict, path: str) -> dict:
    """PATH against the dispatcher at ROW's size: the ratio of best rounds, and of medians unless it is unreliable by
    its own rounds (UNRELIABLE_RULE): why, or None."""
    overlap = row["dispatch_q1_ns"] <= row[f"{path}_q3_ns"] and row[f"{path}_q1_ns"] <= row["dispatch_q3_ns"]
    unreliable = (f"fewer than {MIN_ROUNDS} rounds" if row["rounds"] < MIN_ROUNDS
                  else "the interquartile ranges overlap" if overlap else None)
    return {
        "median_ratio": None if unreliable else row["dispatch_median_ns"] / row[f"{path}_median_ns"],
        "best_ratio": row["dispatch_ns"] / row[f"{path}_ns"],
        "unreliable": unreliable,
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

FORMATS = ("table", "markdown")
WIDTH = 100  # columns: a terminal's, and a pull request's text box
_HEADS = ("elements", "path", "median", "interquartile range", "best round", "ratio")


def table(measured: dict) -> str:
    """bench's report, for either mode, in WIDTH columns: what is timed, on which machine under which load; per size
    and path the median, interquartile range and best round of the rounds, and the ratio of medians to the
    dispatcher's (UNRELIABLE_RULE); what the profiler and autograd observe per path; callgrind's figures."""
    cells = _cells(measured)
    widths = [max(len(text) for text in column) for column in zip(_HEADS, *cells)]

    def aligned(texts: tuple[str, ...]) -> str:  # numbers right-aligned, the path's name left
        return "  ".join(t.ljust(w) if i == 1 else t.rjust(w) for i, (t, w) in enumerate(zip(texts, widths))).rstrip()

    counts = measured["callgrind"]
    labels = LABELS[measured["mode"]]
    lines = [
        *_fitted(_described(measured)),
        aligned(_HEADS),
        *(aligned(row) for row in cells),
        *_fitted([f"ratio: the dispatcher's median over the path's, {UNRELIABLE_RULE}", *_observed(measured)]),
        *(_fitted(_instructions(counts, labels)) + _call_paths(counts, labels) if counts else []),
    ]
    return "\n".join(lines)


def markdown(measured: dict) -> str:
    """table's report as markdown to paste into a pull request: the same figures, a markdown table, the call paths
    folded away."""
    counts = measured["callgrind"]
    labels = LABELS[measured["mode"]]
    title, *described, rounds = _described(measured)
    lines = [
        *_fitted([f"**{title}**"]),
        "",
        *_fitted([f"- {line}" for line in described]),
        "",
        rounds,
        "",
        f"| {' | '.join(_HEADS)} |",
        "|---:|---|---:|---:|---:|---:|",
        *(f"| {' | '.join(row)} |" for row in _cells(measured)),
        "",
        *_fitted([f"Ratio: the dispatcher's median over the path's, {UNRELIABLE_RULE}."]),
        "",
        *(line for said in _observed(measured) + (_instructions(counts, labels) if counts else []) for line in _fitted([f"- {said}"])),
    ]
    if counts:
        lines += ["", "<details><summary>Call paths (callgrind)</summary>", "", "```", *_call_paths(counts, labels), "```", "</details>"]
    return "\n".join(lines)


def _described(measured: dict) -> list[str]:
    """What is timed, how, on which machine under which load, and how many rounds."""
    labels, times, load = LABELS[measured["mode"]], measured["wall"], measured["load_average"]
    names = " vs ".join(f"{labels[p]} `{_path_call(measured['op'], p)}`" for p in labels)
    return [
        f"{measured['op']}: {names}, in one process, interleaved",
        f"calling {measured['call']}",
        f"machine: {measured['machine']['cpu']}, {measured['machine']['cores']} cores",
        f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load['start'])} at start, "
        f"{' '.join(f'{x:.2f}' for x in load['end'])} at end",
        f"ns/call over {times[0]['rounds'] if times else 0} rounds per path and size:",
    ]


def _cells(measured: dict) -> list[tuple[str, ...]]:
    """One row per size and path (_HEADS): the size on its first path's row, the ratio on the paths compared."""
    labels = LABELS[measured["mode"]]
    rows = []
    for row in measured["wall"]:
        for path, label in labels.items():
            compared = row["compared"].get(path)
            ratio = "" if compared is None else f"{compared['median_ratio']:.2f}x" if compared["median_ratio"] else "-"
            rows.append((f"{row['numel']:,}" if path == "dispatch" else "", label, _ns(row[f"{path}_median_ns"]),
                         f"{_ns(row[f'{path}_q1_ns'])}-{_ns(row[f'{path}_q3_ns'])}", _ns(row[f"{path}_ns"]), ratio))
    return rows


def _observed(measured: dict) -> list[str]:
    labels = LABELS[measured["mode"]]
    return [f"{labels[path]}: profiler records {', '.join(seen['profiler_events']) or 'nothing'}; requires_grad input -> "
            f"grad_fn {seen['grad_fn'] or 'none'}" for path, seen in measured["observed"].items()]


def _path_call(op: str, path: str) -> str:
    return {"dispatch": f"at::{op}", "bypass": f"{ext_namespace(op)}::", "guarded": f"{guarded_ext.ext_namespace(op)}::{op}"}[path]


def machine() -> dict:
    """The CPU's model name and how many cores: what wall times are measured on."""
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")] if cpuinfo.is_file() else []
    return {"cpu": models[0] if models else platform.processor() or platform.machine(), "cores": os.cpu_count()}


def _instructions(counts: dict, labels: dict[str, str]) -> list[str]:
    per_call = {path: counts["instructions"][path]["per_call"] for path in labels}
    figures = ", ".join(
        f"{labels[p]} {c:,.0f}" + ("" if p == "dispatch" else f" ({per_call['dispatch'] / c:.2f}x)") for p, c in per_call.items()
    )
    lines = [f"instructions/call (callgrind, 2 elements): {figures}"]
    if counts.get("guard_removes") is not None:
        lines.append(f"the guard removes {counts['guard_removes']:.0%} of the {per_call['dispatch'] - per_call['bypass']:,.0f} "
                     "instructions/call the dispatcher adds to the plain bypass")
    return lines


def _call_paths(counts: dict, labels: dict[str, str]) -> list[str]:
    """Each path's calls down to its kernel, and what it runs above the kernel, in WIDTH columns."""
    lines = []
    for path, label in labels.items():
        steps = [f"{s['function']} ({s['inclusive_per_call']:,})" for s in counts["call_path"][path]]
        lines += _wrapped(f"{label} call path (inclusive instructions/call): ", steps)
    for path, label in labels.items():
        lines += _fitted([f"{label} path above the kernel, every call ({counts['above_kernel_per_call'][path]:,.0f} "
                          "own instructions/call in all), heaviest first:"])
        lines += _fitted([f"  {f['function']}  {f['inclusive_per_call']:,.0f} inclusive, {f['own_per_call']:,.0f} own"
                          for f in counts["above_kernel"][path][:8]], indent="      ")
    return lines


def _fitted(lines: list[str], indent: str = "  ") -> list[str]:
    """LINES in WIDTH columns: a longer one goes on over lines indented by INDENT more than it is."""
    fitted = []
    for line in lines:
        leading = line[:len(line) - len(line.lstrip())]
        fitted += [line] if len(line) <= WIDTH else textwrap.wrap(
            line, WIDTH, subsequent_indent=leading + indent, break_long_words=False, break_on_hyphens=False)
    return fitted


def _ns(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _wrapped(head: str, steps: list[str]) -> list[str]:
    """HEAD and STEPS joined by ` -> `, a new line `  -> ...` whenever the next step would pass WIDTH (a step longer
    than a line goes on under its arrow)."""
    lines = [head + steps[0]] if steps else [head]
    for step in steps[1:]:
        if len(lines[-1]) + len(step) + 4 > WIDTH:
            lines.append(f"  -> {step}")
        else:
            lines[-1] += f" -> {step}"
    return _fitted(lines, indent="     ")


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
    """Each path's median ns/call with its interquartile range as a band, and each ratio of medians where it is
    reliable (UNRELIABLE_RULE), against tensor size. The title names the call timed and the load average."""
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
    for path in tuple(labels)[1:]:
        shown = [row for row in times if row["compared"][path]["median_ratio"] is not None]
        ratio.plot([row["numel"] for row in shown], [row["compared"][path]["median_ratio"] for row in shown], "o-",
                   label=f"dispatcher / {labels[path]} (medians)")
    ratio.axhline(1.0, color="grey", linewidth=0.8)
    ratio.set(xscale="log", xlabel="elements (unreliable sizes left out)", ylabel="dispatcher / bypass")
    ratio.legend()
    drawn.tight_layout()
    return drawn
