"""`codemod hot` on real models built here from torch.nn (no downloads): the profiler's counts, the tree's
verdicts, the guard's share from recorded inputs, a failing script, a saved trace, the plot and --from-hot."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from codemod.cli.report import SCHEMA
from codemod.measure import hot
from codemod.model.errors import BadInput
from tests.conftest import OUTPUT_SCHEMA, REPO, TARGET_TREE, alive, ended, run_codemod

MLP_TRAINING_STEP = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
x, y = torch.randn(4, 8), torch.randn(4, 4)
for _ in range(3):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""

TRANSFORMER_INFERENCE_LOOP = """
import torch
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True).eval()
x = torch.randn(2, 5, 16)
with torch.no_grad():
    for _ in range(3):
        x = layer(x)
"""

# Five calls of add.Tensor: two the guard takes (plain tensors), one whose input requires grad under grad mode
# (it makes an autograd node), one under no_grad with that same input (alive at the end), and one on a view.
GUARD_CASES = """
import torch
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
base = torch.randn(4)
v = base[1:]
x.add(x)
x.add(w)
with torch.no_grad():
    x.add(w)
    x.add(x)
v.add(x)
"""

PROFILE_IN_PROCESS = """
import json, runpy, sys
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile
trace, script = sys.argv[1:]
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             experimental_config=_ExperimentalConfig(capture_overload_names=True)) as profiler:
    runpy.run_path(script, run_name="__main__")
profiler.export_chrome_trace(trace)
print(json.dumps({e.key: e.count for e in profiler.key_averages() if e.key.startswith("aten::")}))
"""


def write_script(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def profiler_counts(script: Path, trace: Path) -> dict[str, int]:
    """The profiler's own counts (key_averages) for SCRIPT, run in a fresh process as codemod runs it; and its trace."""
    run = subprocess.run([sys.executable, "-c", PROFILE_IN_PROCESS, str(trace), str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def hot_json(*args: str, exit_code: int = 0) -> dict:
    run = run_codemod("hot", *args, "--json")
    assert run.returncode == exit_code, run.stderr
    document = json.loads(run.stdout)
    OUTPUT_SCHEMA.validate(document)
    return document


def by_name(report: dict) -> dict[str, dict]:
    return {o["name"]: o for o in report["ops"]}


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    """The MLP training step run by `codemod hot` on target_tree (no callgrind), with its plot; and the script."""
    directory = tmp_path_factory.mktemp("mlp")
    script = write_script(directory, "mlp.py", MLP_TRAINING_STEP)
    plot = directory / "hot.png"
    report = hot_json(str(script), "--tree", str(TARGET_TREE), "--no-measure", "--plot", str(plot))
    return report, script, plot


def test_mlp_counts_match_the_profilers_own(mlp: tuple[dict, Path, Path], tmp_path: Path) -> None:
    report, script, _ = mlp
    expected = profiler_counts(script, tmp_path / "trace.json")
    assert {o["name"]: o["calls"] for o in report["ops"]} == expected
    assert report["script"] == str(script) and report["trace"] is None


def test_the_calls_the_table_shows_are_the_calls_the_guard_and_the_estimate_count(tmp_path: Path) -> None:
    """Issue 28: `aten::mean` showed 10 calls but 20/20 let through by the guard: the calls column counted as
    key_averages() does (mean.dim inside mean is part of it), the guard every call through the dispatcher. The table
    counts calls through the dispatcher; JSON keeps both, and the text says where they differ, and what was measured
    and what estimated."""
    script = REPO / "docs" / "examples" / "small_ops.py"
    report = hot_json(str(script), "--tree", str(TARGET_TREE), "--no-measure")
    for o in report["ops"]:
        assert o["dispatcher_calls"] == o["calls"] + o["nested_in_same_name"] == sum(o["overloads"].values()), o["name"]
        assert o["covered_calls"] <= o["dispatcher_calls"] and (o["bypassable"] or o["covered_calls"] == o["dispatcher_calls"])
    mean = by_name(report)["aten::mean"]
    assert (mean["calls"], mean["dispatcher_calls"], mean["guard"]["let_through"]) == (10, 20, 20)
    table = run_codemod("hot", str(script), "--tree", str(TARGET_TREE), "--no-measure").stdout
    shown = {line.split()[0]: line.split() for line in table.splitlines() if line.startswith("aten::")}
    for name, words in shown.items():
        o = by_name(report)[name]
        assert int(words[1].replace(",", "")) == o["dispatcher_calls"] and words[3] == f"{o['guard']['let_through']}/{o['covered_calls']}"
    said = " ".join(table.split())
    assert "Measured: calls (through the dispatcher, as the trace records them) and self CPU time, by the profiler;" in said
    assert "Estimated: the calls the guard lets through (judged from the trace, of the calls of the overloads a bypass covers" in said
    assert "aten::mean 20 here, 10 there" in said


def test_mlp_verdicts_come_from_the_trees_catalog(mlp: tuple[dict, Path, Path]) -> None:
    report, _, _ = mlp
    ops = by_name(report)
    catalog = json.loads(run_codemod("ops", "--tree", str(TARGET_TREE), "--json").stdout)
    statuses = {s["op"]: s for s in catalog["ops"]}
    for name in ("aten::add_", "aten::mul_"):  # SGD with momentum, one op at a time (foreach=False)
        assert ops[name]["in_tree"] and ops[name]["bypassable"] and ops[name]["op"] == name.removeprefix("aten::")[:-1]
        covered = statuses[ops[name]["op"]]["overloads"]
        assert ops[name]["covered_calls"] == sum(n for overload, n in ops[name]["overloads"].items() if overload in covered)
        assert ops[name]["cost"] == {"not_measured": "--no-measure"} and set(ops[name]["estimate"].values()) == {None}
    # addmm is not in target_tree's yaml: reported as absent, never as bypassable
    assert ops["aten::addmm"]["in_tree"] is False and ops["aten::addmm"]["bypassable"] is False
    assert ops["aten::addmm"]["reason"] == "not in the tree's native_functions.yaml"
    for o in report["ops"]:
        if o["in_tree"]:
            assert (o["bypassable"], o["reason"], o["detail"]) == (
                statuses[o["op"]]["bypassable"], statuses[o["op"]]["reason"], statuses[o["op"]]["detail"])
    # linear's weight requires grad: the forward calls make autograd nodes, the guard refuses every one
    assert ops["aten::addmm"]["guard"]["let_through"] == 0 and ops["aten::addmm"]["guard"]["refused"]["requires_grad"] > 0


def test_mlp_plot_is_a_png(mlp: tuple[dict, Path, Path]) -> None:
    _, _, plot = mlp
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_guard_share_from_recorded_inputs(tmp_path: Path) -> None:
    script = write_script(tmp_path, "guard_cases.py", GUARD_CASES)
    add = by_name(hot_json(str(script), "--tree", str(TARGET_TREE), "--no-measure"))["aten::add"]
    assert add["overloads"] == {"add.Tensor": 5} and add["covered_calls"] == 5
    assert add["guard"]["let_through"] == 2 and add["guard"]["share"] == 0.4
    assert add["guard"]["refused"] == {"requires_grad": 2, "view": 1}
    assert add["guard"]["without_autograd_record"] == 2  # the two calls under no_grad

    # the user's own trace records neither live tensors nor devices: only the autograd node tells
    profiler_counts(script, tmp_path / "trace.json")
    from_trace = by_name(hot_json("--trace", str(tmp_path / "trace.json"), "--tree", str(TARGET_TREE), "--no-measure"))
    assert from_trace["aten::add"]["guard"]["refused"] == {"requires_grad": 1}
    assert from_trace["aten::add"]["guard"]["let_through"] == 4


def test_transformer_layer_from_an_exported_trace(tmp_path: Path) -> None:
    script = write_script(tmp_path, "transformer.py", TRANSFORMER_INFERENCE_LOOP)
    trace = tmp_path / "trace.json"
    expected = profiler_counts(script, trace)
    report = hot_json("--trace", str(trace), "--tree", str(TARGET_TREE), "--no-measure")
    assert {o["name"]: o["calls"] for o in report["ops"]} == expected
    assert report["trace"] == str(trace) and report["script"] is None
    ops = by_name(report)
    # eval + no_grad + batch_first: the fused fast path, whose add_ calls run inside its kernel, unrecorded by autograd
    assert "aten::_transformer_encoder_layer_fwd" in ops and ops["aten::add_"]["bypassable"]
    assert ops["aten::add_"]["guard"]["without_autograd_record"] == ops["aten::add_"]["covered_calls"] > 0
    table = run_codemod("hot", "--trace", str(trace), "--tree", str(TARGET_TREE), "--no-measure")
    assert table.returncode == 0, table.stderr
    assert any(line.startswith("aten::add_ ") and line.endswith("plain, guarded (not measured: --no-measure)")
               for line in table.stdout.splitlines())


def test_a_script_that_raises_exits_2_with_its_traceback_and_the_line_it_raised_from(tmp_path: Path) -> None:
    """Issue 18: a failing script reported only its traceback's last line. Its traceback is shown (from the
    script's first frame: not codemod's nor runpy's), and the error names the script's file:line."""
    script = write_script(tmp_path, "broken.py", """
        import torch

        def grow(a):
            return a.add(torch.ones(3))

        grow(torch.ones(2))
    """)
    run = run_codemod("hot", str(script), "--tree", str(TARGET_TREE), "--no-measure")
    assert run.returncode == 2
    traceback = run.stderr[run.stderr.index("Traceback (most recent call last):"):]
    assert traceback.splitlines()[1] == f'  File "{script}", line 7, in <module>'
    assert f'  File "{script}", line 5, in grow' in traceback and "runpy" not in traceback
    last = "RuntimeError: The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"
    message = f"{script} failed under the profiler (exit 1): {script}:5: {last} (its traceback is above)"
    assert run.stderr.strip().splitlines()[-1] == f"codemod: {message}"
    error = hot_json(str(script), "--tree", str(TARGET_TREE), "--no-measure", exit_code=2)
    assert error["command"] == "hot" and error["error"] == message


BACKGROUND_AND_OUTPUT = """
    import os, subprocess, sys, torch
    lingering = subprocess.Popen(["sleep", "311"])
    escaped = subprocess.Popen(["sleep", "311"], start_new_session=True)  # out of the script's process group
    with open(sys.argv[1], "w") as pids:
        pids.write(f"{os.getpid()} {lingering.pid} {escaped.pid}")
    print("the script's own output", flush=True)
    sys.stdout.buffer.write(b"not utf-8: \\xff\\xfe\\n")
    sys.stdout.flush()
    print("the script's own warning", file=sys.stderr)
    torch.ones(2).mul(torch.ones(2))
"""


def test_hot_waits_for_the_script_alone_ends_what_it_left_and_passes_its_output_through(tmp_path: Path) -> None:
    """Issue 18: a script that leaves `sleep 311` running returns at once under python, but hot waited for the
    sleep (this test would take its 311 s); the script's output was swallowed, and bytes that are not UTF-8 made a
    traceback. Issue 26: the sleeps outlived hot; now none does, even one in a session of its own. Output goes to
    files here: a pipe stays open while a sleep holds it, whoever waits for it."""
    script = write_script(tmp_path, "background.py", BACKGROUND_AND_OUTPUT)
    pids = tmp_path / "pids"
    for as_json in (False, True):
        out, err = tmp_path / "out", tmp_path / "err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            run = subprocess.run([sys.executable, "-m", "codemod", "hot", str(script), str(pids), "--tree", str(TARGET_TREE),
                                  "--no-measure", *(["--json"] if as_json else [])], stdout=stdout, stderr=stderr, cwd=REPO)
        script_pid, *sleeps = map(int, pids.read_text().split())
        left = [pid for pid in sleeps if alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, "a process the profiled script started outlived hot"
        assert run.returncode == 0, err.read_bytes().decode(errors="replace")
        assert not alive(script_pid)
        output = b"the script's own output\nnot utf-8: \xff\xfe\n"
        if as_json:  # the script's output on stderr: stdout is the report
            OUTPUT_SCHEMA.validate(json.loads(out.read_bytes()))
            assert output in err.read_bytes()
        else:
            assert out.read_bytes().startswith(output) and b" aten ops, " in out.read_bytes()
        assert b"the script's own warning\n" in err.read_bytes()


LINGERING = """
    import os, subprocess, sys, time
    lingering = subprocess.Popen(["sleep", "120"])
    with open(sys.argv[1], "w") as pids:
        pids.write(f"{os.getpid()} {lingering.pid}")
    time.sleep(120)
"""


def test_sigterm_ends_the_profiled_script_and_what_it_started(tmp_path: Path) -> None:
    """Issue 18: SIGTERM to hot left the profiled script running, its parent init. hot ends the script's process
    group (the script and the processes it started) and exits 128 + SIGTERM, with the error as JSON."""
    script = write_script(tmp_path, "lingering.py", LINGERING)
    pids = tmp_path / "pids"
    with (tmp_path / "out").open("wb") as stdout, (tmp_path / "err").open("wb") as stderr:
        hot_run = subprocess.Popen([sys.executable, "-m", "codemod", "hot", str(script), str(pids), "--tree", str(TARGET_TREE),
                                    "--no-measure", "--json"], stdout=stdout, stderr=stderr, cwd=REPO)
    while not (pids.is_file() and len(pids.read_text().split()) == 2):
        assert hot_run.poll() is None, (tmp_path / "err").read_text()
        time.sleep(0.2)
    started = [int(pid) for pid in pids.read_text().split()]
    hot_run.send_signal(signal.SIGTERM)
    assert hot_run.wait(timeout=120) == 128 + signal.SIGTERM
    assert ended(started), [pid for pid in started if alive(pid)]
    error = json.loads((tmp_path / "out").read_text())
    OUTPUT_SCHEMA.validate(error)
    assert error["exit_code"] == 143 and error["error"].startswith("interrupted by SIGTERM")
    assert "codemod: interrupted by SIGTERM" in (tmp_path / "err").read_text()


@pytest.mark.parametrize(("events", "said"), [
    ([[1, 2]], "is an array, not an object"),
    ([{"ph": "X", "cat": "cpu_op", "name": "aten::mul"}], "has no `ts`, not a number"),
    ([{"ph": "X", "cat": "cpu_op", "name": 5, "ts": 1}], "has `name` the number 5, not a string"),
    ([{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "ts": 1, "args": 5}], "has `args` the number 5, not an object"),
    ([{"ph": "X", "cat": ["cpu_op"], "name": "aten::mul", "ts": 1}], "has `cat` an array, not a string"),
    ([{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "ts": 1, "args": {"Input type": [["float"]]}}],
     "has `args.Input type` an array, not a list of strings"),
])
def test_a_malformed_trace_is_refused_in_one_line(tmp_path: Path, events: list, said: str) -> None:
    """Issue 26: each of these made a traceback."""
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name"}, *events]}))
    run = run_codemod("hot", "--trace", str(trace), "--tree", str(TARGET_TREE), "--no-measure")
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith(f"codemod: {trace}: event 1 of `traceEvents` {said}"), run.stderr


def test_script_runs_as_python_would_run_it(tmp_path: Path) -> None:
    write_script(tmp_path, "sibling.py", "EXPECTED = ['--steps', '3']\n")
    script = write_script(tmp_path, "args.py", """
        import sys, torch
        from sibling import EXPECTED  # the script's directory comes first on sys.path
        assert sys.argv[1:] == EXPECTED and __name__ == "__main__", sys.argv
        for _ in range(int(sys.argv[2])):
            torch.ones(2).mul(torch.ones(2))
    """)
    report = hot_json(str(script), "--steps", "3", "--tree", str(TARGET_TREE), "--no-measure")
    assert report["args"] == ["--steps", "3"] and by_name(report)["aten::mul"]["calls"] == 3


def test_from_hot_reads_a_report_and_bypasses_its_top_ops(mlp: tuple[dict, Path, Path], tree: Path, tmp_path: Path) -> None:
    report, _, _ = mlp
    bypassable = {o["op"] for o in report["ops"] if o["bypassable"]}
    for mode in hot.MODES:
        picked = hot.top_ops(report, mode, 10)
        assert set(picked) == bypassable  # no estimate without measuring: ranked by covered calls
        covered = [sum(o["covered_calls"] for o in report["ops"] if o["op"] == op) for op in picked]
        assert covered == sorted(covered, reverse=True)
    saved = tmp_path / "hot.json"
    saved.write_text(json.dumps(report))
    assert hot.read_report(saved, json.loads(SCHEMA.read_text())) == report

    run = run_codemod("bypass", "--from-hot", str(saved), "--guarded", "--tree", str(tree), "--dry-run")
    assert run.returncode == 0, run.stderr
    top = hot.top_ops(report, "guarded", 1)[0]
    # issue 28: a --no-measure report has no estimate: said as such, not as "by estimated guarded saving"
    assert f"top 1 bypassable op by calls the bypass covers (the report has no estimate: not measured, --no-measure): {top}" in run.stderr
    assert f"bypass {top} (" in run.stderr and run.stdout.startswith("diff --git ")

    several = run_codemod("bypass", "--from-hot", str(saved), "--top", "2", "--tree", str(tree), "--dry-run")
    assert several.returncode == 0, several.stderr
    first, second = hot.top_ops(report, "plain", 2)
    assert f"top 2 bypassable ops by calls the bypass covers (the report has no estimate: not measured, --no-measure): {first}, {second}" in several.stderr
    assert f"bypass {first} (" in several.stderr and f"bypass {second} (" in several.stderr
    assert several.stdout.startswith("diff --git ")  # one patch for both, as one transaction would apply them


def test_from_hot_refuses_a_bad_report(tree: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"command": "hot", "ops": [{"name": "aten::add"}]}))
    run = run_codemod("bypass", "--from-hot", str(bad), "--tree", str(tree))
    assert run.returncode == 2 and f"{bad}: not a valid `codemod hot --json` report" in run.stderr
    with pytest.raises(BadInput, match="not the output of `codemod hot --json`"):
        bad.write_text(json.dumps({"command": "ops", "ops": []}))
        hot.read_report(bad, json.loads(SCHEMA.read_text()))
    not_a_trace = run_codemod("hot", "--trace", str(bad), "--tree", str(tree))
    assert not_a_trace.returncode == 2 and "no `traceEvents` list" in not_a_trace.stderr
    both = run_codemod("bypass", "add", "--from-hot", str(bad), "--tree", str(tree))
    assert both.returncode == 2 and "give OP... or --from-hot REPORT.json, one of the two" in both.stderr


def test_measured_cost_of_one_op_and_the_estimate_against_the_run(tmp_path: Path) -> None:
    """The one callgrind measurement of these tests (add, cached in the build cache once per torch version).
    Issue 20: hot ranked add_ first with 34,074 instructions saved, about 10 us of a 2.6 ms run, and said nothing
    of the 2.6 ms. Each op's saving and the top ops' total are given in time and as a share of the run, and the
    report ends with one sentence saying whether to bypass."""
    script = write_script(tmp_path, "adds.py", """
        import torch
        a, b = torch.ones(2), torch.ones(2)
        for _ in range(10):
            a.add(b)
    """)
    report = hot_json(str(script), "--tree", str(TARGET_TREE))
    add = by_name(report)["aten::add"]
    per_call = add["cost"]["instructions_per_call"]
    assert per_call["dispatch"] > per_call["guarded"] > per_call["bypass"] > 0
    saving = add["cost"]["saving_per_call"]
    assert saving == {"plain": round(per_call["dispatch"] - per_call["bypass"], 1),
                      "guarded": round(per_call["dispatch"] - per_call["guarded"], 1)}
    assert add["covered_calls"] == add["guard"]["let_through"] == 10
    rate = add["cost"]["ns_per_instruction"]
    assert rate > 0 and report["run_us"] > 0
    for mode in hot.MODES:
        assert add["estimate"][mode] == round(10 * saving[mode])
        assert add["estimate"][f"{mode}_us"] == pytest.approx(add["estimate"][mode] * rate / 1000, abs=1e-3)
        assert add["estimate"][f"{mode}_share"] == pytest.approx(add["estimate"][f"{mode}_us"] / report["run_us"], abs=1e-6)
    assert report["top"]["ops"] == ["add"] and report["top"]["plain_us"] == add["estimate"]["plain_us"]
    # ten adds in a run that starts the profiler: a sliver of it
    assert report["verdict"].startswith("Bypassing add would save about ")
    assert report["verdict"].endswith(": not worth it for this script.")
    table = run_codemod("hot", str(script), "--tree", str(TARGET_TREE))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.strip().splitlines()
    assert " profiled run (torch " in lines[0]
    assert re.search(r" us \([\d.<]+%\) +[\d.]+ us \([\d.<]+%\)  plain, guarded$", next(line for line in lines if line.startswith("aten::add ")))
    assert any(line.startswith("top 1 by estimated saving (add): plain ") and "% of the run)" in line for line in lines)
    assert any(line.startswith("The estimate is calls x the instructions") for line in lines)
    assert lines[-1].startswith("Bypassing add would save about ") and lines[-1].endswith(": not worth it for this script.")


def test_the_closing_sentence_follows_the_share() -> None:
    """The verdict's cases, on a report's own figures: nothing bypassable, not measured, a sliver, worth trying."""
    top = {"ops": ["add", "mul"], "plain": 1_000_000, "guarded": 900_000, "plain_us": 300.0, "guarded_us": 270.0}
    assert hot.verdict({"top": None}) == "No op of this run is bypassable in this tree, so no bypass can speed it up."
    assert "without --no-measure" in hot.verdict({"top": {**top, "plain_us": None}})
    small = hot.verdict({"run_us": 2_600_000.0, "top": {**top, "plain_share": 300 / 2_600_000}})
    assert small == "Bypassing add and mul would save about 300.0 us of this 2.60 s run (0.01%): not worth it for this script."
    large = hot.verdict({"run_us": 2_600.0, "top": {**top, "plain_share": 300 / 2_600}})
    assert large.startswith("Bypassing add and mul would save about 300.0 us of this 2.6 ms run (11.54%): worth trying")
    assert "`codemod bypass --from-hot hot.json --top 2`" in large
