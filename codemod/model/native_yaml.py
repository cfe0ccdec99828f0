"""Parse native_functions.yaml once and locate an op's structured groups.

The whole file is composed once with the C loader torchgen uses (fast, and what
torchgen accepts is what matters): its nodes give each entry's character span
whatever the layout (any indentation, key order, quoting, flow or block style,
comments and blank lines anywhere). torchgen's own refusals that YAML allows
(a key twice in one mapping, no `func`) and two entries of one name are
reported here, with file:line, before anything is planned. The op's own entries
are then composed with ruamel.yaml, whose node marks give each key's span.
"""
from __future__ import annotations

import bisect
import contextlib
import dataclasses
import difflib
import functools
import itertools
import json
import marshal
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml
from ruamel.yaml import YAML
from ruamel.yaml import nodes as ruamel_nodes
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.events import AliasEvent

from codemod.model import cache
from codemod.model.errors import BadInput, NotBypassable

# Every key torchgen's NativeFunction.from_yaml understands (torchgen/model.py).
KNOWN_KEYS = frozenset(
    {
        "func", "variants", "dispatch", "structured", "structured_delegate",
        "structured_inherits", "device_check", "device_guard", "tags",
        "manual_cpp_binding", "manual_kernel_registration", "autogen",
        "python_module", "category_override", "precomputed", "cpp_no_default_args",
        "use_const_ref_for_mutable_tensors", "ufunc_inner_loop",
    }
)
# What makes an entry structured, and what torchgen accepts only on a structured one (its ufunc codegen
# needs `structured`; `precomputed` requires it); a bypass removes them all.
STRUCTURED_KEYS = ("structured", "structured_inherits", "structured_delegate", "dispatch", "ufunc_inner_loop", "precomputed")

_BOM = "\ufeff"
_ALIAS = re.compile(r"(?:\s|[:-]|#[^\n]*)*\*[^\s,\[\]{}]+")  # indicators, blanks and comments, then `*name`
_FUNC_NAME = re.compile(r"\s*(?P<name>[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)\s*\(")
_C_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class KeySpan:
    """One key of an entry and its value, as character offsets into the file."""

    key: str
    start: int  # the key's first character
    end: int  # just after the value's last character (not its trailing comment)
    first_line: int  # 0-based


@dataclass(frozen=True)
class Entry:
    """One item of the top-level list: its overload name and the characters it occupies."""

    name: str  # e.g. "mul.Tensor"
    first_line: int  # 0-based: the line of its first key
    end_line: int  # exclusive: the line after its last value
    start: int  # character offset of its first key (or of `{` for a flow mapping)
    end: int  # character offset just after its last value
    column: int  # the column of its first key

    @property
    def base(self) -> str:  # "mul_" for "mul_.Tensor"
        return self.name.split(".")[0]


@dataclass(frozen=True)
class ParsedEntry:
    entry: Entry
    keys: dict[str, KeySpan]  # in the order they are written
    values: dict[str, object]
    flow: bool  # written as `{key: value, ...}`

    @property
    def name(self) -> str:
        return self.entry.name


@dataclass(frozen=True)
class OpGroup:
    """A structured group: the out entry that owns the kernel and its delegates."""

    out: ParsedEntry
    delegates: tuple[ParsedEntry, ...]

    @property
    def members(self) -> tuple[ParsedEntry, ...]:
        return (*self.delegates, self.out)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.members)

    @property
    def schemas(self) -> tuple[tuple[str, str], ...]:
        """Each member's overload name and its schema's text."""
        return tuple((m.name, str(m.values["func"])) for m in self.members)


@dataclass(frozen=True)
class NativeYaml:
    rel_path: str
    text: str
    lines: tuple[str, ...]  # with line endings
    entries: tuple[Entry, ...]
    values: list[dict]  # the loader's entries, in the order of `entries`

    def entry_source(self, entry: Entry) -> str:
        """The entry's own text, padded to its column, so that it composes alone with the same offsets shifted."""
        return " " * entry.column + self.text[entry.start : entry.end]

    def entry_text(self, entry: Entry) -> str:
        """The entry as a one-item list, for a yaml of just some entries (the capture, the verification). An alias of
        an anchor in another entry would be undefined there: such an entry is written out from its values (JSON,
        which YAML reads)."""
        source = self.entry_source(entry)
        if _aliases_elsewhere(source):
            return "- " + json.dumps(self.values[self.entries.index(entry)]) + "\n"
        return "-\n" + source + "\n"

    def by_name(self) -> dict[str, Entry]:
        return {e.name: e for e in self.entries}

    def byte_offset(self, char_offset: int) -> int:
        return char_offset if self.text.isascii() else len(self.text[:char_offset].encode())

    @cached_property
    def indices_by_base(self) -> dict[str, list[int]]:
        """"mul_" -> indices of mul_.Tensor, mul_.Scalar, ..."""
        index: dict[str, list[int]] = defaultdict(list)
        for i, entry in enumerate(self.entries):
            index[entry.base].append(i)
        return index

    @cached_property
    def delegates_of(self) -> dict[str, list[int]]:
        """"mul.out" -> indices of the entries with `structured_delegate: mul.out`."""
        index: dict[str, list[int]] = defaultdict(list)
        for i, values in enumerate(self.values):
            if "structured_delegate" in values:
                index[values["structured_delegate"]].append(i)
        return index


def _aliases_elsewhere(source: str) -> bool:
    """Whether SOURCE names an anchor it does not define."""
    if "*" not in source:
        return False
    tokens = list(yaml.scan(source, Loader=_C_LOADER))
    anchors = {token.value for token in tokens if isinstance(token, yaml.AnchorToken)}
    return any(isinstance(token, yaml.AliasToken) and token.value not in anchors for token in tokens)


def op_name(base: str) -> str:
    """The op an entry belongs to: "mul_" -> "mul"; dunder names ("__iand__") are their own op."""
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


def line_end(text: str, offset: int) -> int:
    """The offset of the line break ending the line that holds OFFSET (or the end of the text)."""
    found = text.find("\n", offset)
    return len(text) if found == -1 else found


@functools.lru_cache(maxsize=8)  # a command reads the same text at each step (plan, checks, verify): parse it once
def load(rel_path: str, text: str) -> NativeYaml:
    record = _parsed_record(text) if len(text) >= _KEPT_FROM_CHARS else None
    kept = _kept_parse(record) if record is not None else None
    if kept is not None:
        entries, values = kept
        return NativeYaml(rel_path, text, split_lines(text), entries, values)
    bom = len(_BOM) if text.startswith(_BOM) else 0  # libyaml (torchgen's loader) skips it, and counts marks after it
    root, values = _compose(rel_path, text[bom:])
    if not isinstance(root, yaml.SequenceNode):
        raise BadInput(f"{rel_path}:1: expected a list of entries (`- func: ...`), as torchgen does; fix the file's layout")
    lines = split_lines(text)
    line_ends = list(itertools.accumulate(len(line) for line in lines))
    entries = tuple(_entry(rel_path, text, bom, line_ends, node, value) for node, value in zip(root.value, values, strict=True))
    _refuse_duplicate_names(rel_path, entries)
    if record is not None:
        _keep_parse(record, entries, values)
    return NativeYaml(rel_path, text, lines, entries, values)


# A whole native_functions.yaml takes libyaml and our checks about 0.16 s, each command, each time: what a text that
# passed them parses to is kept in the build cache by its bytes and our code (marshal: exact for the values YAML gives,
# and loading it runs no code; 11 ms). The texts a tree goes through, the most recently used of them. A short text
# (an op's entries, target_tree/'s 32 KB yaml: 9 ms) is parsed each time: its record would only push a whole
# yaml's out of the few kept.
_PARSED = "yaml"
_PARSED_KEPT = 32
_KEPT_FROM_CHARS = 100_000


def _parsed_record(text: str) -> Path:
    key = cache.digest("native_yaml.load", text, cache.own_code(), sys.version, yaml.__version__)[:24]
    return cache.cache_dir() / _PARSED / f"{key}.marshal"


def _kept_parse(record: Path) -> tuple[tuple[Entry, ...], list] | None:
    data = cache.kept_bytes(record)
    if data is None:
        return None
    try:
        rows, values = marshal.loads(data)
        entries = tuple(Entry(*row) for row in rows)
    except (ValueError, EOFError, TypeError):  # truncated or of another shape: parsed again, kept anew
        return None
    if not isinstance(values, list) or len(values) != len(entries):
        return None
    with contextlib.suppress(FileNotFoundError):  # another process may have just dropped it: this run still has it
        os.utime(record)  # used now: kept among the newest
    return entries, values


def _keep_parse(record: Path, entries: tuple[Entry, ...], values: list) -> None:
    try:
        data = marshal.dumps(([dataclasses.astuple(entry) for entry in entries], values))
    except ValueError:  # a value marshal cannot hold (a YAML timestamp): parsed again each time
        return
    cache.publish_bytes(record, data)
    cache.keep_newest(record.parent, "*.marshal", _PARSED_KEPT)


def _entry(rel_path: str, text: str, bom: int, line_ends: list[int], node: yaml.Node, value: object) -> Entry:
    where = f"{rel_path}:{node.start_mark.line + 1}"
    if not isinstance(value, dict):
        raise BadInput(f"{where}: an item that is not a mapping (torchgen expects `func:` and its keys); fix the file")
    func = value.get("func")
    match = _FUNC_NAME.match(func) if isinstance(func, str) else None
    if match is None:
        raise BadInput(f"{where}: an entry without a `func: name.overload(...)` (torchgen requires one); fix the file")
    end = bom + content_end(node, text[bom:] if bom else text)
    end_line = bisect.bisect_right(line_ends, end - 1) + 1  # the line after the one holding the last character
    return Entry(match.group("name"), node.start_mark.line, end_line, bom + node.start_mark.index, end, node.start_mark.column)


def _refuse_duplicate_names(rel_path: str, entries: tuple[Entry, ...]) -> None:
    first: dict[str, Entry] = {}
    for entry in entries:
        if entry.name in first:
            raise BadInput(
                f"{rel_path}:{entry.first_line + 1}: a second entry {entry.name} (the first is at line "
                f"{first[entry.name].first_line + 1}); an overload name must be unique: remove or rename one and run again"
            )
        first[entry.name] = entry


def content_end(node, text: str) -> int:
    """Just after the node's last character: a block collection's last child, a scalar without trailing blanks.

    Works on PyYAML's and ruamel's nodes alike (both mark character offsets). An alias composes to the node it
    names, which lies earlier in the file: a last child before its key (or the item before it) is one, and ends
    where the alias `*name` written after that key (or item) ends."""
    if isinstance(node, (yaml.MappingNode, ruamel_nodes.MappingNode)) and not node.flow_style and node.value:
        key, value = node.value[-1]
        if value.start_mark.index < key.end_mark.index:
            return _alias_end(text, key.end_mark.index)
        return max(content_end(key, text), content_end(value, text))
    if isinstance(node, (yaml.SequenceNode, ruamel_nodes.SequenceNode)) and not node.flow_style and node.value:
        previous = content_end(node.value[-2], text) if len(node.value) > 1 else node.start_mark.index
        if node.value[-1].start_mark.index < previous:
            return _alias_end(text, previous)
        return content_end(node.value[-1], text)
    start, end = node.start_mark.index, node.end_mark.index
    return start + len(text[start:end].rstrip())  # a block scalar ends after its line breaks


def _alias_end(text: str, after: int) -> int:
    """The end of the first alias written after AFTER (past the `:` or `-` indicators, blanks and comments)."""
    found = _ALIAS.match(text, after)
    return found.end() if found else after


class _Loader(_C_LOADER):
    """torchgen's loader: the C parser, and a key twice in one mapping is an error (torchgen's YamlLoader)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            # a scalar key by its resolved tag and text (cheap); torchgen compares constructed keys: the same verdict
            key = (key_node.tag, key_node.value) if isinstance(key_node, yaml.ScalarNode) else self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(key_node.value, seen[key], key_node.start_mark.line)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key: object, first_line: int, line: int) -> None:
        super().__init__(key)
        self.key, self.first_line, self.line = key, first_line, line


def _compose(rel_path: str, text: str) -> tuple[yaml.Node | None, object]:
    """The document's node tree and its value; a syntax error or a duplicate key names file:line."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        return node, loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as error:
        raise _syntax_error(rel_path, error)
    except _DuplicateKey as error:
        raise BadInput(
            f"{rel_path}:{error.line + 1}: the key {error.key!r} a second time in one mapping (first at line "
            f"{error.first_line + 1}); torchgen refuses a duplicate key: remove one and run again"
        )
    finally:
        loader.dispose()


def _syntax_error(rel_path: str, error: yaml.YAMLError) -> BadInput:
    mark = getattr(error, "problem_mark", None)
    where = f"{rel_path}:{mark.line + 1}" if mark else rel_path
    return BadInput(f"{where}: malformed YAML: {getattr(error, 'problem', error)}; fix the file and run again")


def split_lines(text: str) -> tuple[str, ...]:
    """Lines ending in \\n only, as byte offsets count them (str.splitlines knows more breaks)."""
    return tuple(re.findall(r"[^\n]*\n|[^\n]+$", text))


def parse(rel_path: str, text: str) -> object:
    """Parse as torchgen does; a syntax error or a duplicate key names file:line."""
    return _compose(rel_path, text)[1]


def split_entries(rel_path: str, lines: tuple[str, ...], head: re.Pattern[str]) -> list[Entry]:
    """Top-level `- ` items split lexically, each named by HEAD (derivatives.yaml)."""
    starts = [i for i, line in enumerate(lines) if line.startswith("- ")]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    entries = []
    for index, first in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        while end > first + 1 and _is_gap_line(lines[end - 1]):
            end -= 1
        match = head.match(lines[first])
        if match is None:
            raise BadInput(f"{rel_path}:{first + 1}: an item that does not start with the expected key; fix the file")
        entries.append(Entry(match.group("name"), first, end, offsets[first] + 2, offsets[end] - lines[end - 1].endswith("\n"), 2))
    return entries


def _is_gap_line(line: str) -> bool:
    """Blank lines and column-0 comments between items belong to no entry."""
    return not line.strip() or line.startswith("#")


class _EntryComposer(Composer):
    """Composes one entry alone: an alias of an anchor in another entry stands as a scalar where the alias is
    written (only the composed nodes' spans are read; the values are the whole file's)."""

    def compose_node(self, parent, index):
        if self.parser.check_event(AliasEvent) and self.parser.peek_event().anchor not in self.anchors:
            event = self.parser.get_event()
            return ruamel_nodes.ScalarNode("tag:yaml.org,2002:str", f"*{event.anchor}", event.start_mark, event.end_mark)
        return super().compose_node(parent, index)


def parse_entry(doc: NativeYaml, entry: Entry) -> ParsedEntry:
    """Compose one entry with ruamel.yaml; map each key to its character span in the file."""
    source = doc.entry_source(entry)
    parser = YAML(typ="rt")
    parser.Composer = _EntryComposer
    try:
        node = parser.compose(source)
    except RuamelError as error:
        problem = " ".join(str(getattr(error, "problem", None) or error).split())
        raise BadInput(f"{doc.rel_path}:{entry.first_line + 1}: cannot parse {entry.name}: {problem}; fix the entry and run again") from None
    shift = entry.start - entry.column  # a character of SOURCE at i is the file's i + shift
    spans = {
        str(key.value): KeySpan(
            str(key.value), key.start_mark.index + shift, content_end(value, source) + shift, entry.first_line + key.start_mark.line
        )
        for key, value in node.value
    }
    return ParsedEntry(entry, spans, dict(doc.values[doc.entries.index(entry)]), bool(node.flow_style))


@dataclass(frozen=True)
class GroupIndex:
    """A structured group as indices into `NativeYaml.entries` (and `.values`)."""

    out: int
    delegates: tuple[int, ...]


def entries_named(doc: NativeYaml, op: str) -> list[int]:
    """The indices of OP's entries (`op.*` and `op_.*`); an overload name or an op the yaml lacks is bad input."""
    if "." in op:
        raise BadInput(f"{op!r} is an overload name; pass the op name {op.split('.')[0]!r}, its overloads are found from {doc.rel_path}")
    named = [*doc.indices_by_base.get(op, []), *doc.indices_by_base.get(op + "_", [])]
    if not named:
        bases = sorted({e.base.rstrip("_") for e in doc.entries})
        close = difflib.get_close_matches(op, bases, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise BadInput(f"unknown op {op!r}: no entry named {op}.* in {doc.rel_path}{hint}")
    return named


def find_groups(doc: NativeYaml, op: str) -> list[GroupIndex]:
    """The structured groups whose out entry is `op.*`, validated from the loader's values (fast)."""
    named = entries_named(doc, op)
    outs = [i for i in named if doc.entries[i].base == op and doc.values[i].get("structured") is True]
    if not outs:
        manual = [doc.entries[i].name for i in named if doc.values[i].get("manual_cpp_binding") is True]
        why = f"{', '.join(manual)} already have `manual_cpp_binding`" if manual else "none has `structured: True`"
        raise NotBypassable(
            f"op {op!r} has no structured kernel in {doc.rel_path} "
            f"(entries {', '.join(doc.entries[i].name for i in named)}; {why}); only structured ops can be bypassed",
            "already manual_cpp_binding" if manual else "not structured",
        )
    groups = []
    for out in outs:
        groups.append(GroupIndex(out, tuple(doc.delegates_of.get(doc.entries[out].name, []))))
        _check_group(doc, op, groups[-1])
    return groups


def _check_group(doc: NativeYaml, op: str, group: GroupIndex) -> None:
    out, out_values = doc.entries[group.out], doc.values[group.out]
    for index in (*group.delegates, group.out):
        entry, values = doc.entries[index], doc.values[index]
        if values.get("manual_cpp_binding") is True:  # a guarded bypass keeps the group structured
            raise NotBypassable(
                f"{doc.rel_path}:{entry.first_line + 1}: {entry.name} already has `manual_cpp_binding`; "
                f"op {op!r} is bypassed already (`codemod revert {op}` undoes it)",
                "already manual_cpp_binding",
            )
        unknown = sorted(set(values) - KNOWN_KEYS)
        if unknown:
            raise NotBypassable(
                f"{doc.rel_path}:{entry.first_line + 1}: {entry.name} has keys the tool does not understand: "
                f"{', '.join(unknown)}; it will not guess how they interact with a bypass",
                f"unknown keys {', '.join(unknown)}",
            )
    if not any(doc.entries[i].base == op for i in group.delegates):
        raise NotBypassable(
            f"{doc.rel_path}:{out.first_line + 1}: no functional entry ({op} or {op}.<overload>) delegates to {out.name}; "
            "the bypass writes the functional API from it",
            "no functional variant",
        )
    if cpu_kernel(out_values) is None and "ufunc_inner_loop" not in out_values:
        raise NotBypassable(
            f"{doc.rel_path}:{out.first_line + 1}: {out.name} has no CPU kernel in its `dispatch`; the bypass calls the CPU kernel",
            "no CPU kernel",
        )


def cpu_kernel(values: dict) -> str | None:
    """The kernel an entry's `dispatch` names for CPU (`CPU, CUDA: mul_out` -> mul_out)."""
    for keys, kernel in (values.get("dispatch") or {}).items():
        if "CPU" in (key.strip() for key in str(keys).split(",")):
            return kernel
    return None


def op_groups(doc: NativeYaml, op: str) -> list[OpGroup]:
    """The op's structured groups, each entry parsed round-trip for its key spans."""
    return [
        OpGroup(parse_entry(doc, doc.entries[g.out]), tuple(parse_entry(doc, doc.entries[i]) for i in g.delegates))
        for g in find_groups(doc, op)
    ]
