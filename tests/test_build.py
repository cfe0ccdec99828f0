"""`codemod build`/`bench` on our target_tree/: real torchgen, real g++, real libtorch, valgrind, no mocks.

The first build of each op compiles (about 30-40 s); everything after reuses its cache. Timings are never asserted
(benchmarks/command_latency.py times a build the cache holds): a cache hit is asserted as one, no compiler run.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codemod.measure import bench
from codemod.model.errors import VerificationFailed
from codemod.model.tree import locate
from codemod.plan import cpp as plan_cpp
from codemod.plan.plan import op_entries
from codemod.verify import build, bypass_ext, captured, checks, compiler, harness, signature
from tests.conftest import OUTPUT_SCHEMA, REPO, SESSION_CACHE, descendants, ended, run_codemod, seeded_cache


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    """A fresh build cache for this module, so the first build really compiles, and with no precompiled header, so it
    leaves the note that makes the next compile make one."""
    path = tmp_path_factory.mktemp("build-cache")
    previous = os.environ.get("CODEMOD_BUILD_CACHE")
    os.environ["CODEMOD_BUILD_CACHE"] = str(path)  # also seen by the CLI subprocesses
    yield path
    if previous is None:
        del os.environ["CODEMOD_BUILD_CACHE"]
    else:
        os.environ["CODEMOD_BUILD_CACHE"] = previous


@pytest.fixture(scope="module")
def first_build(cache: Path, target_tree: Path) -> tuple[compiler.Built, list[str]]:
    """The module cache's first build, which compiles, loading no precompiled header, and the notes it left asking for
    one. Then the session's libtorch PCH of that note, when the session made it, is linked in: the builds after this one
    load it rather than make it again (making it is the next test's, in a cache of its own)."""
    result = build.build(locate(target_tree), "mul")
    assert not result.cached and not list(cache.glob("pch-*/libtorch_pch.h.gch"))
    notes = [note.name for note in cache.glob("pch-*.wanted")]
    for note in notes:
        seeded_cache(cache, note.removesuffix(".wanted"), source=SESSION_CACHE)
    return result, notes


@pytest.fixture(scope="module")
def built(first_build: tuple[compiler.Built, list[str]]) -> compiler.Built:
    return first_build[0]


def test_extension_holds_the_bypass_scaffolding_verbatim_in_its_own_namespace(built: compiler.Built, target_tree: Path) -> None:
    tree = locate(target_tree)
    capture = captured.capture_for(tree, "mul", op_entries(tree, "mul"))
    source = built.source.read_text()
    assert plan_cpp.scaffolding(capture) in source
    assert "namespace codemod_ext_mul {" in source
    # the installed headers declare the structs; the extension must not define them again
    for struct in (*capture.meta_structs, *capture.native_structs):
        assert struct.text not in source


def test_harness_and_extension_are_one_compile_with_the_libtorch_headers_precompiled_from_a_caches_second(
    first_build: tuple[compiler.Built, list[str]], cache: Path, target_tree: Path, tmp_path: Path,
) -> None:
    """`codemod build` compiles the harness source once and links the object twice: the harness executable and the
    Python extension the OpInfo check imports. The first compile of a cache (the fixture's) loads no precompiled
    headers and leaves a note; the next one (here in a cache holding only that note) makes them and loads them."""
    built, notes = first_build
    assert built.module is not None and built.module.parent == built.executable.parent
    assert len(notes) == 1
    fresh = seeded_cache(tmp_path / "cache", notes[0], source=cache)  # as after another op: only the note
    log = tmp_path / "g++.log"
    logging_cxx = tmp_path / "g++"
    logging_cxx.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {compiler.CXX} "$@"\n')
    logging_cxx.chmod(0o755)
    result = subprocess.run(
        [sys.executable, "-m", "codemod", "build", "mul", "--tree", str(target_tree)], capture_output=True, text=True,
        env={**os.environ, "CXX": str(logging_cxx), "CODEMOD_BUILD_CACHE": str(fresh)},
    )
    assert result.returncode == 0, result.stderr
    assert "checks: 70 passed, 0 failed" in result.stderr and "mul: 150 comparisons with torch" in result.stderr
    runs = log.read_text().splitlines()
    # -fsyntax-only: the PCH just made, tried on an empty file
    compiled = [run for run in runs if re.search(r"\.(cpp|cc)( |$)", run) and "-fsyntax-only" not in run]
    assert len(compiled) == 1 and " -c " in compiled[0], runs
    assert f"-include {fresh}/pch-" in compiled[0] and "libtorch_pch.h -Winvalid-pch -Werror=invalid-pch" in compiled[0]
    links = [run for run in runs if run.split()[0].endswith(".o") or run.startswith("-shared ")]
    assert len(links) == 2 and sum(run.startswith("-shared ") for run in links) == 1, runs
    made = [run for run in runs if "c++-header" in run and " -M " not in run]  # -M: listing what the PCH would hold
    assert len(made) == 1 and "libtorch_pch.h.gch" in made[0], made
    assert result.stderr.count("precompile libtorch_pch.h") == 1


def test_the_libtorch_pch_holds_every_fixed_include_of_the_harness_and_the_extension(target_tree: Path) -> None:
    held = set(re.findall(r"^#include <([^>]+)>$", compiler.LIBTORCH_PCH.read_text(), re.MULTILINE))
    tree = locate(target_tree)
    capture = captured.capture_for(tree, "mul", op_entries(tree, "mul"))
    per_op = {line.split("<")[1].rstrip(">") for line in harness.harness_includes(capture)}
    template = harness.HARNESS_TEMPLATE.read_text().split("#if __has_include")[0]  # callgrind's header is optional
    sources = template + bypass_ext.render([capture], "codemod_check_mul")
    fixed = set(re.findall(r"^#include <([^>]+)>$", sources, re.MULTILINE)) - per_op
    assert fixed and fixed <= held, fixed - held


def test_bypass_agrees_with_the_dispatcher(built: compiler.Built) -> None:
    checked = checks.run_checks(built.executable)
    assert checked.ok, checked.output
    for case in ("float32", "float64", "int64", "bool", "complex64", "broadcast", "promotion", "non-contiguous",
                 "channels-last", "0-dim", "empty", "out= wrong dtype", "out= resize", "in-place broadcasts self"):
        assert case in checked.output
    assert "in-place broadcasts self) in-place  (both raise" in checked.output
    assert "out= wrong dtype (float inputs, int64 out)  (both raise" in checked.output
    assert checked.failed == 0 and checked.passed >= 70
    assert "alpha" not in checked.output  # mul has no extra arguments


def test_harness_passes_extra_arguments_from_the_captured_signatures(target_tree: Path) -> None:
    tree = locate(target_tree)
    sub, div = (op_entries(tree, op) for op in ("sub", "div"))
    (group,) = sub.groups
    calls = harness.harness_group(captured.capture_for(tree, "sub", sub), group)
    assert calls.functional == "sub.Tensor"
    assert calls.extras == (signature.Parameter("alpha", "at::Scalar", "1"),)
    assert calls.calls == (
        "at::sub(self, other, x.alpha)", "codemod_ext_sub::sub(self, other, x.alpha)",
        "at::sub_outf(self, other, x.alpha, out)", "codemod_ext_sub::sub_out(self, other, x.alpha, out)",
        "self.sub_(other, x.alpha)", "codemod_ext_sub::sub_(self, other, x.alpha)",
    )
    # div's second group: rounding_mode has no default; an optional starts unset
    mode = harness.harness_group(captured.capture_for(tree, "div", div), div.groups[1])
    assert mode.functional == "div.Tensor_mode"
    assert mode.extras == (signature.Parameter("rounding_mode", "::std::optional<c10::string_view>", "::std::nullopt"),)


@pytest.mark.parametrize("op", ["sub", "add"])  # add: the ufunc-generated kernel (structured_ufunc_add_CPU)
def test_ops_with_alpha_agree_with_the_dispatcher(cache: Path, op: str, target_tree: Path) -> None:
    checked = checks.run_checks(build.build(locate(target_tree), op).executable)
    assert checked.ok, checked.output
    for variant in ("", ", alpha=2", ", alpha=0.5"):
        for form in ("functional", "out= (resized)", "in-place"):
            assert f"float32 [3,4]{variant} {form}  (Float[3, 4]" in checked.output
    # integer tensors refuse a floating alpha, on both paths
    assert "int64 [3,4], alpha=0.5 functional  (both raise: For integral input tensors, argument alpha" in checked.output


def test_div_agrees_with_the_dispatcher_in_both_groups(cache: Path, target_tree: Path) -> None:
    checked = checks.run_checks(build.build(locate(target_tree), "div").executable)
    assert checked.ok, checked.output
    # bool / bool divides 0 by 0 somewhere: NaN on both paths counts as equal
    assert "ok   bool [3,4] functional  (Float[3, 4]" in checked.output
    for variant in ("", ', rounding_mode="trunc"', ', rounding_mode="floor"'):
        assert f"ok   int64 [3,4], div.Tensor_mode{variant} functional" in checked.output
    assert 'ok   int64 [3,4], div.Tensor_mode, rounding_mode="floor" functional  (Long[3, 4]' in checked.output


def test_profiler_and_autograd_see_the_dispatcher_path_only(built: compiler.Built) -> None:
    observed = bench.observe(built.executable)
    assert observed["dispatch"] == {"profiler_events": ["aten::mul"], "requires_grad": True, "grad_fn": "MulBackward0"}
    assert observed["bypass"] == {"profiler_events": [], "requires_grad": False, "grad_fn": None}


def test_callgrind_call_paths_show_what_only_the_dispatcher_runs(built: compiler.Built, tmp_path: Path) -> None:
    calls = 20
    with ThreadPoolExecutor(len(bench.PATHS)) as pool:  # valgrind loading libtorch dominates: run both at once
        texts = pool.map(lambda path: bench.callgrind_run(built.executable, path, calls, tmp_path, True), bench.PATHS)
    graphs = dict(zip(bench.PATHS, map(bench.parse_callgrind, texts)))
    report = bench.call_paths("mul", graphs, calls)
    dispatch = [step["function"] for step in report["call_path"]["dispatch"]]
    bypass = [step["function"] for step in report["call_path"]["bypass"]]
    assert dispatch[:2] == ["dispatch_functional", "at::_ops::mul_Tensor::call"]
    assert "torch::autograd::VariableType::mul_Tensor" in dispatch and "at::_ops::mul_Tensor::redispatch" in dispatch
    assert bypass == ["bypass_functional", "codemod_ext_mul::mul", "codemod_ext_mul::codemod_bypass_mul::wrapper_CPU_mul_Tensor"]
    # both end in the same CPU wrapper: libtorch's copy and the extension's
    assert dispatch[-1] == "at::wrapper_CPU_mul_Tensor"
    above = {f["function"] for f in report["above_kernel"]["dispatch"]}
    assert {"at::_ops::mul_Tensor::call", "torch::autograd::VariableType::mul_Tensor",
            "at::_ops::mul_Tensor::redispatch", "at::getStepCallbacksUnlessEmpty"} <= above
    assert not above & set(bypass)
    # above it, the bypass runs its forward and the guard that puts the kernel below autograd, as the dispatcher's
    # autograd kernel does before it redispatches (and the thread-local lookup the guard makes)
    below_autograd = {f"c10::impl::ExcludeDispatchKeyGuard::{name}" for name in ("ExcludeDispatchKeyGuard", "~ExcludeDispatchKeyGuard")}
    bypass_above = {f["function"] for f in report["above_kernel"]["bypass"]}
    assert {"codemod_ext_mul::mul", *below_autograd} <= bypass_above <= {"codemod_ext_mul::mul", *below_autograd, "__tls_get_addr"}
    # the own instructions above the kernel add up to the entry's callees less the kernel
    for path, graph in graphs.items():
        entry = graph.entry(f"{path}_functional(")
        kernel = next(n for n in graph.functions() if bench.short_name(n) == report["call_path"][path][-1]["function"])
        expected = (sum(graph.inclusive[entry].values()) - graph.inclusive_cost(kernel)) / calls
        assert report["above_kernel_per_call"][path] == pytest.approx(expected, abs=1)


def test_short_names_drop_templates_parameters_and_return_types() -> None:
    assert bench.short_name("bool torch::autograd::compute_requires_grad<at::Tensor const&>(at::Tensor const&)") == (
        "torch::autograd::compute_requires_grad"
    )
    assert bench.short_name(
        "torch::autograd::VariableType::(anonymous namespace)::mul_Tensor(c10::DispatchKeySet, at::Tensor const&)"
    ) == "torch::autograd::VariableType::mul_Tensor"
    assert bench.short_name("c10::TensorImpl::requires_grad() const") == "c10::TensorImpl::requires_grad"


def test_second_build_is_a_cache_hit_that_runs_no_compiler(built: compiler.Built, target_tree: Path) -> None:
    again = build.build(locate(target_tree), "mul")
    assert again.cached and again.executable == built.executable
    verbose = run_codemod("-v", "build", "mul", "--tree", str(target_tree), "--no-check")  # -v: every command it runs
    assert verbose.returncode == 0 and "cache hit" in verbose.stderr, verbose.stderr
    ran = [line.split()[1] for line in verbose.stderr.splitlines() if line.startswith("$ ")]
    assert compiler.CXX not in ran, ran


def test_compile_error_is_a_verification_failure_with_the_compilers_message(cache: Path) -> None:
    with pytest.raises(VerificationFailed) as raised:
        compiler.compile_source("int main() { return no_such_name_here; }\n", name="broken")
    assert "no_such_name_here" in str(raised.value)
    assert raised.value.exit_code == 1


def test_compile_error_in_the_scaffolding_names_the_line_the_bypass_splices(cache: Path, tree: Path, target_tree: Path) -> None:
    target = locate(target_tree)
    entries = op_entries(target, "mul")
    capture = captured.capture_for(target, "mul", entries)
    source = harness.render(capture, entries.groups).source
    scaffolding_at = source.index(plan_cpp.scaffolding(capture))
    broken = source[:scaffolding_at] + source[scaffolding_at:].replace(
        "op.meta(self, other);", "op.meta(self, other, no_such_name_here);", 1
    )
    with pytest.raises(compiler.CompileFailed) as raised:
        compiler.compile_source(broken, name="broken-mul")
    (error,) = build.spliced_errors(target, capture, broken, raised.value.errors)
    path, line = error.split(": error: ")[0].strip().rsplit(":", 1)
    assert "no_such_name_here" in error and path == "aten/src/ATen/native/BinaryOps.cpp"
    # the line the bypass writes there is the one we broke
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    assert (tree / path).read_text().splitlines()[int(line) - 1].strip() == "op.meta(self, other);"


def test_cli_build_and_bench_json(built: compiler.Built, target_tree: Path) -> None:
    result = run_codemod("build", "mul", "--tree", str(target_tree))
    assert result.returncode == 0, result.stderr
    assert "cache hit" in result.stderr and "0 failed" in result.stderr

    # issue 20: `--size 2 1000` as the usage line shows it (several sizes after one --size)
    result = run_codemod("bench", "mul", "--tree", str(target_tree), "--json", "--no-callgrind", "--size", "2", "1000")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(report)
    assert [row["numel"] for row in report["wall"]] == [2, 1000]
    row = report["wall"][0]
    assert row["dispatch_ns"] > 0 and row["bypass_ns"] > 0
    assert report["call"] == built.timed_call and report["mode"] == "plain"
    assert all(len(report["load_average"][when]) == 3 for when in ("start", "end"))
    assert report["observed"]["dispatch"]["profiler_events"] == ["aten::mul"]
    assert report["observed"]["bypass"]["grad_fn"] is None
    assert report["callgrind"] is None


def test_checks_a_build_passed_are_kept_by_its_key_and_said_so(built: compiler.Built, cache: Path, target_tree: Path) -> None:
    """The checks that passed on a build are not run again on the same build (its compile's key), torch and our code:
    their verdicts are reprinted, said to be kept; a truncated record, or a FIFO in its place, is not trusted (nor
    waited on): they run again."""
    shutil.rmtree(cache / "checks", ignore_errors=True)
    runs = []
    for _ in range(2):
        result = run_codemod("build", "mul", "--tree", str(target_tree), "--json")
        assert result.returncode == 0, result.stderr
        runs.append((json.loads(result.stdout), result.stderr))
    (first, first_said), (second, second_said) = runs
    assert not first["checks_kept"] and second["checks_kept"]
    assert [first[k] for k in ("cpp_checks", "torch_comparisons")] == [second[k] for k in ("cpp_checks", "torch_comparisons")]
    assert "not run again" not in first_said and "check: mul's bypass against torch" in first_said
    assert "these checks passed before on the same build, samples and torch (build cache), not run again" in second_said
    assert "check: mul's bypass against torch" not in second_said  # torch was not even imported
    for said in (first_said, second_said):
        assert "checks: 70 passed, 0 failed" in said and "mul: 150 comparisons with torch" in said
    (record,) = (cache / "checks").iterdir()
    record.write_text(record.read_text()[:40])
    again = run_codemod("build", "mul", "--tree", str(target_tree), "--json")
    assert again.returncode == 0 and not json.loads(again.stdout)["checks_kept"], again.stderr
    assert json.loads(record.read_text())["torch_comparisons"] == first["torch_comparisons"]  # kept whole again
    record.unlink()
    os.mkfifo(record)  # not a file to read: a read would wait for a writer forever
    fifo = subprocess.run([sys.executable, "-m", "codemod", "build", "mul", "--tree", str(target_tree), "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert fifo.returncode == 0 and not json.loads(fifo.stdout)["checks_kept"], fifo.stderr
    assert record.is_file() and json.loads(record.read_text())["torch_comparisons"] == first["torch_comparisons"]


def test_cli_build_on_a_checkout_prints_how_to_build_the_checkout(built: compiler.Built, tree: Path) -> None:
    assert "setup.py develop" not in run_codemod("build", "mul", "--tree", str(tree), "--no-check").stderr
    (tree / "setup.py").write_text("")
    (tree / "CMakeLists.txt").write_text("")
    result = run_codemod("build", "mul", "--tree", str(tree), "--no-check")
    assert result.returncode == 0, result.stderr
    assert f"cd {tree} && REL_WITH_DEB_INFO=1 USE_PER_OPERATOR_HEADERS=0" in result.stderr


def test_cli_bench_plot_writes_a_png(built: compiler.Built, tmp_path: Path, target_tree: Path) -> None:
    pytest.importorskip("matplotlib")  # the `plot` extra
    png = tmp_path / "mul.png"
    result = run_codemod("bench", "mul", "--tree", str(target_tree), "--no-callgrind", "--size", "2", "--size", "4096",
                         "--plot", str(png))
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "dispatcher: profiler records aten::mul; requires_grad input -> grad_fn MulBackward0" in result.stdout
    assert "bypass: profiler records nothing; requires_grad input -> grad_fn none" in result.stdout


def test_checkout_build_runs_the_checkouts_own_build_with_the_labs_flags(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full checkout is not available here: its setup.py stands in, and records how it was run."""
    refused = run_codemod("build", "mul", "--tree", str(tree), "--checkout")
    assert refused.returncode == 2 and "not a full PyTorch checkout" in refused.stderr
    (tree / "CMakeLists.txt").write_text("project(pytorch_stand_in)\n")
    (tree / "setup.py").write_text(
        "import json, os, sys\n"
        "flags = {k: os.environ.get(k) for k in ('REL_WITH_DEB_INFO', 'USE_PER_OPERATOR_HEADERS', 'USE_DISTRIBUTED', 'USE_CUDA')}\n"
        "open('build/ran.json', 'w').write(json.dumps({'argv': sys.argv[1:], 'flags': flags}))\n"
        "sys.exit(int(os.environ.get('STAND_IN_EXIT', '0')))\n"
    )
    unbuilt = run_codemod("build", "mul", "--tree", str(tree), "--checkout")
    assert unbuilt.returncode == 0 and "USE_PER_OPERATOR_HEADERS=0" in unbuilt.stderr and "python setup.py develop" in unbuilt.stderr

    (tree / "build").mkdir()
    (tree / "build/CMakeCache.txt").write_text("")
    built = run_codemod("build", "mul", "--tree", str(tree), "--checkout")
    assert built.returncode == 0, built.stderr
    ran = json.loads((tree / "build/ran.json").read_text())
    assert ran == {"argv": ["develop"], "flags": {"REL_WITH_DEB_INFO": "1", "USE_PER_OPERATOR_HEADERS": "0", "USE_DISTRIBUTED": "0", "USE_CUDA": "0"}}
    monkeypatch.setenv("STAND_IN_EXIT", "3")
    failed = run_codemod("build", "mul", "--tree", str(tree), "--checkout")
    assert failed.returncode == 1 and "the checkout's build failed (exit 3" in failed.stderr


def test_sigterm_during_the_compile_check_ends_gxx_and_removes_temporary_directories(tree: Path, tmp_path: Path) -> None:
    """Issue 18: a signal must end every child of the run, however deep (the compile check's g++ run in threads,
    each with its cc1plus), and leave no temporary directory. A private build cache without the session's compile
    results, so g++ really runs; with the rest (codegen, precompiled headers), so it runs soon."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    cache = seeded_cache(tmp_path / "cache", "*", leave_out="syntax")
    env = {**os.environ, "TMPDIR": str(temporary), "CODEMOD_BUILD_CACHE": str(cache)}
    with (tmp_path / "err").open("w") as stderr:
        bypass = subprocess.Popen([sys.executable, "-m", "codemod", "bypass", "mul", "--tree", str(tree), "--no-build"],
                                  stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO, env=env)
    compilers: dict[int, str] = {}
    while not compilers:
        assert bypass.poll() is None, f"ended before running g++: {(tmp_path / 'err').read_text()}"
        compilers = {pid: name for pid, name in descendants(bypass.pid).items() if name in ("g++", "cc1plus")}
        time.sleep(0.2)
    running = list(descendants(bypass.pid))
    bypass.send_signal(signal.SIGTERM)
    assert bypass.wait(timeout=300) == 128 + signal.SIGTERM
    assert ended(running), {pid: name for pid, name in descendants(os.getpid()).items() if pid in running}
    assert "codemod: interrupted by SIGTERM" in (tmp_path / "err").read_text()
    assert [p.name for p in temporary.iterdir()] == []
