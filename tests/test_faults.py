"""Issue 26: every input a bypass reads is checked before its first write, a cache entry only after it is checked,
and every path refused in one line before it is read.

Real processes, real g++, real files (FIFOs, /proc, over-long names): nothing is mocked. Each run injects a sample of
the faults (a different one each run; the seed is in each test's id: `CODEMOD_FAULT_SEED=N` replays it) and asserts a
refusal: exit 2, one line, and every byte of the tree and of the files beside it as it was.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codemod.apply import targets
from codemod.capture import codegen
from codemod.capture.capture import Capture
from codemod.model import cache
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, NATIVE_SOURCES, Tree
from codemod.plan import structured_kernels
from codemod.verify import compile_check, compiler
from tests.conftest import FIXTURES, REPO, TARGET_TREE
from tests.test_bad_inputs import held, refused

# One sample for the whole run: pytest-xdist's workers share its run id, so they collect the same tests.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
SEED = int(os.environ.get("CODEMOD_FAULT_SEED") or (int(_RUN[:8], 16) if _RUN else random.randrange(1 << 32)))
SAMPLED = 4  # faults per run, of FAULTS
BINARY_OPS = f"{NATIVE_SOURCES}/BinaryOps.cpp"


def database(tree: Path, text: str) -> None:
    (tree / "compile_commands.json").write_text(text)


def entry(tree: Path, *flags: str) -> str:
    return json.dumps([{"directory": str(tree), "file": BINARY_OPS, "arguments": ["g++", *flags, "-c", BINARY_OPS]}])


def fifo_at(path: Path, *then: Callable[[], object]) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    for step in then:
        step()


def write(path: Path, text: str) -> None:
    path.write_text(text)


def without_gxx(beside: Path) -> dict[str, str]:
    """PATH with every program of the current one but g++ and c++, and CXX the default (a CXX of the user's, such as
    a path to another g++, would still be found): no compiler, though the build cache is warm."""
    shown = beside / "bin"
    shown.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for program in Path(directory).glob("*") if Path(directory).is_dir() else ():
            if program.name not in ("g++", "c++") and not (shown / program.name).exists():
                (shown / program.name).symlink_to(program)
    return {"PATH": str(shown), "CXX": "g++"}


LONG = "x" * 300
# Each fault: what it does to the tree (and the directory beside it), the arguments after `bypass mul --tree TREE`, the
# words of its one-line refusal, and the environment it runs in.
FAULTS: dict[str, tuple[Callable[[Path, Path], dict[str, str] | None], tuple[str, ...], tuple[str, ...]]] = {
    "compile_commands.json `{`": (lambda t, _: database(t, "{"), (), ("compile_commands.json: not a compilation database: malformed JSON at line 1",)),
    "compile_commands.json `[1]`": (lambda t, _: database(t, "[1]"), (), ("compile_commands.json: entry 0: not an object of `directory` and `file`",)),
    "compile_commands.json an object": (lambda t, _: database(t, '{"file": "x.cpp"}'), (), ("not a compilation database (a JSON list of entries)",)),
    "compile_commands.json an unclosed quote": (
        lambda t, _: database(t, json.dumps([{"directory": str(t), "file": BINARY_OPS, "command": 'g++ -DX="a -c x.cpp'}])), (),
        ("compile_commands.json: entry 0: its command cannot be split as a shell would (No closing quotation)",),
    ),
    "compile_commands.json a FIFO": (lambda t, _: fifo_at(t / "compile_commands.json"), (), ("compile_commands.json: a FIFO, but it must be a compilation database",)),
    "-include of no file": (
        lambda t, beside: database(t, entry(t, "-include", str(beside / "gone.h"))), (),
        ("gone.h: no such file, but it must be the header", "compile_commands.json gives", "with -include"),
    ),
    "-include of a FIFO": (
        lambda t, beside: fifo_at(beside / "forced.h", lambda: database(t, entry(t, "-include", str(beside / "forced.h")))), (),
        ("forced.h: a FIFO, but it must be the header", "compile_commands.json gives"),
    ),
    "-I of no directory": (
        lambda t, beside: database(t, entry(t, "-I", str(beside / "no-such-dir"))), (),
        ("no-such-dir: not a directory, but", "compile_commands.json gives", "nothing was written"),
    ),
    "no g++ on PATH, the cache warm": (lambda _, beside: without_gxx(beside), (), ("g++: compiler not found", "nothing was written")),
    "a source symlinked to an over-long name": (
        lambda t, beside: (t / NATIVE_SOURCES / "Extra.cpp").symlink_to(beside / LONG), (),
        (f"{NATIVE_SOURCES}/Extra.cpp: cannot be read (File name too long)", "fix or remove it"),
    ),
    "derivatives.yaml a FIFO": (lambda t, _: fifo_at(t / DERIVATIVES), (), (f"{DERIVATIVES}: a FIFO, but it must be the autograd formulas file",)),
    "native_functions.yaml a FIFO": (lambda t, _: fifo_at(t / NATIVE_FUNCTIONS), (), (f"{NATIVE_FUNCTIONS}: a FIFO, but it must be",)),
    "--patch onto a markdown note": (
        lambda _, beside: write(beside / "note.md", "# note\n\n--- a rule, not a diff\n"), ("--patch", "BESIDE/note.md"),
        ("an existing file that codemod did not write",),
    ),
    "--patch onto a multi-document yaml": (
        lambda _, beside: write(beside / "two.yaml", "a: 1\n--- \nb: 2\n"), ("--patch", "BESIDE/two.yaml"),
        ("an existing file that codemod did not write",),
    ),
    "--patch /proc/self/mem": (lambda _, __: None, ("--patch", "/proc/self/mem"), ("/proc/self/mem: a file of the kernel's",)),
    "--patch a FIFO": (lambda _, beside: fifo_at(beside / "p.fifo"), ("--patch", "BESIDE/p.fifo"), ("p.fifo: a FIFO, but it must be the patch",)),
    "--patch a 300-byte name": (lambda _, __: None, ("--patch", f"BESIDE/{LONG}"), ("a component of its name is 300 bytes, more than the 255",)),
}
SAMPLE = sorted(random.Random(SEED).sample(sorted(FAULTS), SAMPLED))


@pytest.mark.parametrize("fault", [pytest.param(f, id=f"{f}-seed{SEED}") for f in SAMPLE])
def test_a_fault_in_any_input_is_refused_before_the_first_write(tmp_path: Path, fault: str) -> None:
    tree, beside = tmp_path / "tree", tmp_path / "beside"
    shutil.copytree(TARGET_TREE, tree)
    beside.mkdir()
    spoil, arguments, words = FAULTS[fault]
    env = {**os.environ, **(spoil(tree, beside) or {})}
    before, outside = held(tree), held(beside)
    command = [sys.executable, "-m", "codemod", "bypass", "mul", "--tree", str(tree), *(a.replace("BESIDE", str(beside)) for a in arguments)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    refused(result, *words)
    assert held(tree) == before and held(beside) == outside, f"seed {SEED}"


def test_the_patch_file_is_codemods_own_and_git_apply_reads_past_its_header(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(TARGET_TREE, tree)
    patch = tmp_path / "mul.patch"
    for _ in range(2):  # a new file, then codemod's own
        result = subprocess.run([sys.executable, "-m", "codemod", "bypass", "mul", "--tree", str(tree), "--dry-run", "--patch", str(patch)],
                                capture_output=True, text=True, cwd=REPO)
        assert result.returncode == 0, result.stderr
        assert patch.read_text() == targets.PATCH_HEADER.format(command="bypass mul") + result.stdout
    applied = subprocess.run(["git", "apply", "--check", str(patch)], cwd=tree, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr


TINY = f"{NATIVE_SOURCES}/Tiny.cpp"


def test_a_compile_record_holds_only_while_a_header_outside_the_tree_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A header compile_commands.json force-includes from outside the tree: its change (an #error) is compiled, never
    taken for "compiled clean before"; a record truncated or of another shape is compiled again, never a crash."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "cache"))
    root, forced = tmp_path / "tree", tmp_path / "outside" / "forced.h"
    (root / NATIVE_SOURCES).mkdir(parents=True)
    (root / TINY).write_text("int tiny() { return FORCED; }\n")
    forced.parent.mkdir()
    forced.write_text("#define FORCED 1\n")
    (root / "compile_commands.json").write_text(json.dumps(
        [{"directory": str(root), "file": TINY, "arguments": ["g++", "-include", str(forced), "-c", TINY]}]
    ))
    tree = Tree(root, has_own_torchgen=False, has_own_autograd=False)
    headers = compile_check.Headers(tmp_path / "generated", "no-headers")

    def compiled() -> compile_check._Compiled:
        return compile_check._View(tree, headers, {}, tmp_path / "scratch").compile(TINY)

    first = compiled()
    assert first.clean and not first.cached, first.output
    assert str(forced) in first.dependencies["outside_tree"]
    assert compiled().cached
    record = compile_check._View(tree, headers, {}, tmp_path / "scratch")._record(TINY)
    for spoiled in (record.read_text()[:40], "[1]", json.dumps({"output": ""})):
        record.write_text(spoiled)
        again = compiled()
        assert again.clean and not again.cached
    forced.write_text("#error changed outside the tree\n")
    changed = compiled()
    assert not changed.cached and "changed outside the tree" in changed.output


def test_one_compile_of_the_same_inputs_asked_twice_at_once_runs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two compiles of the same inputs at the same moment (two test workers, two commands on one build cache): one runs
    g++, the other waits for its record and takes it, clean or not."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "tree"
    (root / NATIVE_SOURCES).mkdir(parents=True)
    tree = Tree(root, has_own_torchgen=False, has_own_autograd=False)
    headers = compile_check.Headers(tmp_path / "generated", "no-headers")
    for text in ("#include <regex>\nbool tiny(const char* s) { return std::regex_match(s, std::regex(\"a+\")); }\n", "int tiny() { return undeclared; }\n"):
        (root / TINY).write_text(text)
        at_once = threading.Barrier(2)

        def compiled(scratch: str) -> compile_check._Compiled:
            at_once.wait()
            return compile_check._View(tree, headers, {}, tmp_path / scratch).compile(TINY)

        with ThreadPoolExecutor(max_workers=2) as pool:
            outcomes = list(pool.map(compiled, ("one", "other")))
        assert sorted(outcome.cached for outcome in outcomes) == [False, True]
        assert outcomes[0].output == outcomes[1].output and outcomes[0].clean == ("undeclared" not in text)


def test_a_kept_entry_truncated_or_of_another_shape_is_never_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Captures, kernel definitions and build records, as the build cache keeps them: read back only whole."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path))
    whole = Capture.from_json((FIXTURES / "target_tree" / "mul.capture.json").read_text()).to_json()  # as capture() keeps it
    kept = tmp_path / "capture.json"
    for text, trusted in ((whole, True), (whole[: len(whole) // 2], False), ("[]", False), (whole.replace('"op"', '"opp"', 1), False)):
        kept.write_text(text)
        assert (cache.kept_json(kept, Capture) is not None) == trusted
    data = (TARGET_TREE / BINARY_OPS).read_bytes()
    found = structured_kernels._kept_definitions_in(BINARY_OPS, data)
    (kernels,) = (tmp_path / "kernels").iterdir()
    kernels.write_text(kernels.read_text()[:-10])
    assert structured_kernels._kept_definitions_in(BINARY_OPS, data) == found  # parsed again
    assert json.loads(kernels.read_text()) == [dataclasses.asdict(d) for d in found]  # and kept anew
    (tmp_path / "built.json").write_text('{"entry": "../../etc", "executable": true')
    assert compiler.recorded("built.json") is None


def test_a_codegen_run_whose_kept_output_changed_is_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept codegen run (torchgen's, the autograd codegen's) is trusted only while its outputs have their bytes."""
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path))
    runs = []

    def generate(out: Path) -> None:
        runs.append(out)
        (out / "ATen").mkdir()
        (out / "ATen" / "Functions.h").write_text("// @generated, whole\n")

    kept, cached = codegen._once("torchgen", ["the same inputs"], generate)
    assert not cached and codegen._once("torchgen", ["the same inputs"], generate) == (kept, True)
    (kept / "ATen" / "Functions.h").write_text("// @gene")  # truncated
    assert codegen._once("torchgen", ["the same inputs"], generate) == (kept, False)
    assert (kept / "ATen" / "Functions.h").read_text() == "// @generated, whole\n" and len(runs) == 2
