"""Caller edits: the `at::cpu::` and `at::redispatch::` functions of the op disappear.

`at::cpu::mul(a, b)` becomes `at::mul(a, b)`, `at::redispatch::mul(ks, a, b)`
becomes `at::mul(a, b)` (the key set is dropped: the bypass has no dispatcher
to redispatch into), and a method-only name such as `at::cpu::mul_(a, b)`
becomes `a.mul_(b)`. What is not a plain call is reported with file:line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from codemod.model import cpp_syntax
from codemod.capture.capture import Capture
from codemod.model.edits import Edit
from codemod.plan.cpp import SourceFile
from codemod.model.tree import TEMPLATES, Tree

CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".h", ".hpp", ".cu", ".cuh")
SKIPPED_DIRS = {".git", ".codemod", "build", "third_party", "node_modules", "__pycache__"}
_SIMPLE_RECEIVER = re.compile(r"^[A-Za-z_][\w.]*(?:->\w+)*$")


@dataclass(frozen=True)
class Leftover:
    """A reference the tool did not rewrite."""

    path: str
    line: int  # 1-based
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text.strip()} ({self.why})"


def caller_edits(tree: Tree, capture: Capture) -> tuple[list[Edit], list[Leftover]]:
    functions = {f.name for f in capture.functions}
    methods = {m.name for m in capture.methods}
    gone = {"cpu": set(capture.cpu_functions), "redispatch": set(capture.redispatch_functions)}
    names = "|".join(sorted({re.escape(n) for ns in gone.values() for n in ns}))
    reference = re.compile(rf"\b(cpu|redispatch)::({names})\b")
    structs = {s.name for s in (*capture.meta_structs, *capture.native_structs)} | set(capture.other_native_structs)
    struct_reference = re.compile(rf"\b({'|'.join(sorted(structs))})\b") if structs else None
    edits: list[Edit] = []
    leftovers: list[Leftover] = []
    for rel in _candidate_files(tree, reference, struct_reference):
        source = SourceFile.read(tree, rel)
        rewritten: list[tuple[int, int]] = []
        for node in cpp_syntax.walk(source.src.root):
            if node.type != "call_expression":
                continue
            match = reference.fullmatch(_callee(source, node) or "")
            if match is None or match.group(2) not in gone[match.group(1)]:
                continue
            replacement = _rewrite(source, node, match.group(1), match.group(2), functions, methods)
            if replacement is None:
                continue
            why = f"{match.group(1)}::{match.group(2)} is gone after the bypass"
            edits.append(Edit(rel, node.start_byte, node.end_byte, replacement, why))
            rewritten.append((node.start_byte, node.end_byte))
        leftovers.extend(_leftovers(source, reference, rewritten, "not a call the tool can rewrite; edit it by hand"))
        if struct_reference is not None and not rel.startswith("aten/src/ATen/native/"):
            leftovers.extend(_leftovers(source, struct_reference, [], "uses a structured class the bypass no longer generates"))
    return edits, leftovers


def _candidate_files(tree: Tree, *patterns: re.Pattern[str] | None) -> list[str]:
    """Files that mention a name at all (a text scan), so only those are parsed."""
    found = []
    templates = tree.path(TEMPLATES)
    for directory, subdirs, files in os.walk(tree.root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and os.path.join(directory, d) != str(templates))
        for name in sorted(files):
            if not name.endswith(CPP_SUFFIXES):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8", errors="replace") as handle:
                content = handle.read()
            if any(p is not None and p.search(content) for p in patterns):
                found.append(os.path.relpath(path, tree.root).replace(os.sep, "/"))
    return found


def _callee(source: SourceFile, call) -> str | None:
    function = call.child_by_field_name("function")
    if function is None or function.type != "qualified_identifier":
        return None
    callee = re.sub(r"\s+", "", source.src.text(function)).removeprefix("::").removeprefix("at::")
    return callee


def _rewrite(source: SourceFile, call, namespace: str, name: str, functions: set[str], methods: set[str]) -> str | None:
    args = [source.src.text(a) for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
    if namespace == "redispatch":
        args = args[1:]  # the DispatchKeySet
    if name in functions:
        return f"at::{name}({', '.join(args)})"
    if name in methods and args:
        receiver = args[0] if _SIMPLE_RECEIVER.match(args[0]) else f"({args[0]})"
        return f"{receiver}.{name}({', '.join(args[1:])})"
    return None


def _leftovers(source: SourceFile, pattern: re.Pattern[str], covered: list[tuple[int, int]], why: str) -> list[Leftover]:
    data = source.src.data.decode(errors="replace")
    comments = [(n.start_byte, n.end_byte) for n in cpp_syntax.walk(source.src.root) if n.type == "comment"]
    found = []
    for match in pattern.finditer(data):
        offset = len(data[: match.start()].encode())
        if any(start <= offset < end for start, end in (*covered, *comments)):
            continue
        line = data.count("\n", 0, match.start())
        found.append(Leftover(source.rel, line + 1, data.splitlines()[line], why))
    return found
