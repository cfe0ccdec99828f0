"""What a user sees: --json objects valid against the schema, for every command; progress lines, -q (errors only) / -v;
usage errors in one line; shell completion."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from codemod.apply.targets import PATCH_HEADER
from codemod.cli.main import main
from codemod.cli.report import SCHEMA
from tests.conftest import OUTPUT_SCHEMA, REPO, run_codemod, snapshot


def json_of(*args: str, exit_code: int = 0) -> dict:
    """Run codemod with --json: stdout is exactly one object valid against the schema."""
    run = run_codemod(*args, "--json")
    assert run.returncode == exit_code, run.stderr
    document = json.loads(run.stdout)
    OUTPUT_SCHEMA.validate(document)
    return document


def test_every_json_object_follows_the_schema(tree: Path) -> None:
    dry = json_of("bypass", "mul", "--tree", str(tree), "--dry-run")
    (planned,) = dry["ops"]
    assert dry["applied"] is False and dry["patch"].startswith("diff --git ")
    assert {f["path"] for f in planned["files"]} >= {"aten/src/ATen/native/native_functions.yaml", "tools/autograd/derivatives.yaml"}
    assert all(f["hunks"] >= 1 for f in planned["files"])
    assert any("autograd" in loss for loss in planned["losses"]) and [x for x in planned["unrewritten"] if x["needs_edit"]] == []

    applied = json_of("bypass", "mul", "--tree", str(tree), "--no-verify")
    assert applied["applied"] is True and "patch" not in applied and set(applied["seconds"]) == {"plan", "apply"}
    again = json_of("bypass", "mul", "--tree", str(tree))
    assert (again["ops"], again["already_bypassed"], again["applied"]) == ([], ["mul"], False)

    status = json_of("status", "--tree", str(tree))
    assert [b["op"] for b in status["bypassed"]] == ["mul"] and status["bypassed"][0]["changed_since"] == []
    ops = json_of("ops", "--tree", str(tree))
    assert next(o for o in ops["ops"] if o["op"] == "mul")["reason"] == "bypassed"

    reverted = json_of("revert", "mul", "--tree", str(tree))
    (mul,) = reverted["reverted"]
    assert {f["outcome"] for f in mul["files"]} <= {"restored", "deleted"} and len(mul["files"]) == len(applied["ops"][0]["files"])

    unknown = json_of("bypass", "mull", "--tree", str(tree), exit_code=2)
    assert unknown["exit_code"] == 2 and "did you mean mul" in unknown["error"]


def test_several_ops_are_one_json_object_for_bypass_and_revert(tree: Path) -> None:
    """Issue 18 §9: a command that takes several ops reports them all in one object, in order (it refused before)."""
    dry = json_of("bypass", "mul", "div", "--tree", str(tree), "--dry-run")
    assert [op["op"] for op in dry["ops"]] == ["mul", "div"] and "div.out_mode" in dry["ops"][1]["overloads"]
    assert "a/aten/src/ATen/templates/Functions.h" in dry["patch"]
    applied = json_of("bypass", "div", "mul", "sub", "--tree", str(tree), "--no-verify", "--guarded")
    assert [(op["op"], op["mode"]) for op in applied["ops"]] == [("div", "guarded"), ("mul", "guarded"), ("sub", "guarded")]
    assert json_of("bypass", "sub", "mul", "--tree", str(tree), "--guarded")["already_bypassed"] == ["sub", "mul"]
    reverted = json_of("revert", "mul", "div", "--tree", str(tree))
    assert [(r["op"], r["mode"]) for r in reverted["reverted"]] == [("mul", "guarded"), ("div", "guarded")]
    everything = json_of("revert", "--all", "--tree", str(tree))
    assert [r["op"] for r in everything["reverted"]] == ["sub"] and everything["not_bypassed"] == []


def test_reverting_what_is_not_bypassed_is_nothing_to_do_whether_named_or_all(tree: Path) -> None:
    """Issue 18 §9: one rule for `revert OP` and `revert --all` (with or without --json): nothing bypassed is nothing to
    do (exit 0, said), as `bypass` of an op already bypassed is; a name the tree does not have is bad input."""
    before = snapshot(tree)
    for args in (["div"], ["--all"], ["div", "--json"], ["--all", "--json"], ["div", "sub"]):
        run = run_codemod("revert", *args, "--tree", str(tree))
        assert run.returncode == 0, (args, run.stderr)
        assert "nothing to revert" in run.stderr
        if "--json" in args:
            document = json.loads(run.stdout)
            OUTPUT_SCHEMA.validate(document)
            assert document["reverted"] == [] and document["not_bypassed"] == [a for a in args if a not in ("--all", "--json")]
    assert snapshot(tree) == before
    assert run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify").returncode == 0
    both = json_of("revert", "div", "mul", "--tree", str(tree))
    assert [r["op"] for r in both["reverted"]] == ["mul"] and both["not_bypassed"] == ["div"]
    assert snapshot(tree) == before
    typo = run_codemod("revert", "mull", "--tree", str(tree))
    assert typo.returncode == 2 and "unknown op 'mull'" in typo.stderr and "did you mean mul" in typo.stderr


def test_guarded_json_names_its_mode(tree: Path) -> None:
    (guarded,) = json_of("bypass", "mul", "--tree", str(tree), "--dry-run", "--guarded")["ops"]
    assert guarded["mode"] == "guarded" and guarded["foreach_ops_losing_autograd"] == []


@pytest.mark.parametrize(("flags", "progress", "commands"), [((), True, False), (("-q",), False, False), (("-v",), True, True)])
def test_progress_lines_and_verbosity(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], progress: bool, commands: bool
) -> None:
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "cache"))  # empty: torchgen runs (a kept run shows no command)
    run = run_codemod(*flags, "bypass", "sub", "--tree", str(tree), "--dry-run")
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert any(line.startswith("capture: torchgen on the entries of sub") and line.endswith(" s") for line in lines) == progress
    assert any(line.startswith("$ ") and "torchgen.gen" in line for line in lines) == commands
    assert run.stdout.startswith("diff --git ")  # the patch alone on stdout, whatever the verbosity


def test_shell_completion_offers_the_trees_ops(tree: Path) -> None:
    def complete(words: str) -> list[str]:
        env = dict(os.environ, _CODEMOD_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - (not words.endswith(" "))))
        run = subprocess.run([sys.executable, "-m", "codemod"], env=env, capture_output=True, text=True, cwd=REPO)
        return [line.split(",", 1)[1] for line in run.stdout.splitlines() if line]

    assert complete(f"codemod bypass --tree {tree} su") == ["sub", "sum"]
    assert complete(f"codemod bypass -q --tree {tree} --json su") == ["sub", "sum"]  # global options after the command
    assert complete("codemod status --color ") == ["auto", "always", "never"]
    assert "div" in complete(f"codemod explain --tree {tree} ")
    assert complete(f"codemod revert --tree {tree} ") == []
    assert run_codemod("bypass", "div", "--tree", str(tree), "--no-verify").returncode == 0
    assert complete(f"codemod revert --tree {tree} ") == ["div"]


def leaf_commands(group: click.Group = main, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command a user can run, as its words after `codemod` (`("tree", "from-torch")`; `("cache",)` too, a
    family that runs alone)."""
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += [(*path, name)] * command.invoke_without_command + leaf_commands(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def test_quiet_prints_errors_only(tree: Path, tmp_path: Path) -> None:
    """Issue 20 §3: `-q` is errors only, as in git: no progress, no summary; answers still on stdout."""
    script = tmp_path / "one_mul.py"
    script.write_text("import torch\ntorch.ones(2) * torch.ones(2)\n")
    succeeding = [
        ("bypass", "mul", "--no-verify"), ("bypass", "mul"), ("status",), ("build", "mul"), ("revert", "mul"),
        ("revert", "--all"), ("ops",), ("explain", "mul"), ("recover",), ("bench", "mul", "--no-callgrind", "--size", "2"),
    ]
    for args in succeeding:
        run = run_codemod("-q", *args, "--tree", str(tree))
        assert run.returncode == 0 and run.stderr == "", (args, run.stderr)
    assert run_codemod("-q", "status", "--tree", str(tree)).stdout == f"no op is bypassed in {tree}\n"  # an answer, not chatter
    assert run_codemod("-q", "hot", str(script), "--no-measure", "--tree", str(tree)).stderr == ""
    assert run_codemod("-q", "tree", "from-torch", str(tmp_path / "full")).stderr == ""
    failing = run_codemod("-q", "bypass", "mull", "--tree", str(tree))
    assert failing.returncode == 2 and failing.stderr.startswith("codemod: unknown op 'mull'") and failing.stderr.count("\n") == 1


def test_every_commands_help_names_the_global_options_and_the_schema_file() -> None:
    """Issue 20 §3: the help named codemod/output.schema.json, which does not exist. Issue 28: --json is a global
    option, as -q, -v and --color: `codemod --help` says what each does, every command's help that it takes them."""
    root_help = " ".join(run_codemod("--help").stdout.split())
    assert "--json Print one JSON object on stdout" in root_help
    named = re.search(r"documented by (\S+?)\)", root_help).group(1)
    assert (REPO / named).is_file() and (REPO / named).resolve() == SCHEMA.resolve(), named
    for words in leaf_commands():
        help_text = " ".join(run_codemod(*words, "--help").stdout.split())
        assert "Global options, before or after the command: -q, -v, --json, --color WHEN (see `codemod --help`)." in help_text, words


GLOBAL_OPTIONS = ("-q", "-v", "--json", "--color", "never")


@pytest.mark.parametrize("words", leaf_commands(), ids=" ".join)
def test_every_command_takes_the_global_options_after_its_name(words: tuple[str, ...]) -> None:
    """Issue 28: `codemod revert mul --tree ./target_tree -q` said "no such option"; the group takes them anywhere."""
    run = run_codemod(*words, *GLOBAL_OPTIONS, "--help")
    assert run.returncode == 0 and run.stdout.startswith(f"Usage: codemod {' '.join(words)} "), run.stderr


def test_a_global_option_means_the_same_before_and_after_the_command(tree: Path, tmp_path: Path) -> None:
    """One meaning wherever it stands; left alone: what follows `--` (the profiled script's own -v), and a value of
    an option that looks like one (`--patch -q` writes a file named -q)."""
    on_tree = ("--tree", str(tree))
    before, after = run_codemod("-q", "--json", "status", *on_tree), run_codemod("status", *on_tree, "--json", "-q")
    assert (before.returncode, before.stdout, before.stderr) == (after.returncode, after.stdout, after.stderr) == (0, after.stdout, "")
    assert json.loads(after.stdout)["command"] == "status"
    script = tmp_path / "argv.py"
    script.write_text("import sys\nprint('script argv:', sys.argv[1:])\n")
    profiled = run_codemod("hot", str(script), "--no-measure", *on_tree, "-q", "--", "-v", "--json")
    assert profiled.returncode == 0, profiled.stderr
    assert "script argv: ['-v', '--json']" in profiled.stdout and profiled.stderr == ""  # -q was codemod's; the rest the script's
    patched = subprocess.run([sys.executable, "-m", "codemod", "bypass", "mul", *on_tree, "--dry-run", "--patch", "-q"],
                             capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert patched.returncode == 0, patched.stderr
    written = (tmp_path / "-q").read_text()  # a file, not quiet: codemod's header line, then the patch
    assert written == PATCH_HEADER.format(command="bypass mul") + patched.stdout and "would change" in patched.stderr


def test_color_colors_the_patch_and_the_hunks_as_asked(tree: Path) -> None:
    """--color WHEN (auto: on a terminal, which a test's pipe is not) colors the --dry-run patch and -i's hunks, as
    git colors a diff; the bytes are otherwise the same."""
    on_tree = ("--tree", str(tree))
    plain, auto = run_codemod("bypass", "mul", *on_tree, "--dry-run", "--color", "never"), run_codemod("bypass", "mul", *on_tree, "--dry-run")
    colored = run_codemod("--color=always", "bypass", "mul", *on_tree, "--dry-run")
    assert plain.stdout == auto.stdout and "\x1b[" not in plain.stdout + plain.stderr
    assert re.sub(r"\x1b\[[\d;]*m", "", colored.stdout) == plain.stdout and "\x1b[32m+// @codemod-bypass mul begin" in colored.stdout
    assert "\x1b[1mdiff --git a/" in colored.stdout and "\x1b[" not in colored.stderr  # the summary is not a diff
    reviewed = subprocess.run([sys.executable, "-m", "codemod", "bypass", "mul", *on_tree, "-i", "--color", "always"], input="q\n",
                              capture_output=True, text=True, cwd=REPO)
    assert reviewed.returncode == 0 and "\x1b[36m@@ " in reviewed.stderr and "quit: nothing written" in reviewed.stderr


def test_no_command_gives_a_global_option_another_meaning() -> None:
    """Issue 28: `-v` meant "every check" after `build` and "every command" before it; `build --show-checks` now."""
    global_names = {name for param in main.params for name in getattr(param, "opts", ())}
    for words in leaf_commands():
        command = main
        for word in words:
            command = command.commands[word]
        clashing = {name for param in command.params for name in getattr(param, "opts", ())} & global_names
        assert not clashing, (words, clashing)


def test_every_command_answers_in_one_json_object(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command a user can run, with --json: one object on stdout, valid against the schema, naming the command."""
    script = tmp_path / "one_mul.py"
    script.write_text("import torch\ntorch.ones(2) * torch.ones(2)\n")
    on_tree = ("--tree", str(tree))
    runs = {
        ("bypass",): ("bypass", "mul", "--no-verify", *on_tree),
        ("status",): ("status", *on_tree),
        ("ops",): ("ops", "--bypassable", *on_tree),
        ("explain",): ("explain", "sub", *on_tree),
        ("build",): ("build", "mul", *on_tree),
        ("bench",): ("bench", "mul", "--no-callgrind", "--size", "2", *on_tree),
        ("hot",): ("hot", str(script), "--no-measure", *on_tree),
        ("revert",): ("revert", "mul", *on_tree),
        ("recover",): ("recover", *on_tree),
        ("tree", "from-torch"): ("tree", "from-torch", str(tmp_path / "full")),
        ("cache",): ("cache",),
        ("cache", "prune"): ("cache", "prune", "--stale"),  # last, on a cache of its own
    }
    assert sorted(runs) == leaf_commands()  # a new command needs its --json here
    for words, args in runs.items():
        if words[0] == "cache":
            monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "cache"))
        document = json_of(*args)
        assert document["command"] == " ".join(words) and "error" not in document, document
    explained = json_of("explain", "mul", *on_tree)
    assert [e["overload"] for e in explained["groups"][0]] == ["mul.Tensor", "mul_.Tensor", "mul.out"]
    assert explained["today"][0] == {"at": "at::mul", "what": "generated in Functions.h: at::_ops::mul_Tensor::call(self, other)"}
    assert "at::cpu::mul_out" in explained["disappears"] and "at::redispatch::mul_" in explained["disappears"]
    text = run_codemod("explain", "mul", *on_tree).stdout  # the text says the same
    assert f"mul.Tensor           line {explained['groups'][0][0]['line']:<6} structured_delegate: mul.out" in text
    assert "  1. at::mul  generated in Functions.h: at::_ops::mul_Tensor::call(self, other)" in text


@pytest.mark.parametrize("words", leaf_commands(), ids=" ".join)
def test_a_usage_error_is_one_line_with_the_fix_and_exit_2(words: tuple[str, ...]) -> None:
    """Issue 20 §3: click's four lines (usage, hint, blank, error) become ours: `codemod: what (the fix)`, exit 2; with
    --json, the error object on stdout as for every other error."""
    wrong, what = ("--xyzzy",), "no such option '--xyzzy'"  # hot's too: a script's options follow the script
    run = run_codemod(*words, "--json", *wrong)
    assert run.returncode == 2
    assert run.stderr == f"codemod: {what} (see `codemod {' '.join(words)} --help`)\n"
    document = json.loads(run.stdout)
    OUTPUT_SCHEMA.validate(document)
    assert document == {"command": " ".join(words), "error": run.stderr.removeprefix("codemod: ").strip(), "exit_code": 2}
    assert run_codemod(*words, *wrong).stdout == ""  # without --json, nothing on stdout


@pytest.mark.parametrize(("args", "line"), [
    (("bypas", "mul"), "codemod: no such command 'bypas' (did you mean 'bypass'? see `codemod --help`)"),
    (("bypass", "mul", "--dry"), "codemod: no such option '--dry' (did you mean '--dry-run'? see `codemod bypass --help`)"),
    (("explain",), "codemod: missing argument 'OP' (see `codemod explain --help`)"),
    (("bench", "mul", "--size"), "codemod: option '--size' requires an argument (see `codemod bench --help`)"),
    (("bypass", "mul", "--top", "0"), "codemod: invalid value for '--top': 0 is not in the range x>=1 (see `codemod bypass --help`)"),
    (("tree", "from-tourch"), "codemod: no such command 'from-tourch' (did you mean 'from-torch'? see `codemod tree --help`)"),
    (("--quite", "status"), "codemod: no such option '--quite' (did you mean '--quiet'? see `codemod --help`)"),
    (("status", "--quite"), "codemod: no such option '--quite' (did you mean '--quiet' or '--tree'? see `codemod status --help`)"),
    (("hot", "--tre", "./target_tree", "train.py"),
     "codemod: no such option '--tre' (did you mean '--tree' or '--trace'? see `codemod hot --help`)"),
    (("status", "--color"), "codemod: option '--color' requires an argument (see `codemod --help`)"),
    (("status", "--color", "red"), "codemod: invalid value for '--color': 'red' is not one of 'auto', 'always', 'never' (see `codemod --help`)"),
    (("bypass", "mul", "--top", "2"), "codemod: --top needs --from-hot (see `codemod bypass --help`)"),
    (("build", "mul", "-v", "--show-check"), "codemod: no such option '--show-check' (did you mean '--show-checks' or '--no-check'? see `codemod build --help`)"),
])
def test_each_kind_of_usage_error_names_its_command_and_the_fix(args: tuple[str, ...], line: str) -> None:
    run = run_codemod(*args)
    assert (run.returncode, run.stderr, run.stdout) == (2, line + "\n", "")
