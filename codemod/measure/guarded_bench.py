"""`codemod bench OP --guarded`: the dispatcher, the plain bypass and the guarded bypass, measured alike.

The program is `codemod build`'s harness (harness.render, unchanged: the dispatcher and the plain
bypass paths) with the guarded `at::OP` appended, rendered by guarded_ext from plan_guarded's text,
and a `main` that adds the third path to `time` and `calls` and hands every other mode to the
harness (and, for `observe`, adds the third path's row). bench measures the three paths as it does two;
the guard's worth is the share of the dispatcher's extra instructions it removes:
(dispatch - guarded) / (dispatch - bypass).
"""
from __future__ import annotations

from dataclasses import replace

from codemod.capture.capture import group_yaml
from codemod.measure import guarded_ext
from codemod.model.errors import VerificationFailed
from codemod.model.tree import Tree
from codemod.verify import captured, compiler, harness
from codemod.verify.build import recorded_build
from codemod.verify.compiler import Built

_HARNESS_MAIN = "int main(int argc, char** argv) {"

_APPENDED = """
// Appended by codemod.guarded_bench: the guarded bypass as `codemod bypass @OP@ --guarded` writes it.
@GUARDED@

namespace {
const char* const kNames[] = {"dispatch", "bypass", "guarded"};  // bench.LABELS["guarded"]

// not inlined: callgrind finds each path's calls under its own name, as the harness's paths (called through a pointer)
__attribute__((noinline)) at::Tensor guarded_functional(const Sample& s) {
  return @GUARDED_CALL@;
}

// The three paths, each round alternating them, as the harness does for two; every round printed.
int time_three(int argc, char** argv) {
  constexpr int kRounds = 41;
  const Path paths[] = {dispatch_functional, bypass_functional, guarded_functional};
  for (int i = 0; i < argc; ++i) {
    const long numel = std::atol(argv[i]);
    const auto s = make_sample(numel);
    TORCH_CHECK(at::equal(dispatch_functional(s), guarded_functional(s)), "the paths disagree");
    const long calls = std::max(1L, static_cast<long>(1e6 / ns_per_call(dispatch_functional, s, 20)));
    std::vector<double> rounds[3];
    for (int round = 0; round < kRounds; ++round)
      for (int p = 0; p < 3; ++p) rounds[p].push_back(ns_per_call(paths[p], s, calls));
    std::printf("{\\"numel\\": %ld, \\"calls_per_round\\": %ld, \\"rounds\\": %d", numel, calls, kRounds);
    for (int p = 0; p < 3; ++p)
      std::printf(", \\"%s_ns\\": %.1f, \\"%s_rounds_ns\\": %s", kNames[p], *std::min_element(rounds[p].begin(), rounds[p].end()),
                  kNames[p], json_numbers(rounds[p]).c_str());
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

// The harness's two paths, then the guarded one: its profiler events and grad_fn, as the dispatcher's.
int observe_three() {
  observe();
  const auto s = make_sample(2);
  std::string recorded;
  for (const auto& name : profiled([&] { guarded_functional(s); })) recorded += (recorded.empty() ? "" : ", ") + json_string(name);
  const auto result = guarded_functional(requiring_grad(s));
  const auto& grad_fn = result.grad_fn();
  std::printf("{\\"path\\": \\"guarded\\", \\"profiler_events\\": [%s], \\"requires_grad\\": %s, \\"grad_fn\\": %s}\\n",
              recorded.c_str(), result.requires_grad() ? "true" : "false", grad_fn ? json_string(grad_fn->name()).c_str() : "null");
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "time" && argc > 2) leave(time_three(argc - 2, argv + 2));
  if (mode == "calls" && argc == 4 && std::string(argv[2]) == "guarded") leave(guarded_calls(std::atol(argv[3])));
  if (mode == "observe") leave(observe_three());
  return harness_main(argc, argv);
}
"""


def render(tree: Tree, op: str) -> tuple[str, str]:
    """The program's source, and the call it times as a human reads it."""
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
    return plain.source.replace(_HARNESS_MAIN, "int harness_main(int argc, char** argv) {") + appended, plain.timed.shown


def build(tree: Tree, op: str) -> Built:
    """The program compiled, recorded by what it is rendered from (build.recorded_build)."""
    entries, plain = captured.bypassed_or_current(tree, op)
    guarded = captured.bypassed_or_current(tree, op, guarded=True)[1]

    def make() -> Built:
        source, shown = render(tree, op)
        return replace(compiler.compile_source(source, name=f"guarded-bench-{op}"), timed_call=shown)

    return recorded_build(f"guarded-bench-{op}", [plain.to_json(), guarded.to_json(), group_yaml(entries.doc, list(entries.groups))], make)
