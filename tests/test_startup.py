"""The commands people run all day start light, by design: `codemod` imports a command's module only when that
command runs, and the heavy libraries only where a command needs them. Pinned by what a run imports (no timing:
the figures are benchmarks/command_latency.py's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from codemod.cli.main import COMMANDS
from tests.conftest import REPO, run_codemod

# Seconds to import each (torch, libcst), or tens of ms (jsonschema, importlib.metadata); none is needed to show help.
HEAVY = ("torch", "libcst", "jsonschema")
NOT_FOR_HELP = (*HEAVY, "tree_sitter", "yaml", "ruamel.yaml", "importlib.metadata", "concurrent.futures")

# Runs `codemod ARGS...` in this process, then writes the names of every module it imported to the file argv[1].
_PROBE = """
import json, sys
from codemod.cli.main import main
try:
    main(sys.argv[2:], prog_name="codemod")
except SystemExit:
    pass
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
"""


def imported_by(tmp_path: Path, *args: str, **env: str) -> set[str]:
    """The modules `codemod ARGS...` imports, in a fresh interpreter."""
    listing = tmp_path / "modules.json"
    run = subprocess.run([sys.executable, "-c", _PROBE, str(listing), *args], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, **env})
    assert listing.is_file(), run.stderr
    return set(json.loads(listing.read_text()))


def test_help_imports_no_command_and_no_heavy_library(tmp_path: Path) -> None:
    modules = imported_by(tmp_path, "--help")
    assert not modules & set(NOT_FOR_HELP), modules & set(NOT_FOR_HELP)
    assert not {m for m in modules if m.startswith("codemod.cli.commands.")}
    assert not {m for m in modules if m.split(".")[1:2] in (["capture"], ["plan"], ["verify"], ["measure"])}


def test_help_lists_every_command_with_its_short_help() -> None:
    shown = run_codemod("--help").stdout
    for name, command in COMMANDS.items():
        assert f"  {name:<8} {command.short_help}\n" in shown, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_help_imports_no_heavy_library(tmp_path: Path, name: str) -> None:
    modules = imported_by(tmp_path, name, "--help")
    assert not modules & set(HEAVY), modules & set(HEAVY)
    assert COMMANDS[name].target.partition(":")[0] in modules
    if name == "status":  # a light command loads no other command's module (bypass shares build's, for one)
        assert {m for m in modules if m.startswith("codemod.cli.commands.")} == {"codemod.cli.commands.state"}


def test_completing_a_command_name_loads_no_command(tmp_path: Path) -> None:
    env = {"_CODEMOD_COMPLETE": "zsh_complete", "COMP_WORDS": "codemod b", "COMP_CWORD": "1"}
    modules = imported_by(tmp_path, **env)
    assert not {m for m in modules if m.startswith("codemod.cli.commands.")}
    offered = subprocess.run([sys.executable, "-m", "codemod"], capture_output=True, text=True, cwd=REPO, env={**os.environ, **env}).stdout
    assert offered.split("\n")[:6] == ["plain", "bench", COMMANDS["bench"].short_help, "plain", "build", COMMANDS["build"].short_help]


def test_status_ops_and_explain_import_no_heavy_library(tmp_path: Path, tree: Path) -> None:
    on_tree = ("--tree", str(tree))
    for args in (("status", *on_tree), ("ops", *on_tree), ("explain", "mul", *on_tree)):
        modules = imported_by(tmp_path, *args)
        assert not modules & set(HEAVY), (args, modules & set(HEAVY))
    assert run_codemod("bypass", "mul", *on_tree, "--no-verify").returncode == 0
    modules = imported_by(tmp_path, "status", *on_tree)  # the journal's checks, and the callers a plain bypass left
    assert not modules & set(HEAVY), modules & set(HEAVY)
    # reading a journal needs neither the planner nor the yaml model nor torchgen's runner (~100 ms of imports)
    assert not modules & {"yaml", "ruamel.yaml", "codemod.plan.plan", "codemod.capture.codegen"}


def test_every_command_listed_is_the_command_of_that_name() -> None:
    """main.COMMANDS names each command by its module (imported when it runs): each is a command of cli/commands/
    whose name is the one it is listed under."""
    for name, lazy in COMMANDS.items():
        command = lazy.load()
        assert lazy.target.startswith("codemod.cli.commands.") and isinstance(command, click.Command) and command.name == name
