"""Caller edits: the `at::cpu::` and `at::redispatch::` functions of the op disappear.

`at::cpu::mul(a, b)` becomes `at::mul(a, b)`, `at::redispatch::mul(ks, a, b)`
becomes `at::mul(a, b)` (the key set is dropped: the bypass has no dispatcher
to redispatch into), and a method-only name such as `at::cpu::mul_(a, b)`
becomes `a.mul_(b)`. Only the callee, the key set and the receiver's comma are
edited, so comments and line breaks in the argument list stay, and nested calls
are rewritten independently. What is not a plain call is reported with
file:line, and so are calls through `at::_ops::OVERLOAD::call/redispatch`,
which still compile but reach another kernel after the bypass.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from tree_sitter import Node

from codemod.capture.capture import Capture
from codemod.model import cpp_syntax
from codemod.model.edits import Edit
from codemod.model.tree import TEMPLATES, Tree
from codemod.plan.cpp import SourceFile

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
    needs_edit: bool = True  # False: it still compiles after the bypass, and WHY says what it reaches then

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
    operator_structs = {overload.replace(".", "_"): overload for overload in capture.overloads}
    dispatched = re.compile(rf"\b_ops::({'|'.join(sorted(operator_structs))})::(call|redispatch)\b")
    edits: list[Edit] = []
    leftovers: list[Leftover] = []
    for rel in _candidate_files(tree, reference, struct_reference, dispatched):
        source = SourceFile.read(tree, rel)
        rewritten: list[tuple[int, int]] = []  # the callees rewritten
        for node in cpp_syntax.walk(source.src.root):
            if node.type != "call_expression":
                continue
            match = reference.fullmatch(_callee(source, node) or "")
            if match is None or match.group(2) not in gone[match.group(1)]:
                continue
            why = f"{match.group(1)}::{match.group(2)} is gone after the bypass"
            replacements = _rewrite(source, node, match.group(1), match.group(2), functions, methods)
            if replacements is None:
                continue
            edits.extend(Edit(rel, start, end, text, why) for start, end, text in replacements)
            callee = node.child_by_field_name("function")
            rewritten.append((callee.start_byte, callee.end_byte))
        for line, _ in _references(source, reference, rewritten):
            leftovers.append(Leftover(rel, line + 1, _line(source, line), "not a call the tool can rewrite; edit it by hand"))
        if struct_reference is not None and not rel.startswith("aten/src/ATen/native/"):
            for line, _ in _references(source, struct_reference, []):
                leftovers.append(Leftover(rel, line + 1, _line(source, line), "uses a structured class the bypass no longer generates"))
        for line, match in _references(source, dispatched, []):
            overload = operator_structs[match.group(1)]
            kernel = capture.native_kernels.get(overload, "the hand-written at::native:: function")
            why = (
                f"still compiles: after the bypass the dispatcher sends {overload} to at::native::{kernel} "
                "(CompositeImplicitAutograd) whatever the key set, so no autograd formula and no per-backend kernel"
            )
            leftovers.append(Leftover(rel, line + 1, _line(source, line), why, needs_edit=False))
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


def _rewrite(
    source: SourceFile, call: Node, namespace: str, name: str, functions: set[str], methods: set[str]
) -> list[tuple[int, int, str]] | None:
    """Byte spans of CALL to replace, none inside an argument (nested calls are rewritten on their own)."""
    function, arguments = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    args = [a for a in arguments.named_children if a.type != "comment"]
    replacements: list[tuple[int, int, str]] = []
    if namespace == "redispatch":
        if not args:
            return None
        replacements.append((args[0].start_byte, _after_comma(source, arguments, args[0]), ""))  # the DispatchKeySet
        args = args[1:]
    if name in functions:
        return [(function.start_byte, function.end_byte, f"at::{name}"), *replacements]
    if name not in methods or not args:
        return None
    receiver, has_more = args[0], len(args) > 1
    simple = _SIMPLE_RECEIVER.match(source.src.text(receiver)) is not None
    # at::cpu::mul_(a, b) -> a.mul_(b); a receiver that is an expression keeps the call's "(": (x + y).mul_(b)
    head_end = receiver.start_byte if simple else function.end_byte
    replacements = [(function.start_byte, head_end, ""), *(r for r in replacements if r[0] >= head_end)]
    close = ")" if not simple else ""
    if has_more:
        comma = _comma_after(arguments, receiver)
        replacements.append((comma.start_byte, _after_comma(source, arguments, receiver), f"{close}.{name}("))
    else:
        closing = arguments.children[-1]
        replacements.append((closing.start_byte, closing.end_byte, f"{close}.{name}()"))
    return replacements


def _comma_after(arguments: Node, argument: Node) -> Node:
    siblings = arguments.children
    return next(n for n in siblings[siblings.index(argument) + 1 :] if n.type == ",")


def _after_comma(source: SourceFile, arguments: Node, argument: Node) -> int:
    """Where ARGUMENT's comma and the spaces after it end (a line break after it stays)."""
    end = _comma_after(arguments, argument).end_byte
    while source.src.data[end : end + 1] in (b" ", b"\t"):
        end += 1
    return end


def _references(source: SourceFile, pattern: re.Pattern[str], covered: list[tuple[int, int]]) -> list[tuple[int, re.Match[str]]]:
    """The (0-based line, match) of each PATTERN match outside COVERED spans and comments."""
    data = source.src.data.decode(errors="replace")
    comments = [(n.start_byte, n.end_byte) for n in cpp_syntax.walk(source.src.root) if n.type == "comment"]
    found = []
    for match in pattern.finditer(data):
        offset = len(data[: match.start()].encode())
        if any(start <= offset < end for start, end in (*covered, *comments)):
            continue
        found.append((data.count("\n", 0, match.start()), match))
    return found


def _line(source: SourceFile, line: int) -> str:
    return source.src.data.decode(errors="replace").splitlines()[line]
