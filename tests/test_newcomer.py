"""The newcomer's path (issue 14), as a user walks it: README set-up, the ten-command tutorial, what they see.

Real CLI processes on copies of our target_tree/, the real torchgen, g++, libtorch, clang-format and git.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codemod.apply import journal
from codemod.apply.journal import pristine_copy
from codemod.capture.capture import Capture
from codemod.measure import bench, guarded_ext
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_SOURCES, TEMPLATES, locate
from codemod.plan import cpp_format
from codemod.verify import build, captured, harness
from codemod.verify.compiler import torch_dir
from tests import conftest
from tests.conftest import FIXTURES, OUTPUT_SCHEMA, REPO, run_codemod, snapshot

README = (REPO / "README.md").read_text()
CODEMOD = [sys.executable, "-m", "codemod"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def codemod_in(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CODEMOD, *args], capture_output=True, text=True, cwd=cwd, env={**ENV, **env})


def readme_block(heading: str) -> list[str]:
    """The lines of the first code block after HEADING."""
    section = README[README.index(heading):]
    return section.split("```", 2)[1].strip("\n").splitlines()


# ---------------------------------------------------------------- 1. tests and CI, whatever state target_tree/ is in

def test_the_tests_tree_is_pristine_whatever_the_user_left(tree: Path, tmp_path: Path, target_tree: Path) -> None:
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0  # the README's first command
    assert run_codemod("bypass", "sub", "--tree", str(tree), "--no-verify").returncode == 0
    binary_ops = tree / NATIVE_SOURCES / "BinaryOps.cpp"
    binary_ops.write_text(binary_ops.read_text().replace("op.meta(self, other);", "op.meta(self, other); // mine", 1))
    assert snapshot(pristine_copy(tree, tmp_path / "copy")) == snapshot(target_tree)


def test_tree_from_torch_takes_its_sources_as_they_were_before_any_bypass(tree: Path, tmp_path: Path, target_tree: Path) -> None:
    """Issue 26: from-torch's default sources are the clone's target_tree/, which the README's first command leaves
    bypassed; DEST got the bypassed BinaryOps.cpp and `.codemod/mul.json` beside the wheel's unbypassed yaml."""
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    before = snapshot(tree)
    dest = tmp_path / "full"
    made = run_codemod("tree", "from-torch", str(dest), "--sources", str(tree))
    assert made.returncode == 0, made.stderr
    assert snapshot(tree) == before  # only read
    assert not (dest / journal.JOURNAL_DIR).exists()
    binary_ops = f"{NATIVE_SOURCES}/BinaryOps.cpp"
    assert (dest / binary_ops).read_bytes() == (target_tree / binary_ops).read_bytes()
    assert run_codemod("status", "--tree", str(dest)).stdout == f"no op is bypassed in {dest}\n"


def test_ci_runs_the_readmes_two_commands_in_order_then_the_tutorial_path() -> None:
    main_job, test_command = readme_block("## Set up")
    assert main_job.endswith("codemod bypass mul --tree ./target_tree") and "apt-get install -y g++ valgrind" in main_job
    assert test_command.endswith("python -m pytest")  # on xdist's workers, each file named as it finishes, the time at the end
    ci = (REPO / ".ci/run").read_text()
    extracted = subprocess.run(
        ["bash", "-c", 'source <(sed -n "/^readme_setup_line()/,/^}/p" .ci/run); readme_setup_line 1; readme_setup_line 2'],
        capture_output=True, text=True, cwd=REPO, check=True,
    ).stdout.splitlines()
    assert extracted == [main_job, test_command]  # what CI evaluates is what the user copies
    steps = ['eval "$main_job"', 'eval "$test_command"', "codemod bench mul", "codemod status", "codemod revert mul"]
    assert [ci.index(step) for step in steps] == sorted(ci.index(step) for step in steps)


def test_the_set_up_benchmark_times_the_readmes_own_steps() -> None:
    """benchmarks/fresh_setup.py reads the README's set-up block: it times what a newcomer runs (pip's steps with
    --no-cache-dir, so nothing cached helps), leaving apt-get to the mirror and the tests to suite_cost.py."""
    main_job, test_command = readme_block("## Set up")
    listing = "import json, sys; sys.path.insert(0, 'benchmarks'); import fresh_setup; print(json.dumps(fresh_setup.COMMANDS))"
    listed = subprocess.run([sys.executable, "-c", listing], cwd=REPO, capture_output=True, text=True, check=True).stdout
    timed = [command.replace("pip install --no-cache-dir ", "pip install ") for command in json.loads(listed)]
    assert timed == [step for line in (main_job, test_command) for step in line.split(" && ") if step.startswith(("pip install ", "codemod "))]
    assert timed[1] == "codemod bypass mul --tree ./target_tree" and all("--no-compile" in step for step in timed if step.startswith("pip"))


# ---------------------------------------------------------------- 2, 3, 4. build and bench after a bypass; the guarded gate; status

def test_build_and_bench_after_a_plain_bypass_measure_the_journals_capture(tree: Path) -> None:
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    recorded = journal.load(locate(tree), "mul")
    assert recorded.capture == Capture.from_json((FIXTURES / "target_tree" / "mul.capture.json").read_text())
    built = run_codemod("build", "mul", "--tree", str(tree))
    assert built.returncode == 0, built.stderr
    assert "checks: 70 passed, 0 failed" in built.stderr
    benched = run_codemod("bench", "mul", "--tree", str(tree), "--json", "--no-callgrind", "--size", "2")
    assert benched.returncode == 0, benched.stderr
    OUTPUT_SCHEMA.validate(json.loads(benched.stdout))
    status = run_codemod("status", "--tree", str(tree))
    assert "mul (mul.Tensor, mul_.Tensor, mul.out): plain (`bypass mul`), 10 files, matches the journal" in status.stdout


def test_guarded_bypass_is_compiled_and_checked_before_it_is_applied_then_benched(tree: Path) -> None:
    bypassed = run_codemod("bypass", "mul", "--tree", str(tree), "--guarded", "--no-compile")
    assert bypassed.returncode == 0, bypassed.stderr
    gate = bypassed.stderr.index("checks: 70 passed, 0 failed")
    assert "build: compile mul's guarded bypass" in bypassed.stderr[:gate] and gate < bypassed.stderr.index("changed 6 files")
    status = run_codemod("status", "--tree", str(tree), "--json")
    OUTPUT_SCHEMA.validate(json.loads(status.stdout))
    assert [(b["op"], b["mode"]) for b in json.loads(status.stdout)["bypassed"]] == [("mul", "guarded")]
    assert "mul (mul.Tensor, mul_.Tensor, mul.out): guarded (`bypass mul --guarded`)" in run_codemod("status", "--tree", str(tree)).stdout
    benched = run_codemod("bench", "mul", "--tree", str(tree), "--guarded", "--json", "--no-callgrind", "--size", "2")
    assert benched.returncode == 0, benched.stderr
    assert json.loads(benched.stdout)["mode"] == "guarded"


def test_a_guarded_text_that_does_not_compile_fails_the_gate(target_tree: Path) -> None:
    tree = locate(target_tree)
    _, guarded_capture = captured.bypassed_or_current(tree, "mul", guarded=True)
    broken_body = "{ return no_such_fallback(self, other); }"
    broken = Capture(**{**vars(guarded_capture), "functions": tuple(
        type(f)(**{**vars(f), "body": broken_body}) if f.name == "mul" else f for f in guarded_capture.functions
    )})
    with pytest.raises(VerificationFailed) as raised:
        guarded_ext.build(tree, "mul", broken)
    assert "no_such_fallback" in str(raised.value) and raised.value.exit_code == 1


# ---------------------------------------------------------------- 5. a reader that leaves

def test_a_closed_pipe_never_fails_the_work(tree: Path) -> None:
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    shell = f"set -o pipefail; {' '.join(CODEMOD)} revert mul --tree {tree} 2>&1 | head -1"
    piped = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, cwd=REPO, env=ENV)
    assert piped.returncode == 0 and piped.stdout.startswith("reverted mul (plain): 10 files"), piped.stderr
    assert journal.load(locate(tree), "mul") is None
    for _ in range(3):  # the reader is gone before codemod writes its first byte
        gone = subprocess.Popen([*CODEMOD, "status", "--tree", str(tree)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO, env=ENV)
        gone.stdout.close()
        assert gone.wait() == 0


# ---------------------------------------------------------------- 6, 8. completion and the tree found from where the user is

def test_completion_of_op_before_tree_reads_the_tree_after_it_or_where_the_user_is(tree: Path) -> None:
    env = {**ENV, "_CODEMOD_COMPLETE": "bash_complete"}

    def offered(cwd: Path, words: str, cword: int) -> list[str]:
        run = subprocess.run(CODEMOD, capture_output=True, text=True, cwd=cwd, env={**env, "COMP_WORDS": words, "COMP_CWORD": str(cword)})
        return [line.split(",", 1)[1] for line in run.stdout.splitlines() if line]

    elsewhere = tree.parent
    assert offered(Path("/"), f"codemod bypass mu --tree {tree}", 2) == ["mul"]  # the README's word order
    assert offered(elsewhere, "codemod bypass mu", 2) == ["mul"]  # the one tree below: ./tree, as ./target_tree
    assert offered(tree / "aten/src", "codemod bypass mu", 2) == ["mul"]  # the tree above
    assert offered(Path("/"), "codemod bypass mu", 2) == []


def test_the_tree_is_found_upward_from_a_subdirectory_or_the_message_says_where_it_looked(tree: Path) -> None:
    inside = codemod_in(tree / "aten/src/ATen", "status")
    assert inside.returncode == 0 and f"no op is bypassed in {tree}" in inside.stdout
    outside = codemod_in(tree.parent, "status")
    assert outside.returncode == 2
    assert f"no aten/src/ATen/native/native_functions.yaml in {tree.parent} or any directory above it" in outside.stderr
    assert "aten/aten" not in inside.stderr + outside.stderr


def test_where_no_tree_is_found_the_message_says_where_one_is(tree: Path, tmp_path: Path) -> None:
    """Issue 28: from the clone's root, `codemod status` said there is no tree here or above, though ./target_tree is
    right below; --tree at an installed torch said the same, with no word of `tree from-torch`."""
    below = codemod_in(tree.parent, "status")
    assert below.returncode == 2 and below.stderr.endswith(f"; --tree ./{tree.name} is a tree directly below it: pass that\n")
    installed = Path(torch_dir())
    for where in (installed, installed / "lib", installed.parent):
        pointed = codemod_in(tmp_path, "status", "--tree", str(where))
        assert pointed.returncode == 2, pointed.stderr
        assert pointed.stderr == (f"codemod: {where} is in the installed torch package {installed}, which ships no "
                                  "aten/src/ATen/native/native_functions.yaml; write a PyTorch-layout tree from it with "
                                  "`codemod tree from-torch DEST`, then pass --tree DEST\n")
    (tmp_path / "empty").mkdir()
    nowhere = codemod_in(tmp_path / "empty", "status")
    assert nowhere.stderr.endswith("; run codemod inside a PyTorch checkout or pass --tree its root\n")


# ---------------------------------------------------------------- 7. git status stays clean

def test_git_status_shows_only_the_edited_files_and_nothing_after_revert(tree: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tree, capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "tree")
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    changed = git("status", "--porcelain", "--untracked-files=all").splitlines()
    assert len(changed) == 10 and all(line.startswith(" M ") for line in changed), changed
    assert (tree / ".codemod/.gitignore").read_text() == "*\n"
    assert run_codemod("revert", "mul", "--tree", str(tree)).returncode == 0
    assert git("status", "--porcelain", "--untracked-files=all") == "" and not (tree / ".codemod").exists()


# ---------------------------------------------------------------- 9. the spliced C++ is laid out as PyTorch's

MARKED_BLOCK = re.compile(r"^( *)// @codemod-bypass (\w+) begin: [^\n]*\n(.*?)^ *// @codemod-bypass \2 end\n", re.M | re.S)


def test_spliced_blocks_are_clang_formatted_and_the_users_lines_untouched(tree: Path, target_tree: Path) -> None:
    for op in ("mul", "sub"):
        assert run_codemod("bypass", op, "--tree", str(tree), "--no-verify").returncode == 0
    blocks = 0
    for rel in (f"{NATIVE_SOURCES}/BinaryOps.cpp", *(f"{TEMPLATES}/{name}" for name in ("Functions.h", "Functions.cpp", "TensorBody.h", "TensorMethods.cpp"))):
        text = (tree / rel).read_text()
        for found in MARKED_BLOCK.finditer(text):
            indent, body = found.group(1), found.group(3).rstrip("\n")
            assert cpp_format.format_block(body, indent) == body, f"{rel}: a block is not formatted"
            assert "\n\n\n" not in body and not text[: found.start()].endswith("\n\n\n"), f"{rel}: two empty lines"
            blocks += 1
        original = (target_tree / rel).read_text().splitlines()
        assert _users_lines(MARKED_BLOCK.sub("", text).splitlines()) == _users_lines(original), f"{rel}: a line of the user's changed"
    assert blocks >= 12


def _users_lines(lines: list[str]) -> list[str]:
    """The non-empty lines that are not ours (our includes carry the marker on their line)."""
    return [line for line in lines if line.strip() and "// @codemod-bypass" not in line]


# ---------------------------------------------------------------- 10. bench shows its noise

def test_bench_reports_median_interquartile_range_best_round_and_its_ratio_rule(target_tree: Path) -> None:
    pyplot = bench.pyplot()
    built = build.build(locate(target_tree), "mul")
    measured = bench.measure(built.executable, "mul", "plain", built.timed_call, (2, 4096), count=False)
    rows = measured["wall"]
    for row in rows:
        for path in bench.PATHS:
            assert len(row[f"{path}_rounds_ns"]) == row["rounds"]
            assert row[f"{path}_ns"] <= row[f"{path}_q1_ns"] <= row[f"{path}_median_ns"] <= row[f"{path}_q3_ns"]
        overlap = row["dispatch_q1_ns"] <= row["bypass_q3_ns"] and row["bypass_q1_ns"] <= row["dispatch_q3_ns"]
        assert (row["compared"]["bypass"]["median_ratio"] is None) is overlap
    table = bench.table(measured).splitlines()
    assert table[0] == "mul: dispatcher `at::mul` vs bypass `codemod_ext_mul::`, in one process, interleaved"
    assert table[1] == f"calling {built.timed_call}" and re.fullmatch(r"machine: .+, \d+ cores", table[2])
    assert re.fullmatch(r"load average \(1, 5, 15 min\): [\d. ]+ at start, [\d. ]+ at end", table[3])
    assert table[5].split() == ["elements", "path", "median", "interquartile", "range", "best", "round", "ratio"]
    figure = bench.figure(measured, pyplot)
    timing, _ = figure.axes
    assert [t.get_text() for t in timing.get_legend().get_texts()] == ["at::mul via dispatcher", "bypass"]
    assert len(timing.collections) == 2  # one interquartile band per path
    assert "mul.Tensor(" in timing.get_title() and "load average" in timing.get_title()
    pyplot.close(figure)


def _rounds(best: float, q1: float, q3: float, count: int = 41) -> list[float]:
    """COUNT rounds: BEST once, the rest evenly from Q1 to Q3 and as far beyond each (so the quartiles are about Q1, Q3)."""
    spread = q3 - q1
    return [best] + [q1 - spread / 2 + 2 * spread * i / (count - 2) for i in range(count - 1)]


def _row(numel: int, count: int = 41, **paths: tuple[float, float, float]) -> dict:
    row = {"numel": numel, "rounds": count}
    for path, (best, q1, q3) in paths.items():
        row[f"{path}_ns"], row[f"{path}_rounds_ns"] = best, _rounds(best, q1, q3, count)
    return row


def test_a_ratio_is_unreliable_by_its_own_rounds_only() -> None:
    """Issue 28: the 1-element ratio was hidden as "unreliable" only because its median (771 ns) was above the
    2-element one (717 ns); with --guarded both were hidden. A ratio is now judged by its own size's rounds: shown
    unless the two paths' interquartile ranges overlap, or there were fewer than MIN_ROUNDS rounds."""
    paths = tuple(bench.LABELS["guarded"])
    rows = bench.summarized([
        _row(1, dispatch=(700, 760, 780), bypass=(600, 640, 660), guarded=(620, 670, 690)),  # above the 2-element medians
        _row(2, dispatch=(650, 705, 730), bypass=(550, 600, 620), guarded=(600, 700, 720)),  # guarded overlaps
        _row(16, dispatch=(4_217, 9_000_000, 11_000_000), bypass=(4_100, 4_250, 4_350), guarded=(4_000, 4_200, 4_400)),
        _row(256, count=bench.MIN_ROUNDS - 1, dispatch=(700, 760, 780), bypass=(600, 640, 660), guarded=(620, 670, 690)),
    ], paths)
    reasons = {row["numel"]: {path: row["compared"][path]["unreliable"] for path in paths[1:]} for row in rows}
    assert reasons == {
        1: {"bypass": None, "guarded": None},
        2: {"bypass": None, "guarded": "the interquartile ranges overlap"},
        16: {"bypass": None, "guarded": None},  # a median far above its best round: its spread still apart
        256: {"bypass": f"fewer than {bench.MIN_ROUNDS} rounds", "guarded": f"fewer than {bench.MIN_ROUNDS} rounds"},
    }
    one = rows[0]
    assert one["compared"]["bypass"]["median_ratio"] == one["dispatch_median_ns"] / one["bypass_median_ns"]
    assert rows[1]["compared"]["guarded"]["median_ratio"] is None
    assert all(row["compared"][path]["best_ratio"] == row["dispatch_ns"] / row[f"{path}_ns"] for row in rows for path in paths[1:])


def _counts(paths: tuple[str, ...]) -> dict:
    """Callgrind's figures as bench.callgrind reports them, with function names as long as real ones get."""
    folded = "at::(anonymous namespace)::structured_mul_out_functional::set_output_raw_strided (linker-folded with 12 identical functions; callgrind names it at::meta::structured_lcm_out::maybe_get_output)"
    return {
        "instructions": {p: {"n1": 1_000, "n2": 3_000, "per_call": 5_000 + 300 * i} for i, p in enumerate(paths)},
        "call_path": {p: [{"function": f"{p}_functional", "inclusive_per_call": 5_000}, {"function": folded, "inclusive_per_call": 4_400}] for p in paths},
        "above_kernel": {p: [{"function": folded, "inclusive_per_call": 4_400.0, "own_per_call": 73.0}] for p in paths},
        "above_kernel_per_call": {p: 640.0 for p in paths},
        **({"guard_removes": 0.74} if "guarded" in paths else {}),
    }


@pytest.mark.parametrize("mode", ["plain", "guarded"])
def test_bench_table_and_markdown_name_every_column_and_fit_in_100_columns(mode: str) -> None:
    """Issue 28: the table was 110-170 characters wide, did not say the last columns were the best round, and had no
    markdown to paste into a pull request; and neither said the machine."""
    paths = tuple(bench.LABELS[mode])
    huge = {path: (159_988, 2_351_626, 83_893_959) for path in paths}  # a 1M-element row under load
    rows = bench.summarized([_row(1, **{p: (700 - 50 * i, 760 - 50 * i, 780 - 50 * i) for i, p in enumerate(paths)}),
                             _row(1_048_576, **huge)], paths)
    measured = {"op": "mul", "mode": mode, "call": "mul.Tensor(self=float32[N], other=float32[N]) [generated from the schema]",
                "machine": {"cpu": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "cores": 2}, "wall": rows,
                "load_average": {"start": [1.0, 2.0, 3.0], "end": [4.0, 5.0, 6.0]}, "callgrind": _counts(paths),
                "observed": {p: {"profiler_events": [] if p == "bypass" else ["aten::mul"], "grad_fn": None} for p in paths}}
    table, markdown = bench.table(measured), bench.markdown(measured)
    for text in (table, markdown):
        assert max(map(len, text.splitlines())) <= bench.WIDTH, text
        assert "machine: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz, 2 cores" in text
        assert "load average (1, 5, 15 min): 1.00 2.00 3.00 at start, 4.00 5.00 6.00 at end" in text
        assert "ratio: the dispatcher's median over the path's, shown when the two paths' interquartile ranges" in text.lower()
    lines = table.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("elements"))
    assert re.split(r"  +", lines[head].strip()) == ["elements", "path", "median", "interquartile range", "best round", "ratio"]
    labels = list(bench.LABELS[mode].values())
    first = rows[0]
    figures = [f"{first[f'dispatch_{figure}_ns']:,.0f}" for figure in ("median", "q1", "q3")]
    expected = ["1", "dispatcher", figures[0], f"{figures[1]}-{figures[2]}", "700"]
    assert re.split(r"  +", lines[head + 1].strip()) == expected
    assert lines[head + 2].strip().startswith(labels[1]) and lines[head + 2].endswith("x")
    assert re.fullmatch(r"1,048,576  dispatcher +[\d,]{10} +[\d,]{7}-[\d,]{10} +159,988", lines[head + 1 + len(labels)].lstrip())
    assert lines[head + 2 + len(labels)].rstrip().endswith(" -")  # the ranges overlap: no ratio
    markdown_lines = markdown.splitlines()
    header = markdown_lines.index("| elements | path | median | interquartile range | best round | ratio |")
    assert markdown_lines[header + 1] == "|---:|---|---:|---:|---:|---:|"
    assert markdown_lines[header + 2] == f"| {' | '.join(expected)} |  |"
    assert len([line for line in markdown_lines if line.startswith("| ")]) == 1 + 2 * len(labels)
    assert "<details><summary>Call paths (callgrind)</summary>" in markdown_lines and markdown_lines[-1] == "</details>"


def test_bench_times_the_call_people_write(target_tree: Path) -> None:
    """Issue 20: `bench add` timed add(a, b, alpha=2); people write `a + b`. Every argument with a default takes it."""
    tree = locate(target_tree)
    for op, call in (("add", "add.Tensor(self=float32[N], other=float32[N], alpha=1)"),
                     ("sum", "sum.dim_IntList(self=float32[N], dim=[0], keepdim=False, dtype=None)")):
        entries, capture = captured.bypassed_or_current(tree, op)
        assert harness.timed_call(capture, entries.groups[0]).shown.startswith(call + " [")


def test_call_paths_wrap_at_arrows() -> None:
    steps = [f"namespace::function_number_{i} ({i * 1000:,})" for i in range(9)]
    lines = bench._wrapped("dispatcher call path (inclusive instructions/call): ", steps)
    assert len(lines) > 1 and all(len(line) <= bench.WIDTH for line in lines)
    assert all(line.startswith("  -> ") for line in lines[1:])
    assert "\n".join(lines).replace("\n  -> ", " -> ") == "dispatcher call path (inclusive instructions/call): " + " -> ".join(steps)


# ---------------------------------------------------------------- 11. the README a newcomer reads

def test_readme_leads_with_what_it_does_the_set_up_and_the_ten_command_tutorial() -> None:
    headings = re.findall(r"^## (.*)$", README, re.M)
    assert headings[:3] == ["What it does", "Set up (fresh machine)", "Tutorial: the exercise in ten commands"]
    intro = README.split("\n## ", 1)[0].split("\n", 1)[1].strip()
    assert len(intro.splitlines()) <= 3
    tutorial = [line for line in readme_block("## Tutorial") if line.startswith("codemod ")]
    assert len(tutorial) == 10
    for line in tutorial:  # each is a command codemod accepts: an unknown option or command exits 2, even with --help
        command = line.split("#")[0].split()
        assert subprocess.run([*CODEMOD, *command[1:], "--help"], capture_output=True, cwd=REPO, env=ENV).returncode == 0, line


def test_bench_help_and_the_generated_bench_example_have_every_default_size() -> None:
    help_text = subprocess.run([*CODEMOD, "bench", "--help"], capture_output=True, text=True, cwd=REPO, env=ENV).stdout
    defaults = re.search(r"default ([\d, ]+)\.", " ".join(help_text.split())).group(1)
    assert [int(n) for n in defaults.split(", ")] == list(bench.SIZES)
    page = (REPO / "docs" / "measurements.md").read_text()
    sample = page[page.index("docs/generate.py: measure/bench"):].split("```")[1]
    rows = re.findall(r"^ *([\d,]+)  dispatcher ", sample, re.M)  # a size's first row names the dispatcher path
    assert [int(n.replace(",", "")) for n in rows] == list(bench.SIZES)


def test_the_tests_name_each_file_as_it_finishes_on_a_worker_more_than_the_cores() -> None:
    """The README's test command runs on pytest-xdist's workers (`-n auto`: conftest asks for one more than the cores,
    which a worker waiting on another's build-cache entry leaves idle), whose dots alone say nothing of where the run
    is: conftest prints a line as each file finishes."""
    files = ["tests/test_layout.py", "tests/test_dependencies.py"]  # two of the cheapest files
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "auto", "-p", "no:cacheprovider", *files],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stdout[-3000:]
    finished = re.findall(r"^\[([12])/2\] (tests/\S+): (\d+) passed in \d+ s$", run.stdout, re.M)
    assert sorted(number for number, _, _ in finished) == ["1", "2"] and sorted(file for _, file, _ in finished) == sorted(files)
    workers = len(os.sched_getaffinity(0)) + 1
    assert f"created: {workers}/{workers} workers" in run.stdout


@pytest.mark.parametrize("text", [
    '{"files": [{"file": "tests/test_ops.py", "cpu_s"',  # truncated
    "[1]",  # not an object
    '{"files": [{"file": "tests/test_ops.py", "cpu_s": "9"}]}',  # seconds as a string
    "<<<<<<< HEAD\n",  # a merge's conflict markers
])
def test_a_suite_record_the_workers_cannot_read_stops_the_run_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """The workers order their files by the suite's last record: one that cannot be read is pytest's usage error
    (exit 4, one line), raised by the controller before any worker starts, never an INTERNALERROR's traceback."""
    assert conftest.recorded_cpu_seconds()["tests/test_compile_check.py"] > 0  # the committed record reads
    record = tmp_path / "suite_cost.json"
    record.write_text(text)
    monkeypatch.setattr(conftest, "SUITE_COST", record)
    with pytest.raises(pytest.UsageError) as refused:
        conftest.recorded_cpu_seconds()
    assert str(refused.value).startswith(f"{record}: not a record of benchmarks/suite_cost.py (")
    assert str(refused.value).endswith("or record it again (`python benchmarks/suite_cost.py`)")
