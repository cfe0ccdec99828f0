"""Every third-party module codemod, its tests, its benchmarks and docs/generate.py import is brought by `pip install -e ".[test]"`.

A package installed by hand on a developer's machine once hid a missing one (matplotlib): the README's test
command failed on a fresh machine. `.ci/run` proves the set-up in a fresh venv; this test names the missing
distribution at once, on any machine."""
from __future__ import annotations

import ast
import importlib.metadata
import re
import sys

import tomllib

from tests.conftest import REPO

SCANNED = ("codemod", "tests", "benchmarks", "docs")
# generate: docs/generate.py, which the docs test and a benchmark import; a benchmark may import a sibling script
OURS = {"codemod", "tests", "generate", *(path.stem for path in (REPO / "benchmarks").glob("*.py"))}


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-") for requirement in requirements}


def _imported_top_level_modules() -> dict[str, str]:
    """Top-level module -> the first file importing it (lazy imports inside functions included)."""
    found: dict[str, str] = {}
    for folder in SCANNED:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    return found


def test_every_third_party_import_is_a_declared_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = _requirement_names(project["dependencies"] + project["optional-dependencies"]["test"])
    providers = importlib.metadata.packages_distributions()
    third_party = {
        module: where for module, where in _imported_top_level_modules().items()
        if module not in OURS and module not in sys.stdlib_module_names
    }
    assert third_party, "the scan found no third-party import: it is not reading the sources"
    undeclared = {}
    for module, where in third_party.items():
        distributions = {name.lower().replace("_", "-") for name in providers.get(module, [])}
        if not distributions & declared:
            undeclared[module] = (where, sorted(distributions) or "not installed here")
    assert not undeclared, f"imported but not brought by `pip install -e '.[test]'` (module: first importer, distribution): {undeclared}"
