"""Caller edits: the `at::cpu::` and `at::redispatch::` functions of the op disappear.

`at::cpu::mul(a, b)` becomes `at::mul(a, b)`, `at::redispatch::mul(ks, a, b)`
becomes `at::mul(a, b)` (the key set is dropped: the bypass has no dispatcher
to redispatch into), and a method-only name such as `at::cpu::mul_(a, b)`
becomes `a.mul_(b)`. Only the callee, the key set and the receiver's comma are
edited, so comments and line breaks in the argument list stay, and nested calls
are rewritten independently.

A caller may spell the namespace another way. The rewrite takes what it can
edit: an alias (`namespace acpu = at::cpu;`) like the namespace itself, and
`using at::cpu::mul;`; what it cannot edit but is spelled out (`&at::cpu::mul`,
a macro's body) is listed for a human. Then one place decides about everything
else, the net (`_Net`): every C/C++ file of the tree, by any suffix a compiler
reads or included by one, where a removed name could be formed (the name, its
pieces as a macro's arguments, a macro of the tree that may form it) is read as
the bypass leaves it, with its own macros and those of the tree's headers it
includes expanded; each place left that may name a removed function (after a
macro's expansion, under a using-directive, inside `namespace at::cpu`, a scope
or pieces a macro the tool cannot see makes) is a leftover already listed at
its line, or is listed there as judged by the compile check. Every file with a
reference of any kind is compiled after the bypass (`reaching`), a header or an
`.inl` through a source of the tree that includes it.
Calls through `at::_ops::OVERLOAD::call/redispatch` still compile but reach
another kernel after the bypass: they are listed with file:line too. And an
unqualified call of one of the op's functions (`mul(a, b)`) that sees
at::native's names (inside `namespace at::native`, under `using namespace
at::native;` or `using at::native::mul;`), which reached `at::mul`, becomes
`at::mul(a, b)`: after the bypass torchgen declares `at::native::mul` too, and
the call would be ambiguous.
"""
from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from tree_sitter import Node

from codemod.capture.capture import Capture
from codemod.model import cpp_macros, cpp_syntax, paths
from codemod.model.edits import Edit, apply_edits, line_starts
from codemod.model.tree import TEMPLATES, Tree
from codemod.plan.cpp import SourceFile

SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")  # compiled on their own
CUDA_SUFFIXES = (".cu", ".cuh")
# Every suffix a C or C++ compiler reads; a file of another name is read too when one of these includes it.
CPP_SUFFIXES = (*SOURCE_SUFFIXES, ".c", *CUDA_SUFFIXES, ".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp", ".tcc")
INCLUDE_DIRS = ("aten/src", "", "torch/csrc/api/include")  # where the compile check finds the tree's <headers>
SKIPPED_DIRS = {".git", ".codemod", "build", "third_party", "node_modules", "__pycache__"}
NAMESPACES = ("cpu", "redispatch")  # of at::, whose functions of the op disappear
JUDGED = "the tool does not rewrite it: the compile check after the bypass judges it"
_SIMPLE_RECEIVER = re.compile(r"^[A-Za-z_][\w.]*(?:->\w+)*$")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# Comments and string literals, blanked before any text scan (a name in them reaches nothing).
_NOT_CODE = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'""", re.S)
_INCLUDE = re.compile(r"""^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]""", re.M)
_ALIAS = re.compile(r"\bnamespace\s+(\w+)\s*=\s*(?:::\s*)?at\s*::\s*(\w+)\s*;")  # alias, then the namespace of at::
_DEFINE = re.compile(r"^[ \t]*(#[ \t]*define[ \t]+\w+(?:[^\n]*\\\n)*[^\n]*)", re.M)


@dataclass(frozen=True)
class Leftover:
    """A reference the tool did not rewrite."""

    path: str
    line: int  # 1-based
    text: str
    why: str
    needs_edit: bool = True  # False: it still compiles after the bypass, and WHY says what it reaches then
    judged_by_compile: bool = False  # the tool cannot tell; the compile check after the bypass decides

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text.strip()} ({self.why})"


@dataclass(frozen=True)
class Callers:
    edits: list[Edit]
    leftovers: list[Leftover]
    rewritten: list[Leftover]  # each reference the edits rewrite, where it was
    reaching: list[str]  # every file with a reference of any kind, and a source including each header of them: compiled


@dataclass
class _Context:
    """How a file can name the two namespaces: itself and through the files it may see (`_Scan.visible`)."""

    names_namespace: bool = False  # `cpu::`, `::redispatch`, `namespace cpu` or an alias: the namespace is reachable
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> "cpu" / "redispatch"
    using_namespace: set[str] = field(default_factory=set)  # what a using-directive names: a namespace of at::, an alias
    using_names: dict[str, str] = field(default_factory=dict)  # removed name -> the scope its using-declaration names

    def merge(self, other: _Context) -> None:
        self.names_namespace |= other.names_namespace
        self.aliases.update(other.aliases)
        self.using_namespace |= other.using_namespace
        self.using_names.update(other.using_names)

    def namespace(self, scope: str) -> str | None:
        """"cpu" or "redispatch" when SCOPE (a namespace of at::, or an alias) names at::cpu / at::redispatch."""
        scope = self.aliases.get(scope, scope)
        return scope if scope in NAMESPACES else None


class _Files:
    """The tree's C and C++ files, each read once: by any suffix in CPP_SUFFIXES, and any file one of them includes.
    The includes and macro definitions of each are kept, and the text of those KEEP takes."""

    def __init__(self, tree: Tree, keep: Callable[[str], object]) -> None:
        self.tree = tree
        self.every: set[str] = set()  # every file walked (any name), to find what an include names
        self.includes: dict[str, list[tuple[str, str]]] = {}  # of each C/C++ file: (`<` or `"`, the name)
        self.macros: dict[str, list[tuple[str, cpp_macros.Macro]]] = defaultdict(list)  # name -> (file, definition)
        self.kept: dict[str, str] = {}
        pending = []
        templates = tree.path(TEMPLATES)
        for directory, subdirs, files in os.walk(tree.root):
            subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and os.path.join(directory, d) != str(templates))
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(directory, name), tree.root).replace(os.sep, "/")
                self.every.add(rel)
                if name.endswith(CPP_SUFFIXES) and paths.walked_file(tree.path(rel)):
                    pending.append(rel)
        while pending:
            for rel in pending:
                text = self.text(rel)
                self.includes[rel] = _INCLUDE.findall(text)
                for directive in _DEFINE.findall(text):
                    defined = cpp_macros.macro(directive)
                    if defined is not None:
                        self.macros[defined.name].append((rel, defined))
                if keep(text):
                    self.kept[rel] = text
            pending = sorted({header for rel in pending for header in self.included(rel) if header not in self.includes})
        self.cpp = sorted(self.includes)

    def text(self, rel: str) -> str:
        if rel in self.kept:
            return self.kept[rel]
        return self.tree.path(rel).read_text(encoding="utf-8", errors="replace")

    def included(self, rel: str) -> list[str]:
        """The tree's own files REL includes, as the compile check's include path finds them."""
        found = []
        here = os.path.dirname(rel)
        for kind, name in self.includes[rel]:
            for directory in ([here] if kind == '"' else []) + list(INCLUDE_DIRS):
                candidate = os.path.normpath(os.path.join(directory, name)).replace(os.sep, "/")
                if candidate in self.every:
                    found.append(candidate)
                    break
        return found

    @cached_property
    def included_by(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = defaultdict(set)
        for rel in self.cpp:
            for header in self.included(rel):
                found[header].add(rel)
        return found


class _Scan:
    """The tree's C/C++ files as they are, or with PLANNED's text for some (as the bypass leaves them): their code
    (comments and strings blanked), and what each can name through the tree's headers it includes."""

    def __init__(self, files: _Files, names: set[str], planned: dict[str, str] | None = None) -> None:
        self.files, self.names = files, names
        self._text = dict(planned or {})
        self._code: dict[str, str] = {}
        self._own: dict[str, _Context] = {}
        self._macros: dict[str, dict[str, cpp_macros.Macro]] = {}
        self._closures: dict[str, list[str]] = {}

    def text(self, rel: str) -> str:
        if rel not in self._text:
            self._text[rel] = self.files.text(rel)
        return self._text[rel]

    def code(self, rel: str) -> str:
        if rel not in self._code:
            self._code[rel] = _blanked(self.text(rel))
        return self._code[rel]

    def closure(self, rel: str) -> list[str]:
        """REL, then every tree header it includes, transitively, in the order they are first included."""
        if rel not in self._closures:
            found: dict[str, None] = {}
            pending = [rel]
            while pending:
                current = pending.pop()
                if current not in found:
                    found[current] = None
                    pending += reversed(self.files.included(current))
            self._closures[rel] = list(found)
        return self._closures[rel]

    def visible(self, rel: str) -> list[str]:
        """The files whose declarations and macros REL may see, but REL: what each file including it (transitively)
        includes, as an .inl sees what its includer included first, then the tree's headers REL includes (last, so
        that their macros win)."""
        includers, level = set(), {rel}
        while level:
            level = {includer for header in level for includer in self.files.included_by.get(header, ())} - includers - {rel}
            includers |= level
        own = self.closure(rel)
        theirs = dict.fromkeys(header for includer in sorted(includers) for header in self.closure(includer))
        for header in own:
            theirs.pop(header, None)
        return [*theirs, *own[1:]]

    def context(self, rel: str) -> _Context:
        """REL's own context merged with that of every file it may see."""
        merged = _Context()
        for current in (rel, *self.visible(rel)):
            merged.merge(self._own_context(current))
        return merged

    def inherited_macros(self, rel: str) -> dict[str, cpp_macros.Macro]:
        """The macros the files REL may see define (as each one's end leaves them)."""
        merged: dict[str, cpp_macros.Macro] = {}
        for header in self.visible(rel):
            merged.update(self._defined(header))
        return merged

    def _defined(self, rel: str) -> dict[str, cpp_macros.Macro]:
        if rel not in self._macros:
            view = _live_view(self.text(rel).encode()) if "define" in self.code(rel) else None
            self._macros[rel] = view.macros_at(len(view.text)) if view is not None else {}
        return self._macros[rel]

    def _own_context(self, rel: str) -> _Context:
        if rel not in self._own:
            code = self.code(rel)
            aliases = {alias: namespace for alias, namespace in _ALIAS.findall(code) if namespace in NAMESPACES}
            names = "|".join(sorted(map(re.escape, self.names)))
            self._own[rel] = _Context(
                names_namespace=_namespace_named(code, aliases) is not None,
                aliases=aliases,
                using_namespace=set(re.findall(r"\busing\s+namespace\s+(?:::\s*)?(?:at\s*::\s*)?(\w+)\s*;", code)),
                using_names={name: n for n, name in re.findall(rf"\busing\s+(?:::\s*)?(?:at\s*::\s*)?(\w+)\s*::\s*({names})\s*;", code)},
            )
        return self._own[rel]


def _blanked(text: str) -> str:
    return _NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _live_view(data: bytes) -> cpp_macros.LiveView:
    return cpp_macros.live_view(cpp_syntax.parse(data))


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
    mentioned = _word(removed)
    # The op's at:: functions whose name torchgen also declares in at::native after the bypass (the kernel's native API)
    declared = set(capture.native_kernels.values()) & {f.name for f in capture.functions}
    called_unqualified = _unqualified_call(declared) if declared else None
    patterns = [p for p in (mentioned, struct_reference, dispatched, called_unqualified) if p is not None]
    piece_words = _piece_words(removed)
    files = _Files(tree, lambda text: any(p.search(text) for p in patterns) or _pasted(set(piece_words.findall(text)), removed))
    scan = _Scan(files, removed)
    found = Callers([], [], [], [])
    for rel in files.cpp:
        if rel not in files.kept or not any(p.search(scan.code(rel)) for p in patterns):
            continue
        if mentioned.search(scan.code(rel)):
            context = scan.context(rel)
            if context.names_namespace:
                _FileCallers(SourceFile.read(tree, rel), context, gone, capture).resolve(found)
        source = None
        if called_unqualified is not None and called_unqualified.search(scan.code(rel)):
            source = SourceFile.read(tree, rel)
            aliases = {alias for seen in (rel, *scan.visible(rel)) for alias, namespace in _ALIAS.findall(scan.code(seen)) if namespace == "native"}
            _unqualified_seeing_native(source, declared, found, aliases)
        if struct_reference is not None and not rel.startswith("aten/src/ATen/native/"):
            source = source or SourceFile.read(tree, rel)
            for line, _ in _references(scan.code(rel), struct_reference):
                found.leftovers.append(Leftover(rel, line + 1, _line(source, line), "uses a structured class the bypass no longer generates"))
        for line, match in _references(scan.code(rel), dispatched):
            source = source or SourceFile.read(tree, rel)
            overload = operator_structs[match.group(1)]
            kernel = capture.native_kernels.get(overload, "the hand-written at::native:: function")
            why = (
                f"still compiles: after the bypass the dispatcher sends {overload} to at::native::{kernel} "
                "(CompositeImplicitAutograd) whatever the key set, so no autograd formula and no per-backend kernel"
            )
            found.leftovers.append(Leftover(rel, line + 1, _line(source, line), why, needs_edit=False))
    _Net(files, gone, found).judge()
    reached = {e.path for e in found.edits} | {x.path for x in (*found.rewritten, *found.leftovers) if x.needs_edit}
    found.reaching.extend(sorted(reached | _sources_including(files, reached)))
    return found


def still_reaching(tree: Tree, capture: Capture) -> list[Leftover]:
    """What in TREE, as it is now, still names a function the bypass of CAPTURE's op removed: the calls a bypass
    would rewrite, the references it lists for a human, and (judged_by_compile) those only g++ can judge."""
    found = caller_edits(tree, capture)
    return sorted((*found.rewritten, *(x for x in found.leftovers if x.needs_edit)), key=lambda x: (x.path, x.line))


class _Net:
    """The one place that decides about every spelling the rewrite left: each file where a removed name could be
    formed, read as the bypass leaves it with the macros it sees expanded; each place that may still name a removed
    function there is listed at its line already (a reference to edit by hand), or is listed now, judged by the
    compile check."""

    def __init__(self, files: _Files, gone: dict[str, set[str]], found: Callers) -> None:
        self.files, self.gone, self.found = files, gone, found
        self.removed = gone["cpu"] | gone["redispatch"]
        self.edits: dict[str, list[Edit]] = defaultdict(list)
        for edit in found.edits:
            self.edits[edit.path].append(edit)
        self.before = {rel: files.tree.path(rel).read_bytes() for rel in self.edits}
        self.planned = {rel: apply_edits(self.before[rel], edits) for rel, edits in self.edits.items()}
        self.scan = _Scan(files, self.removed, {rel: data.decode(errors="replace") for rel, data in self.planned.items()})
        self.forming = _forming_macros(files.macros, self.removed)
        self.piece_words = _piece_words(self.removed)

    def judge(self) -> None:
        listed = {(x.path, x.line) for x in self.found.leftovers if x.needs_edit}
        for rel in self._candidates():
            lines = None
            for line, why in self._possible_references(rel):
                line = self._line_before_the_bypass(rel, line)
                if (rel, line) not in listed:
                    listed.add((rel, line))
                    lines = lines or self.files.text(rel).splitlines()
                    self.found.leftovers.append(Leftover(rel, line, lines[line - 1], why, judged_by_compile=True))

    def _candidates(self) -> Iterator[str]:
        """The files whose code names a removed function, holds pieces that paste into one, or names a macro of the
        tree that may form one (those are read again: the walk kept only the texts that name or piece one)."""
        named = _word(self.removed | set(self.forming))
        for rel in self.files.cpp:
            if rel not in self.files.kept and not (self.forming and named.search(self.files.text(rel))):
                continue
            code = self.scan.code(rel)
            if named.search(code) or _pasted(set(self.piece_words.findall(code)), self.removed):
                yield rel

    def _possible_references(self, rel: str) -> Iterator[tuple[int, str]]:
        """(line as the bypass leaves REL, why) of each place there that may name a removed function."""
        view = _live_view(self.planned.get(rel) or self.files.tree.path(rel).read_bytes())
        view.inherited = self.scan.inherited_macros(rel)
        known = set(view.inherited) | {name for _, name, defined in view.events if defined is not None}
        text, expanded_on = _expanded(view, known & set(_IDENTIFIER.findall(view.text)))
        unseen = {name: where for name, where in self.forming.items() if name not in known}
        yield from _places(text, expanded_on, self.scan.context(rel), self.gone, unseen)

    def _line_before_the_bypass(self, rel: str, line: int) -> int:
        """The line of REL before the caller edits where LINE of REL after them comes from."""
        if rel not in self.planned:
            return line
        offset = line_starts(self.planned[rel])[line - 1]
        shift = 0
        for edit in sorted(self.edits[rel], key=lambda e: e.start):
            start = edit.start + shift
            if offset < start:
                break
            if offset < start + len(edit.text.encode()):
                offset = start  # inside what the edit wrote: where the edit starts
                break
            shift += len(edit.text.encode()) - (edit.end - edit.start)
        return self.before[rel].count(b"\n", 0, offset - shift) + 1


def _expanded(view: cpp_macros.LiveView, names: set[str]) -> tuple[str, dict[int, str]]:
    """VIEW's text with each invocation of NAMES replaced by its expansion, on the line it starts (its line breaks
    kept after it, so every line stays where it was), and the first macro expanded on each line."""
    parts, position, line, expanded_on = [], 0, 1, {}
    for invocation in cpp_macros.invocations(view, names):
        line += view.text.count("\n", position, invocation.start)
        expanded_on.setdefault(line, invocation.macro)
        breaks = view.text.count("\n", invocation.start, invocation.end)
        parts += [view.text[position : invocation.start], invocation.expansion, "\n" * breaks]
        line += breaks
        position = invocation.end
    parts.append(view.text[position:])
    return "".join(parts), expanded_on


@dataclass
class _ArgumentList:
    """An argument list being read: the name before it, and its arguments that are one piece of a removed name (`m`,
    `ul`), with those of the lists inside it."""

    callee: str
    line: int
    pieces: set[str] = field(default_factory=set)
    argument: list[str] = field(default_factory=list)

    def argument_ends(self, pieces: set[str]) -> None:
        if len(self.argument) == 1 and self.argument[0] in pieces:
            self.pieces.add(self.argument[0])
        self.argument = []


def _places(
    text: str, expanded_on: dict[int, str], context: _Context, gone: dict[str, set[str]], unseen: dict[str, tuple[str, cpp_macros.Macro]],
) -> Iterator[tuple[int, str]]:
    """(line, why) of each place of TEXT (a file's live code, its macros expanded) that may name a removed function:
    a removed name qualified by at::cpu / at::redispatch (or an alias), or by what a macro the tool cannot expand makes;
    unqualified under a using-declaration or -directive of one or inside one; pieces of one as a call's arguments (a
    macro the tool cannot see may paste them); a macro of the tree that may form one, which the file does not include."""
    removed = gone["cpu"] | gone["redispatch"]
    pieces = _pieces(removed)
    stream = [(token.text, number) for number, line in _logical_lines(text) for token in cpp_macros.tokens(line)]
    opened: list[list[str]] = []  # for each open brace, the namespaces it opened
    naming: list[str] | None = None  # the names after `namespace`, until its `{`
    calls: list[_ArgumentList] = []
    for i, (token, line) in enumerate(stream):
        before = stream[i - 1][0] if i else ""
        if token == "namespace":
            naming = []
        elif token == "{":
            opened.append(naming or [])
            naming = None
        elif token == "}" and opened:
            opened.pop()
        elif naming is not None and token in ("=", ";"):  # an alias or a using-directive, not a namespace
            naming = None
        elif naming is not None and token not in ("::", "inline"):
            naming.append(token)
        if token == "(":
            if calls:
                calls[-1].argument.append(token)
            calls.append(_ArgumentList(before if _IDENTIFIER.fullmatch(before) else "", line))
        elif token in (",", ")") and calls:
            calls[-1].argument_ends(pieces)
            if token == ")":
                call = calls.pop()
                pasted = len(call.pieces) > 1 and _pasted(call.pieces, removed)
                if pasted and call.callee:
                    yield call.line, f"pieces of {pasted} are arguments of {call.callee}(...), which the tool cannot expand: a macro may paste them; {JUDGED}"
                if calls:
                    calls[-1].pieces |= call.pieces
        elif calls:
            calls[-1].argument.append(token)
        if token in unseen and (unseen[token][1].params is None or stream[i + 1 : i + 2] and stream[i + 1][0] == "("):
            yield line, f"{token} is a macro of {unseen[token][0]} that may form a removed name, from a header the tool does not see this file include; {JUDGED}"
        if token in removed:
            place = _place(stream, i, expanded_on, context, gone, tuple(name for names in opened for name in names))
            if place is not None:
                yield place


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number, line) of each line of TEXT, a line ending with a backslash joined to the next (numbered as its first)."""
    joined, first = "", 1
    for number, line in enumerate(text.split("\n"), 1):
        if line.endswith("\\"):
            joined, first = joined + line[:-1] + " ", first if joined else number
            continue
        yield (first if joined else number), joined + line
        joined = ""


def _place(
    stream: list[tuple[str, int]], i: int, expanded_on: dict[int, str], context: _Context, gone: dict[str, set[str]], enclosing: tuple[str, ...],
) -> tuple[int, str] | None:
    """(line, why) when the removed name at STREAM[i] may name a removed function."""
    name, line = stream[i]
    before = stream[i - 1][0] if i else ""
    if before in (".", "->") or (before == "template" and i > 1 and stream[i - 2][0] in (".", "->")):
        return None  # a member: t.mul(...)
    if before == "::" and i > 1:
        scope = stream[i - 2][0]
        start = i - 2
        while start > 1 and stream[start - 1][0] == "::" and _IDENTIFIER.fullmatch(stream[start - 2][0]):
            start -= 2
        first = stream[start][1]
        if scope == ")":
            return first, f"{name} qualified by what {_callee(stream, i - 2)}(...) makes, which the tool cannot expand; {JUDGED}"
        namespace = context.namespace(scope)
        if namespace is not None:
            if name not in gone[namespace]:
                return None
            macro = next((expanded_on[n] for n in range(first, line + 1) if n in expanded_on), None)
            if macro is not None:
                return first, f"at::{namespace}::{name} once {macro} is expanded; {JUDGED}"
            return first, f"{scope}::{name} may name at::{namespace}::{name}; {JUDGED}"
        if _IDENTIFIER.fullmatch(scope) or scope == ">":
            return None  # another namespace or a class
    brought = context.namespace(context.using_names.get(name, ""))
    under = [namespace for namespace in map(context.namespace, context.using_namespace) if namespace and name in gone[namespace]]
    if brought is not None and name in gone[brought]:
        return line, f"brought in by `using at::{brought}::{name};`; {JUDGED}"
    if under:
        return line, f"under `using namespace at::{under[0]};`; {JUDGED}"
    if enclosing[:2] in (("at", "cpu"), ("at", "redispatch")) and name in gone[enclosing[1]]:
        return line, f"inside namespace at::{enclosing[1]}; {JUDGED}"
    return None


def _callee(stream: list[tuple[str, int]], closing: int) -> str:
    """The name before the argument list STREAM[closing] closes."""
    depth = 0
    for index in range(closing, -1, -1):
        depth += (stream[index][0] == ")") - (stream[index][0] == "(")
        if depth == 0:
            return stream[index - 1][0] if index else ""
    return ""


def _forming_macros(macros: dict[str, list[tuple[str, cpp_macros.Macro]]], removed: set[str]) -> dict[str, tuple[str, cpp_macros.Macro]]:
    """The tree's macros that may form or qualify a removed name, each with a file defining it: a body that names one,
    names cpu or redispatch, pastes (##), puts a parameter beside `::`, or names such a macro."""
    forming: dict[str, tuple[str, cpp_macros.Macro]] = {}

    def forms(macro: cpp_macros.Macro) -> bool:
        body = [token.text for token in macro.body]
        params = set(macro.params or ())
        beside = any("::" in pair and not params.isdisjoint(pair) for pair in zip(body, body[1:]))
        return beside or not {*removed, *NAMESPACES, "##", *forming}.isdisjoint(body)

    grown = True
    while grown:
        grown = False
        for name, definitions in macros.items():
            defining = next((definition for definition in definitions if name not in forming and forms(definition[1])), None)
            if defining is not None:
                forming[name] = defining
                grown = True
    return forming


def _pieces(names: set[str]) -> set[str]:
    """The pieces of the names of NAMES: their proper parts (`m`, `ul` of `mul`)."""
    return {name[i:j] for name in names for i in range(len(name)) for j in range(i + 1, len(name) + 1) if j - i < len(name)}


def _piece_words(names: set[str]) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{'|'.join(sorted(map(re.escape, _pieces(names)), key=len, reverse=True))})\b")


def _pasted(pieces: set[str], names: set[str]) -> str | None:
    """A name of NAMES that two or more of PIECES pasted together make (`m` ## `ul`), if any."""
    for name in sorted(names):
        made = [True] + [False] * len(name)  # made[end]: name[:end] is a row of pieces
        for end in range(1, len(name) + 1):
            made[end] = any(made[start] and end - start < len(name) and name[start:end] in pieces for start in range(end))
        if made[-1]:
            return name
    return None


def _sources_including(files: _Files, reached: set[str]) -> set[str]:
    """For each file of REACHED that is compiled only as part of a source (a header, an .inl), the nearest source of
    the tree that includes it (the first by name), unless a source of REACHED includes it already."""
    added: set[str] = set()
    for rel in sorted(reached):
        if rel.endswith((*SOURCE_SUFFIXES, *CUDA_SUFFIXES)):
            continue
        level, seen, nearest = {rel}, {rel}, None
        while level:
            level = {includer for header in level for includer in files.included_by.get(header, ())} - seen
            seen |= level
            sources = sorted(s for s in level if s.endswith(SOURCE_SUFFIXES))
            nearest = nearest or next(iter(sources), None)
        compiled = reached | added
        if nearest is not None and not any(s in compiled for s in seen - {rel} if s.endswith(SOURCE_SUFFIXES)):
            added.add(nearest)
    return added


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
        using = _enclosing_using_declaration(node)
        if using is not None:
            for start, end, path in _declarators(self.source.src.data, using):
                if start <= node.start_byte < end:
                    self._declared(using, start, end, path, name, found)
            return
        named = node.parent if node.parent is not None and node.parent.type == "template_function" else node
        if named.parent is not None and named.parent.type == "qualified_identifier" and named.parent.child_by_field_name("name") == named:
            self._qualified(_outermost_qualified(named.parent), name, found)

    def _qualified(self, qualified: Node, name: str, found: Callers) -> None:
        namespace = self._removed_in(re.sub(r"\s+", "", self.source.src.text(qualified)).removeprefix("::"), name)
        if namespace is None:
            return  # another function, or a spelling the net judges
        parent = qualified.parent
        called = parent.type == "call_expression" and parent.child_by_field_name("function") == qualified
        replacements = _rewrite(self.source, parent, namespace, name, self.functions, self.methods) if called else None
        self._resolved(qualified, namespace, name, replacements, found)

    def _declared(self, using: Node, start: int, end: int, path: str, name: str, found: Callers) -> None:
        """The declarator PATH (bytes START to END of USING) of a using-declaration: one naming a removed at::cpu
        function declares at::NAME instead, the function the unqualified calls under it reach after the bypass."""
        namespace = self._removed_in(path, name)
        if namespace is None:
            return
        text = self.source.src.data[start:end].decode(errors="replace")
        spelled_plainly = _blanked(text) == text  # a comment in it: left to a human
        rewritable = namespace == "cpu" and name in self.functions and spelled_plainly
        self._resolved(using, namespace, name, [(start, end, f"at::{name}")] if rewritable else None, found)

    def _removed_in(self, path: str, name: str) -> str | None:
        """The namespace ("cpu", "redispatch") whose function NAME the bypass removed, when PATH (SCOPE::NAME, no
        spaces or leading ::) names it; else None."""
        scope, _, last = path.rpartition("::")
        namespace = self._namespace_of(scope) if last == name else None
        return namespace if namespace is not None and name in self.gone[namespace] else None

    def _resolved(self, at: Node, namespace: str, name: str, replacements: list[tuple[int, int, str]] | None, found: Callers) -> None:
        """A reference AT to the removed NAMESPACE::NAME: rewritten by REPLACEMENTS, or listed to edit by hand (None)."""
        if replacements is None:
            found.leftovers.append(self._at(at, "not a call the tool can rewrite; edit it by hand"))
            return
        why = f"{namespace}::{name} is gone after the bypass"
        found.edits.extend(Edit(self.source.rel, start, end, text, why) for start, end, text in replacements)
        found.rewritten.append(self._at(at, f"at::{namespace}::{name}, which the bypass removed"))

    def _namespace_of(self, scope: str) -> str | None:
        """"cpu" or "redispatch" when SCOPE names at::cpu / at::redispatch (itself, or an alias of it)."""
        return self.context.namespace(scope.removeprefix("at::"))

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

    def _at(self, node: Node, why: str) -> Leftover:
        line = node.start_point[0]
        return Leftover(self.source.rel, line + 1, self.lines[line], why)


def _unqualified_seeing_native(source: SourceFile, names: set[str], found: Callers, aliases: set[str]) -> None:
    """Unqualified calls of NAMES that see at::native's names (inside namespace at::native, or under a using-directive
    or using-declaration of it or of one of its ALIASES, which the file or a file it sees defines) reached at::NAME,
    the only NAME there was; after the bypass torchgen declares at::native::NAME too, and g++ finds the call ambiguous.
    Each becomes at::NAME, the function it called (PyTorch's TensorConversions.cpp calls
    _convert_indices_from_coo_to_csr so)."""
    for node in cpp_syntax.walk(source.src.root):
        function = node.child_by_field_name("function") if node.type == "call_expression" else None
        if function is None or function.type != "identifier" or cpp_syntax.text(function) not in names:
            continue
        name, line = cpp_syntax.text(function), function.start_point[0]
        seen = _native_seen_from(node, name, aliases, source.src.data)
        if seen is not None:
            why = f"at::native::{name} is declared after the bypass: the unqualified call would be ambiguous"
            found.edits.append(Edit(source.rel, function.start_byte, function.end_byte, f"at::{name}", why))
            found.rewritten.append(Leftover(source.rel, line + 1, _line(source, line), f"{name}, unqualified {seen}"))


# The scopes a using-directive or using-declaration holds in, from where it stands to their end.
_SCOPES = ("translation_unit", "declaration_list", "compound_statement")


def _native_seen_from(call: Node, name: str, aliases: set[str], data: bytes) -> str | None:
    """How the unqualified CALL of NAME sees at::native's names: inside the namespace, or under a using-directive or
    using-declaration (of NAME) before it in an enclosing scope, naming at::native or one of its ALIASES; None if it
    does not (a namespace whose own using-directive brings at::native is not followed). DATA: the file's bytes."""
    if cpp_syntax.namespaces(call)[:2] == ("at", "native"):
        return "in at::native"
    scope = call.parent
    while scope is not None:
        if scope.type in _SCOPES:
            for using in scope.named_children:
                if using.type == "using_declaration" and using.end_byte <= call.start_byte and _names_native(using, name, aliases, data):
                    return f"under `{cpp_syntax.text(using)}`"
        scope = scope.parent
    return None


def _names_native(using: Node, name: str, aliases: set[str], data: bytes) -> bool:
    """Whether USING (`using namespace X;`, or `using X::NAME;` among its declarators) brings at::native's names, or
    at::native::NAME, into its scope. DATA: the file's bytes."""
    if _is_directive(using):
        return _is_native(_namespace_path(using.named_children[-1]), using, aliases)
    return any(path.endswith(f"::{name}") and _is_native(path.removesuffix(f"::{name}"), using, aliases) for _, _, path in _declarators(data, using))


def _enclosing_using_declaration(node: Node) -> Node | None:
    """The using-declaration (not a using-directive) NODE is part of, if any."""
    while node is not None and node.type != "using_declaration":
        node = node.parent
    return None if node is None or _is_directive(node) else node


def _is_directive(using: Node) -> bool:
    """Whether USING (a using_declaration node) is a using-directive (`using namespace X;`)."""
    return any(child.type == "namespace" for child in using.children)


def _declarators(data: bytes, using: Node) -> list[tuple[int, int, str]]:
    """What the using-declaration USING declares, each as (start byte, end byte, its path without spaces, comments or
    a leading ::). C++17 lets one declare several (`using at::cpu::mul, at::cpu::add;`), which tree-sitter-cpp parses
    as one mangled name: so they are split at the commas outside brackets, from the text."""
    start = using.children[0].end_byte  # after `using`
    end = using.children[-1].start_byte if using.children[-1].type == ";" else using.end_byte
    spans, depth, begin = [], 0, start
    for at in range(start, end):
        byte = data[at]
        depth += (byte in b"<([") - (byte in b">)]")
        if byte == ord(",") and depth == 0:
            spans.append((begin, at))
            begin = at + 1
    spans.append((begin, end))
    found = []
    for first, last in spans:
        chunk = data[first:last]  # trimmed as bytes: a decoded text's lengths count characters, not bytes
        first, last = first + len(chunk) - len(chunk.lstrip()), last - (len(chunk) - len(chunk.rstrip()))
        text = data[first:last].decode(errors="replace")
        path = re.sub(r"\s+", "", _blanked(text).strip().removeprefix("typename ")).removeprefix("::")
        found.append((first, last, path))
    return found


def _is_native(path: str, where: Node, aliases: set[str]) -> bool:
    """Whether the namespace PATH, spelled at WHERE, is at::native."""
    return path == "at::native" or path in aliases or (path == "native" and cpp_syntax.namespaces(where)[:1] == ("at",))


def _namespace_path(node: Node) -> str:
    return cpp_syntax.text(node).replace(" ", "").removeprefix("::")


def _unqualified_call(names: set[str]) -> re.Pattern[str]:
    """NAMES called with no scope or object before them (`mul(`, not `at::mul(` or `a.mul(`): the files worth parsing."""
    return re.compile(rf"(?<![\w:.>])({'|'.join(sorted(map(re.escape, names)))})\s*\(")


def _outermost_qualified(node: Node) -> Node:
    while node.parent is not None and node.parent.type == "qualified_identifier" and node.parent.child_by_field_name("name") == node:
        node = node.parent
    return node


def _word(names: set[str]) -> re.Pattern[str]:
    return re.compile(rf"\b({'|'.join(sorted(map(re.escape, names)))})\b")


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
