"""Parse native_functions.yaml once and locate an op's structured groups.

The whole file is parsed once with the same C loader torchgen uses (fast, and
what torchgen accepts is what matters); the op's own entries are then parsed
with ruamel.yaml's round-trip loader, whose line marks give each key's span.
Entries are split lexically at top-level `- ` items so that every byte between
them (comments, blank lines) is known and left alone.
"""
from __future__ import annotations

import difflib
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelError

from codemod.model.errors import BadInput

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
# What makes an entry structured (torchgen's ufunc codegen needs `structured`); a bypass removes them all.
STRUCTURED_KEYS = ("structured", "structured_inherits", "structured_delegate", "dispatch", "ufunc_inner_loop")
# Keys that only mean something for a structured kernel the tool cannot carry over.
UNSUPPORTED_STRUCTURED_KEYS = {
    "precomputed": "its meta function returns precomputed values through generated structs",
}

_FUNC_LINE = re.compile(r"^- func:\s*(?P<name>[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)\s*\(")


@dataclass(frozen=True)
class KeySpan:
    key: str
    first_line: int  # 0-based, in the file
    end_line: int  # exclusive: the key line plus its deeper-indented block


@dataclass(frozen=True)
class Entry:
    """One `- func:` item: its overload name and the lines it occupies."""

    name: str  # e.g. "mul.Tensor"
    first_line: int  # 0-based
    end_line: int  # exclusive, trailing blank and column-0 comment lines excluded

    @property
    def base(self) -> str:  # "mul_" for "mul_.Tensor"
        return self.name.split(".")[0]


@dataclass(frozen=True)
class ParsedEntry:
    entry: Entry
    keys: dict[str, KeySpan]
    values: dict[str, object]

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


@dataclass(frozen=True)
class NativeYaml:
    rel_path: str
    text: str
    lines: tuple[str, ...]  # with line endings
    entries: tuple[Entry, ...]
    values: list[dict]  # the loader's entries, in the order of `entries`

    def entry_text(self, entry: Entry) -> str:
        return "".join(self.lines[entry.first_line : entry.end_line])

    def by_name(self) -> dict[str, Entry]:
        return {e.name: e for e in self.entries}

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


def op_name(base: str) -> str:
    """The op an entry belongs to: "mul_" -> "mul"; dunder names ("__iand__") are their own op."""
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


def load(rel_path: str, text: str) -> NativeYaml:
    values = parse(rel_path, text)
    lines = split_lines(text)
    entries = tuple(split_entries(rel_path, lines, _FUNC_LINE))
    if not isinstance(values, list) or len(values) != len(entries):
        raise BadInput(f"{rel_path}: expected a list of `- func:` entries at column 0; fix the file's layout")
    return NativeYaml(rel_path, text, lines, entries, values)


def split_lines(text: str) -> tuple[str, ...]:
    """Lines ending in \\n only, as byte offsets count them (str.splitlines knows more breaks)."""
    return tuple(re.findall(r"[^\n]*\n|[^\n]+$", text))


def parse(rel_path: str, text: str) -> object:
    """Parse with the C loader torchgen uses; a syntax error names file:line."""
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{rel_path}:{mark.line + 1}" if mark else rel_path
        raise BadInput(f"{where}: malformed YAML: {getattr(error, 'problem', error)}; fix the file and run again")


def split_entries(rel_path: str, lines: tuple[str, ...], head: re.Pattern[str]) -> list[Entry]:
    starts = [i for i, line in enumerate(lines) if line.startswith("- ")]
    entries = []
    for index, first in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        while end > first + 1 and _is_gap_line(lines[end - 1]):
            end -= 1
        match = head.match(lines[first])
        if match is None:
            raise BadInput(f"{rel_path}:{first + 1}: an item that does not start with the expected key; fix the file")
        entries.append(Entry(match.group("name"), first, end))
    return entries


def _is_gap_line(line: str) -> bool:
    """Blank lines and column-0 comments between items belong to no entry."""
    return not line.strip() or line.startswith("#")


def parse_entry(doc: NativeYaml, entry: Entry) -> ParsedEntry:
    """Round-trip parse one entry; map each key to its line span in the file."""
    try:
        items = YAML(typ="rt").load(doc.entry_text(entry))
    except RuamelError as error:
        raise BadInput(f"{doc.rel_path}:{entry.first_line + 1}: cannot parse {entry.name}: {error}")
    mapping = items[0]
    key_lines = [(key, mapping.lc.key(key)) for key in mapping]
    spans = {}
    for key, (line, column) in key_lines:
        first = entry.first_line + line
        end = first + 1
        while end < entry.end_line and _continues_block(doc.lines[end], column):
            end += 1
        spans[key] = KeySpan(key, first, end)
    return ParsedEntry(entry, spans, {k: _plain(v) for k, v in mapping.items()})


def _continues_block(line: str, key_column: int) -> bool:
    stripped = line.lstrip(" ")
    return bool(stripped.strip()) and len(line) - len(stripped) > key_column


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class NotBypassable(BadInput):
    """The op exists but the tool cannot bypass it; `reason` is the short form `codemod ops` lists."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class GroupIndex:
    """A structured group as indices into `NativeYaml.entries` (and `.values`)."""

    out: int
    delegates: tuple[int, ...]


def find_groups(doc: NativeYaml, op: str) -> list[GroupIndex]:
    """The structured groups whose out entry is `op.*`, validated from the loader's values (fast)."""
    if "." in op:
        raise BadInput(f"{op!r} is an overload name; pass the op name {op.split('.')[0]!r}, its overloads are found from {doc.rel_path}")
    named = [*doc.indices_by_base.get(op, []), *doc.indices_by_base.get(op + "_", [])]
    if not named:
        bases = sorted({e.base.rstrip("_") for e in doc.entries})
        close = difflib.get_close_matches(op, bases, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise BadInput(f"unknown op {op!r}: no entry named {op}.* in {doc.rel_path}{hint}")
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
        for key, why in UNSUPPORTED_STRUCTURED_KEYS.items():
            if key in values:
                raise NotBypassable(
                    f"{doc.rel_path}:{_key_line(doc, entry, key) + 1}: {entry.name} has `{key}`: {why}; "
                    f"op {op!r} cannot be bypassed by this tool",
                    f"`{key}`",
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


def _key_line(doc: NativeYaml, entry: Entry, key: str) -> int:
    for line in range(entry.first_line, entry.end_line):
        if re.match(rf"\s+{key}:", doc.lines[line]):
            return line
    return entry.first_line


def op_groups(doc: NativeYaml, op: str) -> list[OpGroup]:
    """The op's structured groups, each entry parsed round-trip for its key spans."""
    return [
        OpGroup(parse_entry(doc, doc.entries[g.out]), tuple(parse_entry(doc, doc.entries[i]) for i in g.delegates))
        for g in find_groups(doc, op)
    ]
