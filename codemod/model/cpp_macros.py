"""What the compiler sees of one C++ file: its live code and its own macros, expanded where invoked.

tree-sitter gives the directives (`#define`, `#undef`, `#if`...) and comments;
a conditional branch the file itself decides is off (`#if 0`, `#ifdef X` after
`#undef X`) is dead, one it cannot decide (a macro from a header or the build)
is live. Each invocation of a function-like or object-like macro the file
defines is expanded as the preprocessor does: arguments expanded, `#`
stringized, `##` pasted, the body rescanned with the macro itself disabled (an
expansion that ends with a function-like macro's name takes the arguments
written after it). Macros from headers (`TORCH_META_FUNC`) are left as written,
but for those a caller hands over (`inherited`: the tree's headers it includes).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from codemod.model.cpp_syntax import Source

_TOKEN = re.compile(
    r"""
    (?P<space>(?:\s|\\\n)+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>(?:u8|[uUL])?R"(?P<delimiter>[^(\s]*)\(.*?\)(?P=delimiter)"
      | (?:u8|[uUL])?"(?:\\.|[^"\\\n])*" | (?:u8|[uUL])?'(?:\\.|[^'\\\n])*')
  | (?P<identifier>[A-Za-z_]\w*)
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<punctuator>\#\#|::|->\*?|<<=|>>=|\.\.\.|[-+*/%&|^!=<>]=|&&|\|\||\+\+|--|<<|>>|\.\*|.)
    """,
    re.S | re.X,
)
_DEFINE = re.compile(r"#\s*define\s+(?P<name>\w+)(?:\((?P<params>[^)]*)\))?(?P<body>.*)", re.S)
_UNDEF = re.compile(r"#\s*undef\s+(?P<name>\w+)")
_OPENING = re.compile(r"\s*\(")
_BLANKED = ("comment", "string_literal", "raw_string_literal", "char_literal", "system_lib_string")
_DIRECTIVES = ("preproc_def", "preproc_function_def", "preproc_include", "preproc_call")
_CONDITIONALS = ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_elifdef")


@dataclass(frozen=True)
class Token:
    text: str
    spaced: bool  # whitespace came before it, so the expansion keeps `a::b` and `a b` apart


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like
    body: tuple[Token, ...]


@dataclass(frozen=True)
class Invocation:
    """A use of one of the file's own macros in live code, and the code it becomes."""

    macro: str
    start: int  # byte offset of the macro's name
    end: int  # after its closing parenthesis (after the name, for an object-like macro)
    expansion: str


def tokens(text: str) -> list[Token]:
    found, spaced = [], False
    for match in _TOKEN.finditer(text):
        if match.lastgroup in ("space", "comment"):
            spaced = True
            continue
        found.append(Token(match.group(), spaced))
        spaced = False
    return found


def join(found: list[Token]) -> str:
    return "".join((" " if t.spaced else "") + t.text for t in found).strip()


@dataclass
class LiveView:
    """One file as the preprocessor leaves it, offsets kept: dead branches, directives, comments and
    literals are blanked to spaces; `events` are its #define (a Macro) and #undef (None), in file order."""

    text: str  # latin-1, so a character offset is a byte offset
    events: list[tuple[int, str, Macro | None]]
    inherited: dict[str, Macro] = field(default_factory=dict)  # defined before the file's first line (by its headers)

    def macros_at(self, offset: int) -> dict[str, Macro]:
        active = dict(self.inherited)
        for at, name, macro in self.events:
            if at >= offset:
                break
            if macro is None:
                active.pop(name, None)
            else:
                active[name] = macro
        return active


def live_view(src: Source) -> LiveView:
    text = src.data.decode("latin-1")
    blank: list[tuple[int, int]] = []
    events: list[tuple[int, str, Macro | None]] = []

    def defined(name: str) -> Macro | bool | None:
        """The file's macro NAME as defined so far; False after its #undef; None if the file never defines it."""
        state: Macro | bool | None = None
        for _, event_name, macro in events:
            if event_name == name:
                state = macro if macro is not None else False
        return state

    def visit(node: Node) -> None:
        kind = node.type
        if kind in _BLANKED:
            blank.append((node.start_byte, node.end_byte))
        elif kind in _DIRECTIVES:
            blank.append((node.start_byte, node.end_byte))
            _record(node, text, events)
        elif kind in _CONDITIONALS:
            _visit_conditional(node, text, blank, visit, defined)
        elif kind == "preproc_else":
            for child in node.children:
                if child.type == "#else":
                    blank.append((child.start_byte, child.end_byte))
                else:
                    visit(child)
        else:
            for child in node.children:
                visit(child)

    visit(src.root)
    chars = list(text)
    for start, end in blank:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return LiveView("".join(chars), events)


def _record(node: Node, text: str, events: list[tuple[int, str, Macro | None]]) -> None:
    """A #define or #undef, at its offset. The definition is read by the preprocessor's own rule
    (a `(` right after the name makes it function-like): tree-sitter may take a long
    function-like #define for an object-like one."""
    directive = text[node.start_byte : node.end_byte]
    if node.type in ("preproc_def", "preproc_function_def"):
        defined = macro(directive)
        if defined is not None:
            events.append((node.start_byte, defined.name, defined))
    elif (found := _UNDEF.match(directive)) is not None:
        events.append((node.start_byte, found["name"], None))


def macro(directive: str) -> Macro | None:
    """The macro a `#define` directive (its whole text) defines."""
    found = _DEFINE.match(directive)
    if found is None:
        return None
    params = None if found["params"] is None else tuple(
        p.strip(" \t\\\n") for p in found["params"].split(",") if p.strip(" \t\\\n")
    )
    return Macro(found["name"], params, tuple(tokens(found["body"])))


def _visit_conditional(node: Node, text: str, blank: list[tuple[int, int]], visit, defined) -> None:
    """Blank the directive, and the body or the alternative the file's own macros decide is off."""
    condition = node.child_by_field_name("condition") or node.child_by_field_name("name")
    alternative = node.child_by_field_name("alternative")
    directive = node.children[0]
    if node.type in ("preproc_if", "preproc_elif"):
        value = _evaluate(condition, text, defined)
    else:  # #ifdef / #ifndef / #elifdef / #elifndef NAME
        known = defined(text[condition.start_byte : condition.end_byte])
        value = None if known is None else bool(known) != text[directive.start_byte : directive.end_byte].endswith("ndef")
    blank.append((directive.start_byte, condition.end_byte))
    for child in node.children:
        if child.start_byte <= condition.start_byte or child == alternative:
            continue
        if child.type == "#endif" or value is False:
            blank.append((child.start_byte, child.end_byte))
        else:
            visit(child)
    if alternative is not None:
        if value is True:
            blank.append((alternative.start_byte, alternative.end_byte))
        else:
            visit(alternative)


def _evaluate(node: Node, text: str, defined) -> bool | None:
    """A condition's truth where the file decides it: numbers, its own macros (`X`, `defined(X)`), ! && ||."""
    value = _value(node, text, defined)
    return None if value is None else value != 0


def _value(node: Node, text: str, defined) -> int | None:
    kind = node.type
    if kind == "number_literal":
        return _number(text[node.start_byte : node.end_byte])
    if kind == "parenthesized_expression":
        return _value(node.named_children[0], text, defined)
    if kind == "preproc_defined":
        known = defined(text[node.named_children[0].start_byte : node.named_children[0].end_byte])
        return None if known is None else int(bool(known))
    if kind == "identifier":  # an object-like macro of the file whose value is a number
        known = defined(text[node.start_byte : node.end_byte])
        if isinstance(known, Macro) and known.params is None and len(known.body) == 1:
            return _number(known.body[0].text)
        return None
    if kind == "unary_expression" and node.children[0].type == "!":
        inner = _value(node.named_children[0], text, defined)
        return None if inner is None else int(not inner)
    if kind == "binary_expression" and node.children[1].type in ("&&", "||"):
        left, right = (_value(n, text, defined) for n in node.named_children[:2])
        decisive = 0 if node.children[1].type == "&&" else 1
        if decisive in (left, right):
            return decisive
        return None if left is None or right is None else int(bool(left) and bool(right) if decisive == 0 else bool(left) or bool(right))
    return None


def _number(literal: str) -> int | None:
    try:
        return int(literal.rstrip("uUlL"), 0)
    except ValueError:
        return None


def invocations(view: LiveView, names: set[str]) -> Iterator[Invocation]:
    """Every outermost invocation, in live code, of the file's macros named in NAMES, expanded."""
    if not names:
        return
    pattern = re.compile(rf"\b(?:{'|'.join(sorted(map(re.escape, names)))})\b")
    position = 0
    while (match := pattern.search(view.text, position)) is not None:
        macros = view.macros_at(match.start())
        macro = macros.get(match.group())
        position = match.end()
        if macro is None:
            continue
        end = match.end()
        if macro.params is not None:
            opening = _OPENING.match(view.text, end)
            if opening is None:
                continue  # a function-like macro's name without arguments is not an invocation
            end = _after_closing_parenthesis(view.text, opening.end())
        expansion = _expand(tokens(view.text[match.start() : end]), macros, frozenset())
        # an expansion that ends with a function-like macro's name takes the arguments written after it
        while expansion and _takes_arguments(expansion[-1].text, macros, frozenset()):
            opening = _OPENING.match(view.text, end)
            if opening is None:
                break
            end = _after_closing_parenthesis(view.text, opening.end())
            expansion = _expand(tokens(view.text[match.start() : end]), macros, frozenset())
        yield Invocation(macro.name, match.start(), end, join(expansion))
        position = end


def _takes_arguments(name: str, macros: dict[str, Macro], disabled: frozenset[str]) -> bool:
    found = macros.get(name)
    return found is not None and found.params is not None and name not in disabled


def _after_closing_parenthesis(text: str, start: int) -> int:
    """After the bracket closing the one opened just before START."""
    depth = 0
    for match in _TOKEN.finditer(text, start):
        value = match.group()
        if value in ("(", "[", "{"):
            depth += 1
        elif value in (")", "]", "}"):
            if depth == 0:
                return match.end()
            depth -= 1
    return len(text)


def after_body(text: str, start: int) -> int:
    """After the `}` closing the first `{` from START on: the end of a definition whose head ends at START."""
    opening = text.find("{", start)
    return len(text) if opening == -1 else _after_closing_parenthesis(text, opening + 1)


def _expand(found: list[Token], macros: dict[str, Macro], disabled: frozenset[str]) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(found):
        token = found[i]
        macro = macros.get(token.text)
        if macro is None or token.text in disabled:
            out.append(token)
            i += 1
            continue
        args: list[list[Token]] | None = None
        if macro.params is not None:
            if i + 1 >= len(found) or found[i + 1].text != "(":
                out.append(token)
                i += 1
                continue
            args, i = _split_arguments(found, i + 2)
        else:
            i += 1
        body = _substitute(macro, args, macros, disabled)
        expanded = _expand(body, macros, disabled | {macro.name})
        if expanded:
            expanded[0] = Token(expanded[0].text, token.spaced)
        tail = expanded[-1] if expanded else None
        takes_what_follows = i < len(found) and found[i].text == "("
        if tail is not None and tail.text != macro.name and _takes_arguments(tail.text, macros, disabled) and takes_what_follows:
            # a function-like macro the expansion ends with takes the arguments written after it
            out.extend(expanded[:-1])
            found, i = [tail, *found[i:]], 0
            continue
        out.extend(expanded)
    return out


def _split_arguments(found: list[Token], start: int) -> tuple[list[list[Token]], int]:
    args: list[list[Token]] = [[]]
    depth = 0
    for index in range(start, len(found)):
        value = found[index].text
        if value == ")" and depth == 0:
            return ([] if args == [[]] else args), index + 1
        if value == "," and depth == 0:
            args.append([])
            continue
        depth += (value in ("(", "[", "{")) - (value in (")", "]", "}"))
        args[-1].append(found[index])
    return args, len(found)


def _substitute(macro: Macro, args: list[list[Token]] | None, macros: dict[str, Macro], disabled: frozenset[str]) -> list[Token]:
    """The body with each parameter replaced (`#p` stringized, `##` operands raw, others expanded), then pasted."""
    params = list(macro.params or ())
    bound: dict[str, list[Token]] = {}
    if args is not None:
        variadic = bool(params) and params[-1] == "..."
        named = params[:-1] if variadic else params
        for index, name in enumerate(named):
            bound[name] = args[index] if index < len(args) else []
        if variadic:
            rest = args[len(named) :]
            bound["__VA_ARGS__"] = [t for arg in rest for t in (*arg, Token(",", False))][:-1]
    body = list(macro.body)
    out: list[Token] = []
    i = 0
    while i < len(body):
        token = body[i]
        if token.text == "#" and args is not None and i + 1 < len(body) and body[i + 1].text in bound:
            out.append(Token('"' + join(bound[body[i + 1].text]).replace("\\", "\\\\").replace('"', '\\"') + '"', token.spaced))
            i += 2
            continue
        if token.text in bound:
            pasted = (i > 0 and body[i - 1].text == "##") or (i + 1 < len(body) and body[i + 1].text == "##")
            value = bound[token.text] if pasted else _expand(bound[token.text], macros, disabled)
            if value:
                out.extend([Token(value[0].text, token.spaced), *value[1:]])
            i += 1
            continue
        out.append(token)
        i += 1
    return _paste(out)


def _paste(found: list[Token]) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(found):
        if found[i].text == "##" and out and i + 1 < len(found):
            left = out.pop()
            out.append(Token(left.text + found[i + 1].text, left.spaced))
            i += 2
            continue
        out.append(found[i])
        i += 1
    return out
