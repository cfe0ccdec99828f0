"""Time the dispatcher path against the bypass path, both in one process, and count instructions.

Wall time: the harness alternates rounds of `at::OP(a, b)` and the bypass forward
(`codemod_ext_OP::OP(a, b)`) in one process and reports every round in ns/call; bench shows each
path's median and interquartile range (the spread torch.utils.benchmark reports), the ratio of medians,
and flags a size where the two ranges overlap (the ratio is within the noise); the best round is the
figure least disturbed by a shared machine.
Instructions: callgrind runs the harness doing N1 and N2 calls of one path; the
difference over N2 - N1 cancels start-up and first-call initialisation. Callgrind's
call graph of the N2 runs gives each path's call path down to the kernel both share,
and the functions only the dispatcher path runs.
What is lost: the harness reports the profiler's events and the result's grad_fn per path.
The numbers are figures for a human, never assertions.
"""
from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import tempfile
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codemod.model.errors import BadInput, VerificationFailed
from codemod.plan.cpp import namespace_name
from codemod.verify.checks import run_json_lines
from codemod.verify.signature import ext_namespace

PATHS = ("dispatch", "bypass")
SIZES = (1, 2, 16, 256, 4_096, 65_536, 1_048_576)
_TOTALS = re.compile(r"^totals:\s*(\d+)", re.MULTILINE)
# callgrind's compressed names: `fn=(12) name` defines id 12, a later `fn=(12)` refers to it.
_NAMED = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")


# torch.utils.benchmark's warning threshold: an interquartile range above this share of the median
# "suggests significant environmental influence".
NOISY_IQR = 0.10


def wall_times(executable: Path, sizes: tuple[int, ...] = SIZES) -> list[dict]:
    """Per size, each path's best round, median and interquartile range (torch.utils.benchmark's spread:
    25th and 75th percentiles, linear interpolation), and the ratio of medians; `within_noise` when the paths'
    interquartile ranges overlap: at that size the ratio says nothing."""
    rows = run_json_lines([str(executable), "time", *map(str, sizes)])
    for row in rows:
        row["ratio"] = row["dispatch_ns"] / row["bypass_ns"] if row["bypass_ns"] else None
        for path in PATHS:
            q1, median, q3 = statistics.quantiles(row[f"{path}_rounds_ns"], n=4, method="inclusive")
            row[f"{path}_median_ns"], row[f"{path}_q1_ns"], row[f"{path}_q3_ns"] = median, q1, q3
            row[f"{path}_iqr_ns"] = q3 - q1
        row["median_ratio"] = row["dispatch_median_ns"] / row["bypass_median_ns"] if row["bypass_median_ns"] else None
        row["within_noise"] = row["dispatch_q1_ns"] <= row["bypass_q3_ns"] and row["bypass_q1_ns"] <= row["dispatch_q3_ns"]
        row["noisy"] = any(row[f"{p}_iqr_ns"] > NOISY_IQR * row[f"{p}_median_ns"] for p in PATHS)
    return rows


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

    def entry(self, fragment: str) -> str:
        found = next((name for name in self.self_cost.keys() | self.calls.keys() if fragment in name), None)
        if found is None:
            raise VerificationFailed(f"callgrind's call graph has no function `{fragment}...`: was the harness built "
                                     "from cpp_ext/harness.cpp.in?")
        return found

    def times_called(self, name: str) -> int:
        return sum(callees[name] for callees in self.calls.values())

    def inclusive_cost(self, name: str) -> int:
        return sum(callees[name] for callees in self.inclusive.values())


def parse_callgrind(text: str) -> CallGraph:
    """The call graph of a callgrind output file (one event, Ir)."""
    graph, names = CallGraph(), {}
    function = callee = None
    pending_call = 0  # set by `calls=N`: the next cost line is that call's inclusive cost
    for line in text.splitlines():
        named = _NAMED.match(line)
        if named:
            kind, ident, name = named.groups()
            names.setdefault(ident, name)
            if kind == "fn":
                function = names[ident]
            else:
                callee = names[ident]
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


def callgrind(executable: Path, op: str, n1: int = 1_000, n2: int = 3_000) -> dict:
    """Instructions per call of each path, (total(N2) - total(N1)) / (N2 - N1), and the call paths."""
    if shutil.which("valgrind") is None:
        raise BadInput("valgrind not found; install it or pass --no-callgrind")
    probe = run_json_lines([str(executable), "calls", "dispatch", "0"])
    client_requests = bool(probe and probe[0].get("client_requests"))
    runs = [(path, n) for path in PATHS for n in (n1, n2)]
    with tempfile.TemporaryDirectory(prefix="codemod-callgrind-") as scratch, ThreadPoolExecutor(len(runs)) as pool:
        texts = dict(zip(runs, pool.map(lambda run: callgrind_run(executable, *run, Path(scratch), client_requests), runs)))
    totals = {run: _total(text, f"callgrind {run[0]} {run[1]}") for run, text in texts.items()}
    instructions = {
        path: {
            "n1": n1, "n2": n2, "total_n1": totals[path, n1], "total_n2": totals[path, n2],
            "per_call": (totals[path, n2] - totals[path, n1]) / (n2 - n1),
        }
        for path in PATHS
    }
    graphs = {path: parse_callgrind(texts[path, n2]) for path in PATHS}
    return {"instructions": instructions, **call_paths(op, graphs, n2)}


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
    """Each path from the harness down to the first function both paths run (the kernel), by heaviest call;
    and the functions only the dispatcher path runs on every call, above that kernel."""
    common = {
        path: {_common_name(n, op) for n in graph.self_cost.keys() | graph.calls.keys()} for path, graph in graphs.items()
    }
    shared = common["dispatch"] & common["bypass"]

    def heaviest_path(graph: CallGraph, entry: str) -> list[dict]:
        path, current = [], entry
        while current is not None and len(path) < 30:
            path.append({"function": short_name(current), "inclusive_per_call": round(graph.inclusive_cost(current) / calls)})
            if _common_name(current, op) in shared:
                break
            callees = graph.inclusive.get(current)
            current = max(callees, key=callees.get) if callees else None
        return path

    dispatch = graphs["dispatch"]
    entry = dispatch.entry("dispatch_functional(")
    only, frontier = set(), [entry]
    while frontier:  # everything reachable from the entry without passing through a shared function
        caller = frontier.pop()
        for callee in dispatch.calls.get(caller, ()):
            if _common_name(callee, op) not in shared and callee not in only:
                only.add(callee)
                frontier.append(callee)
    every_call = sorted(
        (n for n in only if dispatch.times_called(n) >= calls), key=dispatch.inclusive_cost, reverse=True
    )
    return {
        "call_path": {
            "dispatch": heaviest_path(dispatch, entry),
            "bypass": heaviest_path(graphs["bypass"], graphs["bypass"].entry("bypass_functional(")),
        },
        "dispatcher_only": [
            {
                "function": short_name(n),
                "inclusive_per_call": round(dispatch.inclusive_cost(n) / calls),
                "self_per_call": round(dispatch.self_cost[n] / calls),
            }
            for n in every_call
        ],
        "dispatcher_only_self_per_call": round(sum(dispatch.self_cost[n] for n in every_call) / calls),
    }


# ---------------------------------------------------------------- report

def table(op: str, times: list[dict], observed: dict[str, dict], counts: dict | None, timed_call: str) -> str:
    rounds = times[0]["rounds"] if times else 0
    cells = [
        (f"{row['numel']:,}", _spread(row, "dispatch"), _spread(row, "bypass"),
         (f"{row['median_ratio']:.2f}x" if row["median_ratio"] else "-") + (" ~noise" if row["within_noise"] else " noisy" if row["noisy"] else ""),
         _ns(row["dispatch_ns"]), _ns(row["bypass_ns"]))
        for row in times
    ]
    heads = ("elements", "dispatcher", "bypass", "ratio", "dispatcher", "bypass")
    widths = [max(len(text) for text in column) for column in zip(heads, *cells)]
    lines = [
        f"{op}: dispatcher `at::` vs bypass `codemod_ext_{op}::` (one process, interleaved), calling {timed_call}",
        f"ns/call over {rounds} rounds: median [interquartile range], ratio of the medians, and the best round",
        "  ".join(head.rjust(width) if i in (0, 4, 5) else head.ljust(width) for i, (head, width) in enumerate(zip(heads, widths))).rstrip(),
    ]
    for row in cells:
        lines.append("  ".join(text.rjust(width) if i in (0, 4, 5) else text.ljust(width) for i, (text, width) in enumerate(zip(row, widths))).rstrip())
    if any(row["within_noise"] for row in times):
        lines.append("~noise: the two paths' interquartile ranges overlap at this size, so the ratio is within the noise")
    if any(row["noisy"] and not row["within_noise"] for row in times):
        lines.append(f"noisy: an interquartile range above {NOISY_IQR:.0%} of its median (a busy machine); read the ratio with care")
    for path, label in (("dispatch", "dispatcher"), ("bypass", "bypass")):
        seen = observed[path]
        events = ", ".join(seen["profiler_events"]) or "nothing"
        lines.append(
            f"{label}: profiler records {events}; requires_grad input -> grad_fn {seen['grad_fn'] or 'none'}"
        )
    if counts:
        d, b = (counts["instructions"][path]["per_call"] for path in PATHS)
        n1, n2 = counts["instructions"]["dispatch"]["n1"], counts["instructions"]["dispatch"]["n2"]
        lines.append(
            f"callgrind, 2 elements, ({n2:,} - {n1:,} calls): "
            f"dispatcher {d:,.0f} instructions/call, bypass {b:,.0f} instructions/call ({d / b:.2f}x)"
        )
        for path, label in (("dispatch", "dispatcher"), ("bypass", "bypass")):
            steps = [f"{s['function']} ({s['inclusive_per_call']:,})" for s in counts["call_path"][path]]
            lines += _wrapped(f"{label} call path (inclusive instructions/call): ", steps)
        lines.append(
            f"run only on the dispatcher path, every call ({counts['dispatcher_only_self_per_call']:,} own "
            "instructions/call in all), heaviest first:"
        )
        lines += [
            f"  {f['function']}  {f['inclusive_per_call']:,} inclusive, {f['self_per_call']:,} own"
            for f in counts["dispatcher_only"][:8]
        ]
    return "\n".join(lines)


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


def plot(op: str, times: list[dict], destination: Path, pyplot) -> None:
    """A PNG of `figure`."""
    drawn = figure(op, times, pyplot)
    drawn.savefig(destination, dpi=100)
    pyplot.close(drawn)


def figure(op: str, times: list[dict], pyplot):
    """Both paths' median ns/call with their interquartile range as a band, and the ratio of medians, against
    tensor size; sizes whose ratio is within the noise are marked."""
    sizes = [row["numel"] for row in times]
    drawn, (timing, ratio) = pyplot.subplots(2, 1, sharex=True, figsize=(7, 7))
    for path, label, marker in (("dispatch", f"at::{op} via dispatcher", "o-"), ("bypass", "bypass", "s-")):
        line, = timing.plot(sizes, [row[f"{path}_median_ns"] for row in times], marker, label=label)
        timing.fill_between(
            sizes, [row[f"{path}_q1_ns"] for row in times], [row[f"{path}_q3_ns"] for row in times],
            color=line.get_color(), alpha=0.25, linewidth=0,
        )
    timing.set(xscale="log", yscale="log", ylabel="ns/call (median, band: interquartile range)",
               title=f"{op}: dispatcher vs bypass, float32")
    timing.legend()
    ratio.plot(sizes, [row["median_ratio"] for row in times], "o-", color="black", label="dispatcher / bypass (medians)")
    noise = [row for row in times if row["within_noise"]]
    if noise:
        ratio.plot([row["numel"] for row in noise], [row["median_ratio"] for row in noise], "x", color="red", markersize=10,
                   label="within the noise (interquartile ranges overlap)")
    ratio.axhline(1.0, color="grey", linewidth=0.8)
    ratio.set(xscale="log", xlabel="elements", ylabel="dispatcher / bypass")
    ratio.legend()
    drawn.tight_layout()
    return drawn
