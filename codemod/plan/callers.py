"""Caller edits: the `at::cpu::` and `at::redispatch::` functions of the op disappear.

`at::cpu::mul(a, b)` becomes `at::mul(a, b)`, `at::redispatch::mul(ks, a, b)`
becomes `at::mul(a, b)` (the key set is dropped: the bypass has no dispatcher
to redispatch into), and a method-only name such as `at::cpu::mul_(a, b)`
becomes `a.mul_(b)`. Only the callee, the key set and the receiver's comma are
edited, so comments and line breaks in the argument list stay, and nested calls
are rewritten independently.

A caller may spell the namespace another way: through an alias (`namespace acpu
= at::cpu;`, rewritten like the namespace itself, as is `using at::cpu::mul;`),
a using-directive, a macro that pastes the name, or code inside `namespace
at::cpu`. Candidates are the files that name a removed function and name one of
the two namespaces themselves or in a header of the tree they include. In each,
the parser resolves every mention: rewritten, listed for a human (file:line), or
listed as judged by the compile check (what the parser cannot resolve). Every
file with a reference of any kind is compiled after the bypass (`reaching`).
Calls through `at::_ops::OVERLOAD::call/redispatch` still compile but reach
another kernel after the bypass: they are listed with file:line too.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property

from tree_sitter import Node

from codemod.capture.capture import Capture
from codemod.model import cpp_syntax
from codemod.model.edits import Edit
from codemod.model.tree import TEMPLATES, Tree
from codemod.plan.cpp import SourceFile

CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".h", ".hpp", ".cu", ".cuh")
SKIPPED_DIRS = {".git", ".codemod", "build", "third_party", "node_modules", "__pycache__"}
NAMESPACES = ("cpu", "redispatch")  # of at::, whose functions of the op disappear
_SIMPLE_RECEIVER = re.compile(r"^[A-Za-z_][\w.]*(?:->\w+)*$")
# Comments and string literals, blanked before any text scan (a name in them reaches nothing).
_NOT_CODE = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.S)
_INCLUDE = re.compile(r"""^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]""", re.M)
_ALIAS = re.compile(r"\bnamespace\s+(\w+)\s*=\s*(?:::\s*)?at\s*::\s*(cpu|redispatch)\s*;")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_DECLARATORS = ("function_declarator", "init_declarator", "parameter_declaration", "declaration", "field_declaration")


@dataclass(frozen=True)
class Leftover:
    """A reference the tool did not rewrite."""

    path: str
    line: int  # 1-based
    text: str
    why: str
    needs_edit: bool = True  # False: it still compiles after the bypass, and WHY says what it reaches then
    judged_by_compile: bool = False  # the parser cannot tell; the compile check after the bypass decides

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text.strip()} ({self.why})"


@dataclass(frozen=True)
class Callers:
    edits: list[Edit]
    leftovers: list[Leftover]
    rewritten: list[Leftover]  # each reference the edits rewrite, where it was
    reaching: list[str]  # every file with a reference of any kind: compiled after the bypass


@dataclass
class _Context:
    """How a file can name the two namespaces: itself and through the tree's headers it includes."""

    names_namespace: bool = False  # `cpu::`, `::redispatch`, `namespace cpu` or an alias: the namespace is reachable
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> "cpu" / "redispatch"
    using_namespace: set[str] = field(default_factory=set)  # namespaces of a using-directive
    using_names: dict[str, str] = field(default_factory=dict)  # removed name -> namespace of its using-declaration
    macros: dict[str, str] = field(default_factory=dict)  # macro -> the namespace its body names

    def merge(self, other: _Context) -> None:
        self.names_namespace |= other.names_namespace
        self.aliases.update(other.aliases)
        self.using_namespace |= other.using_namespace
        self.using_names.update(other.using_names)
        self.macros.update(other.macros)


class _Scan:
    """The tree's C++ files, read once each: their code (comments and strings blanked) and contexts."""

    def __init__(self, tree: Tree, names: set[str]) -> None:
        self.tree, self.names = tree, names
        self._text: dict[str, str] = {}
        self._code: dict[str, str] = {}
        self._own: dict[str, _Context] = {}

    def known(self, rel: str, text: str) -> None:
        self._text[rel] = text

    def text(self, rel: str) -> str:
        if rel not in self._text:
            self._text[rel] = self.tree.path(rel).read_text(encoding="utf-8", errors="replace")
        return self._text[rel]

    def code(self, rel: str) -> str:
        if rel not in self._code:
            self._code[rel] = _NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), self.text(rel))
        return self._code[rel]

    def context(self, rel: str) -> _Context:
        """REL's own context merged with that of every tree header it includes, transitively."""
        merged, seen, pending = _Context(), set(), [rel]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            merged.merge(self._own_context(current))
            pending += self._included(current)
        return merged

    def _own_context(self, rel: str) -> _Context:
        if rel not in self._own:
            code = self.code(rel)
            aliases = dict(_ALIAS.findall(code))
            spelled = "|".join([*NAMESPACES, *map(re.escape, aliases)])
            names = "|".join(sorted(map(re.escape, self.names)))
            macros = {name: namespace for name, body in _DEFINE.findall(code) if (namespace := _namespace_named(body, aliases))}
            self._own[rel] = _Context(
                names_namespace=_namespace_named(code, aliases) is not None,
                aliases=aliases,
                using_namespace={aliases.get(n, n) for n in re.findall(rf"\busing\s+namespace\s+(?:::\s*)?(?:at\s*::\s*)?({spelled})\b", code)},
                using_names={name: aliases.get(n, n) for n, name in re.findall(rf"\busing\s+(?:::\s*)?(?:at\s*::\s*)?({spelled})\s*::\s*({names})\b", code)},
                macros=macros,
            )
        return self._own[rel]

    def _included(self, rel: str) -> list[str]:
        """The tree's own headers REL includes, as the compile check's include path finds them."""
        found = []
        here = os.path.dirname(rel)
        for kind, name in _INCLUDE.findall(self.text(rel)):
            for directory in ([here] if kind == '"' else []) + ["aten/src", ""]:
                candidate = os.path.normpath(os.path.join(directory, name)).replace(os.sep, "/")
                if not candidate.startswith("..") and self.tree.path(candidate).is_file():
                    found.append(candidate)
                    break
        return found


def _namespace_named(code: str, aliases: dict[str, str]) -> str | None:
    """The namespace ("cpu" or "redispatch") CODE names: `cpu::`, `::cpu`, `namespace cpu`, or an alias of it."""
    for namespace in NAMESPACES:
        if re.search(rf"\b{namespace}\s*::|::\s*{namespace}\b|\bnamespace\s+{namespace}\b", code):
            return namespace
    for alias, namespace in aliases.items():
        if re.search(rf"\b{re.escape(alias)}\s*::", code):
            return namespace
    return None


def caller_edits(tree: Tree, capture: Capture) -> Callers:
    gone = {"cpu": set(capture.cpu_functions), "redispatch": set(capture.redispatch_functions)}
    removed = gone["cpu"] | gone["redispatch"]
    structs = {s.name for s in (*capture.meta_structs, *capture.native_structs)} | set(capture.other_native_structs)
    struct_reference = re.compile(rf"\b({'|'.join(sorted(structs))})\b") if structs else None
    operator_structs = {overload.replace(".", "_"): overload for overload in capture.overloads}
    dispatched = re.compile(rf"\b_ops::({'|'.join(sorted(operator_structs))})::(call|redispatch)\b")
    scan = _Scan(tree, removed)
    found = Callers([], [], [], [])
    mentioned = _word(removed)
    for rel in _files_mentioning(tree, scan, [p for p in (mentioned, struct_reference, dispatched) if p is not None]):
        before = len(found.edits) + len(found.leftovers) + len(found.rewritten)
        if mentioned.search(scan.code(rel)):
            context = scan.context(rel)
            if context.names_namespace:
                _FileCallers(SourceFile.read(tree, rel), context, gone, capture).resolve(found)
        source = None
        if struct_reference is not None and not rel.startswith("aten/src/ATen/native/"):
            source = SourceFile.read(tree, rel)
            for line, _ in _references(scan.code(rel), struct_reference):
                found.leftovers.append(Leftover(rel, line + 1, _line(source, line), "uses a structured class the bypass no longer generates"))
        reaches = len(found.edits) + len(found.leftovers) + len(found.rewritten) > before
        for line, match in _references(scan.code(rel), dispatched):
            source = source or SourceFile.read(tree, rel)
            overload = operator_structs[match.group(1)]
            kernel = capture.native_kernels.get(overload, "the hand-written at::native:: function")
            why = (
                f"still compiles: after the bypass the dispatcher sends {overload} to at::native::{kernel} "
                "(CompositeImplicitAutograd) whatever the key set, so no autograd formula and no per-backend kernel"
            )
            found.leftovers.append(Leftover(rel, line + 1, _line(source, line), why, needs_edit=False))
        if reaches:
            found.reaching.append(rel)
    return found


def still_reaching(tree: Tree, capture: Capture) -> list[Leftover]:
    """What in TREE, as it is now, still names a function the bypass of CAPTURE's op removed: the calls a bypass
    would rewrite, the references it lists for a human, and (judged_by_compile) those only g++ can judge."""
    found = caller_edits(tree, capture)
    return sorted((*found.rewritten, *(x for x in found.leftovers if x.needs_edit)), key=lambda x: (x.path, x.line))


class _FileCallers:
    """One candidate file: each mention of a removed name resolved by the parser."""

    def __init__(self, source: SourceFile, context: _Context, gone: dict[str, set[str]], capture: Capture) -> None:
        self.source, self.context, self.gone = source, context, gone
        self.functions = {f.name for f in capture.functions}
        self.methods = {m.name for m in capture.methods}
        self.removed = gone["cpu"] | gone["redispatch"]

    @cached_property
    def lines(self) -> list[str]:
        return self.source.src.data.decode(errors="replace").splitlines()

    def resolve(self, found: Callers) -> None:
        for node in cpp_syntax.walk(self.source.src.root):
            if node.type == "preproc_arg":
                self._macro_body(node, found)
            elif node.type in ("identifier", "field_identifier", "type_identifier") and cpp_syntax.text(node) in self.removed:
                self._mention(node, found)

    def _mention(self, node: Node, found: Callers) -> None:
        name = cpp_syntax.text(node)
        named = node.parent if node.parent is not None and node.parent.type == "template_function" else node
        if named.parent is not None and named.parent.type == "qualified_identifier" and named.parent.child_by_field_name("name") == named:
            self._qualified(_outermost_qualified(named.parent), name, found)
        elif node.type == "field_identifier" or _declares(node):
            return  # a member (t.mul(...)), or a declaration of something of that name
        else:
            how = self._unqualified_reach(node, name)
            if how is not None:
                self._leftover(node, f"{how}; the tool does not rewrite it: the compile check after the bypass judges it", found, judged=True)

    def _qualified(self, qualified: Node, name: str, found: Callers) -> None:
        scope = re.sub(r"\s+", "", self.source.src.text(qualified)).removeprefix("::").rsplit("::", 1)[0]
        namespace = self._namespace_of(scope)
        if namespace is None:
            maybe = self.context.macros.get(scope) or next((n for n in NAMESPACES if scope.endswith(f"::{n}")), None)
            if maybe is not None:
                why = f"{scope}:: may name at::{maybe}; the tool does not rewrite it: the compile check after the bypass judges it"
                self._leftover(qualified, why, found, judged=True)
            return
        if name not in self.gone[namespace]:
            return
        parent = qualified.parent
        why = f"{namespace}::{name} is gone after the bypass"
        if parent.type == "call_expression" and parent.child_by_field_name("function") == qualified:
            replacements = _rewrite(self.source, parent, namespace, name, self.functions, self.methods)
        elif parent.type == "using_declaration" and namespace == "cpu" and name in self.functions:
            replacements = [(qualified.start_byte, qualified.end_byte, f"at::{name}")]
        else:
            replacements = None
        if replacements is None:
            self._leftover(qualified, "not a call the tool can rewrite; edit it by hand", found)
            return
        found.edits.extend(Edit(self.source.rel, start, end, text, why) for start, end, text in replacements)
        found.rewritten.append(self._at(qualified, f"at::{namespace}::{name}, which the bypass removed"))

    def _namespace_of(self, scope: str) -> str | None:
        """"cpu" or "redispatch" when SCOPE names at::cpu / at::redispatch (itself, or an alias of it)."""
        scope = scope.removeprefix("at::")
        return scope if scope in NAMESPACES else self.context.aliases.get(scope)

    def _unqualified_reach(self, node: Node, name: str) -> str | None:
        """How an unqualified NAME here may reach a removed function, or None when it cannot."""
        enclosing = cpp_syntax.namespaces(node)
        for namespace in NAMESPACES:
            if enclosing[:2] == ("at", namespace) and name in self.gone[namespace]:
                return f"inside namespace at::{namespace}"
        brought_from = self.context.using_names.get(name)
        if brought_from is not None and not (brought_from == "cpu" and name in self.functions):  # that declaration is rewritten
            return f"brought in by `using at::{brought_from}::{name};`"
        for namespace in self.context.using_namespace:
            if name in self.gone[namespace]:
                return f"under `using namespace at::{namespace};`"
        macro = _enclosing_macro_call(node, self.context.macros)
        if macro is not None:
            return f"an argument of {macro}(...), a macro that names at::{self.context.macros[macro]}::"
        return None

    def _macro_body(self, node: Node, found: Callers) -> None:
        """A removed function spelled out in a macro's body: the tool does not rewrite macros."""
        spelled = "|".join([*NAMESPACES, *map(re.escape, self.context.aliases)])
        names = "|".join(sorted(map(re.escape, self.removed)))
        body = self.source.src.text(node)
        for match in re.finditer(rf"\b({spelled})\s*::\s*({names})\b", body):
            namespace = self._namespace_of(match.group(1))
            if match.group(2) in self.gone[namespace]:
                line = node.start_point[0] + body.count("\n", 0, match.start())
                found.leftovers.append(Leftover(self.source.rel, line + 1, self.lines[line], "in a macro's body; the tool does not rewrite macros: edit it by hand"))

    def _leftover(self, node: Node, why: str, found: Callers, judged: bool = False) -> None:
        found.leftovers.append(self._at(node, why, judged))

    def _at(self, node: Node, why: str, judged: bool = False) -> Leftover:
        line = node.start_point[0]
        return Leftover(self.source.rel, line + 1, self.lines[line], why, judged_by_compile=judged)


def _outermost_qualified(node: Node) -> Node:
    while node.parent is not None and node.parent.type == "qualified_identifier" and node.parent.child_by_field_name("name") == node:
        node = node.parent
    return node


def _declares(node: Node) -> bool:
    """NODE names what a declaration declares (a function, a variable, a parameter)."""
    parent = node.parent
    if parent is None:
        return False
    return parent.type in ("reference_declarator", "pointer_declarator") or (
        parent.type in _DECLARATORS and parent.child_by_field_name("declarator") == node
    )


def _enclosing_macro_call(node: Node, macros: dict[str, str]) -> str | None:
    """The macro of MACROS whose invocation (parsed as a call) has NODE among its arguments."""
    current = node.parent
    while current is not None:
        if current.type == "call_expression":
            function = current.child_by_field_name("function")
            if function is not None and function.type == "identifier" and cpp_syntax.text(function) in macros:
                return cpp_syntax.text(function)
        current = current.parent
    return None


def _word(names: set[str]) -> re.Pattern[str]:
    return re.compile(rf"\b({'|'.join(sorted(map(re.escape, names)))})\b")


def _files_mentioning(tree: Tree, scan: _Scan, patterns: list[re.Pattern[str]]) -> list[str]:
    """C++ files of the tree whose code (not comments or strings) matches a pattern; the raw text is searched
    first, so only files that mention a name at all are kept and blanked."""
    found = []
    templates = tree.path(TEMPLATES)
    for directory, subdirs, files in os.walk(tree.root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and os.path.join(directory, d) != str(templates))
        for name in sorted(files):
            if not name.endswith(CPP_SUFFIXES):
                continue
            rel = os.path.relpath(os.path.join(directory, name), tree.root).replace(os.sep, "/")
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            if any(p.search(text) for p in patterns):
                scan.known(rel, text)
                if any(p.search(scan.code(rel)) for p in patterns):
                    found.append(rel)
    return found


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


def _references(code: str, pattern: re.Pattern[str]) -> list[tuple[int, re.Match[str]]]:
    """The (0-based line, match) of each PATTERN match in CODE (comments and strings blanked)."""
    return [(code.count("\n", 0, match.start()), match) for match in pattern.finditer(code)]


def _line(source: SourceFile, line: int) -> str:
    return source.src.data.decode(errors="replace").splitlines()[line]
