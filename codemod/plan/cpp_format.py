"""Lay out the C++ the bypass writes as PyTorch lays out its own, with the real clang-format.

Only the text inside our marker-fenced blocks is formatted, never a line of the user's file. The
style states what PyTorch's `.clang-format` asks for (our own statement of it, not a copy): two-space
indent, 80 columns, attached braces, `Type* p`, one argument or parameter per line once a call or
declaration wraps (after its open bracket), a short function on one line only when empty, at most one
empty line in a row, no indentation inside namespaces. Includes keep the order we planned them in.
The clang-format version is pinned (pyproject), so the same plan is formatted to the same bytes.
"""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from codemod.model.cache import installed_version
from codemod.model.errors import BadInput

COLUMNS = 80
PYTORCH_STYLE = {
    "Language": "Cpp",
    "Standard": "c++17",
    "UseTab": "Never",
    "IndentWidth": 2,
    "ContinuationIndentWidth": 4,
    "AccessModifierOffset": -1,
    "IndentCaseLabels": "true",
    "NamespaceIndentation": "None",
    "CompactNamespaces": "false",
    "BreakBeforeBraces": "Attach",
    "AlignAfterOpenBracket": "AlwaysBreak",
    "AlignOperands": "false",
    "AlignTrailingComments": "false",
    "AllowAllParametersOfDeclarationOnNextLine": "false",
    "AllowShortFunctionsOnASingleLine": "Empty",
    "AllowShortIfStatementsOnASingleLine": "false",
    "AllowShortLoopsOnASingleLine": "false",
    "AllowShortBlocksOnASingleLine": "false",
    "AlwaysBreakTemplateDeclarations": "true",
    "BinPackArguments": "false",
    "BinPackParameters": "false",
    "BreakStringLiterals": "false",
    "Cpp11BracedListStyle": "true",
    "DerivePointerAlignment": "false",
    "PointerAlignment": "Left",
    "KeepEmptyLinesAtTheStartOfBlocks": "false",
    "MaxEmptyLinesToKeep": 1,
    "PenaltyReturnTypeOnItsOwnLine": 2000000,
    "PenaltyBreakBeforeFirstCallParameter": 1,
    "SpaceBeforeParens": "ControlStatements",
    "SpacesBeforeTrailingComments": 1,
    "ReflowComments": "true",
    "SortIncludes": "false",  # ours: the planned include order is kept
    "FixNamespaceComments": "false",  # the carried-over namespaces are closed with comments of their own
}


def clang_format() -> Path:
    """The binary the pinned `clang-format` package ships (not whichever clang-format is on PATH)."""
    spec = importlib.util.find_spec("clang_format")
    binary = Path(spec.origin).parent / "data" / "bin" / "clang-format" if spec and spec.origin else None
    if binary is None or not binary.is_file():
        raise BadInput("clang-format is not installed in this Python: `pip install -e .` installs it (PyPI package clang-format)")
    return binary


def version() -> str:
    """The installed clang-format's version: what the layout of the text it formats depends on."""
    clang_format()  # installed, or the error that says how to install it
    return installed_version("clang-format")


def style(columns: int = COLUMNS) -> str:
    return "{" + ", ".join(f"{key}: {value}" for key, value in {**PYTORCH_STYLE, "ColumnLimit": columns}.items()) + "}"


def format_block(text: str, indent: str = "") -> str:
    """TEXT (whole declarations or definitions) formatted in PyTorch's style, each line then indented by INDENT
    (a block inside a class body), with no trailing newline."""
    columns = COLUMNS - len(indent)
    result = subprocess.run(
        [str(clang_format()), f"--style={style(columns)}", "--assume-filename=codemod_block.cpp"],
        input=text, capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise BadInput(f"clang-format could not format the text the bypass writes ({result.stderr.strip()}); this is a bug, please report it")
    return "\n".join(indent + line if line else line for line in result.stdout.rstrip("\n").splitlines())
