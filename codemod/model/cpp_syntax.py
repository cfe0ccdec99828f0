"""tree-sitter-cpp helpers: parse, walk, and name the definitions we match on.

Templates hold `${...}` placeholders and macros; tree-sitter recovers around
them with ERROR nodes, which is enough to find namespaces, classes and
function definitions by structure.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter_cpp
from tree_sitter import Language, Node, Parser

from codemod.model.cache import installed_version


def parser_versions() -> list[str]:
    """tree-sitter's and its C++ grammar's versions: what a parse, and so anything kept from one, depends on."""
    return [installed_version(package) for package in ("tree-sitter", "tree-sitter-cpp")]


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_cpp.language()))


# Export macros before a class name make tree-sitter misread the class as a
# function; blanking them (same length) keeps every byte offset valid.
_EXPORT_MACROS = re.compile(rb"\b(?:TORCH_API|C10_API|TORCH_PYTHON_API|CAFFE2_API)\b")


@dataclass(frozen=True)
class Source:
    """Original bytes and the tree parsed from them; text is sliced from the original."""

    data: bytes
    root: Node

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode()

    def span(self, start: int, end: int) -> str:
        return self.data[start:end].decode()


def parse(data: bytes) -> Source:
    blanked = _EXPORT_MACROS.sub(lambda m: b" " * len(m.group()), data)
    return Source(data, _parser().parse(blanked).root_node)


def walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def text(node: Node) -> str:
    """Text of a node as parsed (export macros blanked): for matching, not for copying."""
    return node.text.decode()


def namespaces(node: Node) -> tuple[str, ...]:
    """Enclosing namespace names, outermost first; '' for an anonymous one."""
    names: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type == "namespace_definition":
            name = parent.child_by_field_name("name")
            names[:0] = text(name).split("::") if name is not None else [""]
        parent = parent.parent
    return tuple(names)


def _descend(node: Node, until: str) -> Node | None:
    """The first declarator of type UNTIL inside NODE's, through pointers and references."""
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != until:
        # reference_declarator holds its inner declarator as a plain child
        inner = declarator.child_by_field_name("declarator")
        declarator = inner if inner is not None else (declarator.named_children or [None])[-1]
    return declarator


def function_declarator(node: Node) -> Node | None:
    """The function_declarator of a definition or declaration."""
    return _descend(node, "function_declarator")


@dataclass(frozen=True)
class MacroHead:
    """`TORCH_IMPL_FUNC(mul_out) (...)`: a definition whose name is a macro call."""

    macro: str
    args: tuple[str, ...]


def definition_name(node: Node) -> str | MacroHead | None:
    """`mul`, `Tensor::mul`, or the macro head of a macro-named definition."""
    declarator = function_declarator(node)
    if declarator is None:
        return None
    inner = declarator.child_by_field_name("declarator")
    if inner is not None and inner.type == "function_declarator":
        macro = inner.child_by_field_name("declarator")
        params = inner.child_by_field_name("parameters")
        args = tuple(text(p) for p in params.named_children) if params is not None else ()
        return MacroHead(text(macro), args)
    return text(inner) if inner is not None else None


def strip_default_arguments(node: Node, head: str, base: int) -> str:
    """HEAD (source text starting at byte BASE) with every `=default` of NODE's parameters removed."""
    declarator = function_declarator(node)
    params = declarator.child_by_field_name("parameters") if declarator else None
    cuts = []
    for param in params.named_children if params else ():
        if param.type == "optional_parameter_declaration":
            name = param.child_by_field_name("declarator")
            default = param.child_by_field_name("default_value")
            cuts.append((name.end_byte - base, default.end_byte - base))
    raw = head.encode()
    for start, end in reversed(cuts):
        raw = raw[:start] + raw[end:]
    return raw.decode()


def function_head(src: Source, node: Node) -> tuple[str, int]:
    """Return type and declarator of a function, without `inline`; and the byte it starts at."""
    start = node.child_by_field_name("type").start_byte
    return src.span(start, node.child_by_field_name("declarator").end_byte), start


def parameters(node: Node) -> list[tuple[str, str]]:
    """(type as written, name) of a function's parameters, in order; default arguments dropped."""
    params = function_declarator(node).child_by_field_name("parameters")
    found = []
    for param in params.named_children:
        name = _descend(param, "identifier")
        if name is not None:
            found.append((text(param)[: name.start_byte - param.start_byte].strip(), text(name)))
    return found


def parameter_names(node: Node) -> list[str]:
    """Names of a function's parameters, in order."""
    return [name for _, name in parameters(node)]