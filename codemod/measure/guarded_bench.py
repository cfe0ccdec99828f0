"""`codemod bench OP --guarded`: the dispatcher, the plain bypass and the guarded bypass, measured alike.

The program is `codemod build`'s harness (harness.render, unchanged: the dispatcher and the plain
bypass paths) with the guarded `at::OP` appended, rendered by guarded_ext from plan_guarded's text,
and a `main` that adds the third path to `time` and `calls` and hands every other mode to the
harness. Callgrind counts instructions per call as for the plain bypass; the guard's worth is
the share of the dispatcher's extra instructions it removes: (dispatch - guarded) / (dispatch - bypass).
"""
from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codemod.measure import bench, guarded_ext
from codemod.model.errors import VerificationFailed
from codemod.model.tree import Tree
from codemod.verify import captured, checks, compiler, harness

PATHS = ("dispatch", "bypass", "guarded")
GOAL = 0.85  # issue 7: the guard removes at least 85% of what the dispatcher costs per call
_HARNESS_MAIN = "int main(int argc, char** argv) {"

_APPENDED = """
// Appended by codemod.guarded_bench: the guarded bypass as `codemod bypass @OP@ --guarded` writes it.
@GUARDED@

namespace {
const char* const kNames[] = {"dispatch", "bypass", "guarded"};  // PATHS in guarded_bench.py

at::Tensor guarded_functional(const Sample& s) {
  return @GUARDED_CALL@;
}

// The three paths, each round alternating them, as the harness does for two.
int time_three(int argc, char** argv) {
  const Path paths[] = {dispatch_functional, bypass_functional, guarded_functional};
  for (int i = 0; i < argc; ++i) {
    const long numel = std::atol(argv[i]);
    const auto s = make_sample(numel);
    TORCH_CHECK(at::equal(dispatch_functional(s), guarded_functional(s)), "the paths disagree");
    const long calls = std::max(1L, static_cast<long>(1e6 / ns_per_call(dispatch_functional, s, 20)));
    std::vector<double> rounds[3];
    for (int round = 0; round < 41; ++round)
      for (int p = 0; p < 3; ++p) rounds[p].push_back(ns_per_call(paths[p], s, calls));
    std::printf("{\\"numel\\": %ld", numel);
    for (int p = 0; p < 3; ++p)
      std::printf(", \\"%s_ns\\": %.1f, \\"%s_median_ns\\": %.1f", kNames[p], *std::min_element(rounds[p].begin(), rounds[p].end()),
                  kNames[p], median(rounds[p]));
    std::printf("}\\n");
  }
  return 0;
}

int guarded_calls(long n) {
  const auto s = make_sample(2);
  CALLGRIND_START_INSTRUMENTATION;
  for (long i = 0; i < n; ++i) {
    auto r = guarded_functional(s);
    asm volatile("" : : "r"(r.unsafeGetTensorImpl()) : "memory");
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "time" && argc > 2) return time_three(argc - 2, argv + 2);
  if (mode == "calls" && argc == 4 && std::string(argv[2]) == "guarded") return guarded_calls(std::atol(argv[3]));
  return harness_main(argc, argv);
}
"""


def render(tree: Tree, op: str) -> str:
    entries, capture = captured.bypassed_or_current(tree, op)
    plain = harness.render(capture, entries.groups)
    if _HARNESS_MAIN not in plain.source:
        raise VerificationFailed(f"{harness.HARNESS_TEMPLATE}: no `{_HARNESS_MAIN}` to hand the harness's modes to")
    guarded_capture = captured.bypassed_or_current(tree, op, guarded=True)[1]
    dispatcher_call = plain.timed.dispatcher_call  # "at::mul(s.self, s.other)"
    appended = (
        _APPENDED.replace("@OP@", op)
        .replace("@GUARDED@", guarded_ext.guarded_source(guarded_capture))
        .replace("@GUARDED_CALL@", guarded_ext.ext_namespace(op) + "::" + dispatcher_call.removeprefix("at::"))
    )
    return plain.source.replace(_HARNESS_MAIN, "int harness_main(int argc, char** argv) {") + appended


def measure(tree: Tree, op: str, sizes: tuple[int, ...], callgrind: bool) -> dict:
    built = compiler.compile_source(render(tree, op), name=f"guarded-bench-{op}")
    times = checks.run_json_lines([str(built.executable), "time", *map(str, sizes)])
    counts = instructions(built.executable, op) if callgrind else None
    return {"op": op, "executable": str(built.executable), "wall": times, "callgrind": counts}


def instructions(executable: Path, op: str, n1: int = 1_000, n2: int = 3_000) -> dict:
    """Per path, (total(N2) - total(N1)) / (N2 - N1); the fraction of the dispatcher's extra the guard removes;
    and, to profile the guard, the functions only the guarded path runs, by own instructions per call."""
    runs = [(path, n) for path in PATHS for n in (n1, n2)]
    with tempfile.TemporaryDirectory(prefix="codemod-callgrind-") as scratch, ThreadPoolExecutor(3) as pool:
        texts = dict(zip(runs, pool.map(lambda run: bench.callgrind_run(executable, *run, Path(scratch), True), runs)))
    per_call = {path: (bench._total(texts[path, n2], path) - bench._total(texts[path, n1], path)) / (n2 - n1) for path in PATHS}
    guarded, plain = (bench.parse_callgrind(texts[path, n2]) for path in ("guarded", "bypass"))
    plain_names = {bench._common_name(n, op) for n in plain.self_cost}  # the extension's copies count as libtorch's
    only_guarded = sorted(
        ((bench.short_name(n), cost / n2) for n, cost in guarded.self_cost.items() if bench._common_name(n, op) not in plain_names),
        key=lambda item: -item[1],
    )
    saved = per_call["dispatch"] - per_call["bypass"]
    return {
        "per_call": per_call,
        "fraction_removed": (per_call["dispatch"] - per_call["guarded"]) / saved if saved else None,
        "guarded_only_self_per_call": [{"function": f, "self_per_call": round(c, 1)} for f, c in only_guarded if c >= 1],
    }


def table(report: dict) -> str:
    op = report["op"]
    lines = [
        f"{op}: dispatcher `at::{op}` vs plain bypass vs guarded bypass (float32, one process, interleaved)",
        f"{'elements':>10}  {'dispatcher':>12}  {'plain':>12}  {'guarded':>12}   ns/call, best round (median)",
    ]
    for row in report["wall"]:
        lines.append(f"{row['numel']:>10,}  " + "  ".join(
            f"{row[f'{p}_ns']:>12,.1f}" for p in PATHS
        ) + "   (" + " / ".join(f"{row[f'{p}_median_ns']:,.1f}" for p in PATHS) + ")")
    counts = report["callgrind"]
    if counts:
        d, b, g = (counts["per_call"][p] for p in PATHS)
        fraction = counts["fraction_removed"]
        verdict = "meets" if fraction is not None and fraction >= GOAL else "below"
        lines.append(f"callgrind, 2 elements: dispatcher {d:,.0f}, plain bypass {b:,.0f}, guarded {g:,.0f} instructions/call")
        lines.append(f"the guard removes {fraction:.0%} of the dispatcher's {d - b:,.0f} extra instructions/call "
                     f"({verdict} the {GOAL:.0%} goal)")
        lines.append("run only on the guarded path (own instructions/call): " + ", ".join(
            f"{f['function']} {f['self_per_call']:,.0f}" for f in counts["guarded_only_self_per_call"][:8]
        ))
    return "\n".join(lines)
