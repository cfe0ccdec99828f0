"""YAML edits: the op's entries become `manual_cpp_binding`; its formulas go.

Edits are character spans of the entries' keys, as the parser located them,
so any layout torchgen accepts is edited in place (block or flow style, any
indentation or key order, comments and blank lines inside a value). The result
is re-parsed and compared entry by entry, so a diff that touched anything but
the op's entries cannot leave the planner.
"""
from __future__ import annotations

import re

from codemod.model.edits import Edit, apply_edits, line_starts
from codemod.model.errors import BadInput
from codemod.model.native_yaml import (
    STRUCTURED_KEYS,
    KeySpan,
    NativeYaml,
    OpGroup,
    ParsedEntry,
    line_end,
    load,
    parse,
    split_entries,
    split_lines,
)
from codemod.model.tree import DERIVATIVES

MANUAL_KEY = "manual_cpp_binding"
MANUAL_ITEM = f"{MANUAL_KEY}: True"
DERIVATIVES_ENTRY = re.compile(r"^- name:\s*(?P<name>[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)\s*\(")


def native_functions_edits(doc: NativeYaml, groups: list[OpGroup], guarded: bool = False) -> tuple[list[Edit], NativeYaml]:
    """Every member becomes `manual_cpp_binding`; unless GUARDED, it also loses its structured keys.
    Returns the edits and the file as they leave it (parsed once, to check them)."""
    edits = []
    for group in groups:
        for member in group.members:
            edits.extend(_add_manual(doc, member) if guarded else _make_manual(doc, member))
    return edits, _check_only_members_changed(doc, groups, edits, () if guarded else STRUCTURED_KEYS)


def _edit(doc: NativeYaml, start: int, end: int, text: str, why: str) -> Edit:
    return Edit(doc.rel_path, doc.byte_offset(start), doc.byte_offset(end), text, why)


def _add_manual(doc: NativeYaml, member: ParsedEntry) -> list[Edit]:
    """The key after the entry's last key (and its block), in the entry's own style."""
    last = max(member.keys.values(), key=lambda span: span.start)
    why = f"{member.name}: add {MANUAL_KEY}, keep the structured kernel"
    if member.flow:
        return [_edit(doc, last.end, last.end, f", {MANUAL_ITEM}", why)]
    at = _block_end(doc, member, last)
    line = f"{' ' * member.entry.column}{MANUAL_ITEM}"
    return [_edit(doc, at, at, f"{line}\n" if doc.text[at - 1] == "\n" else f"\n{line}", why)]


def _make_manual(doc: NativeYaml, member: ParsedEntry) -> list[Edit]:
    """The first structured key (in written order) becomes the manual key in place; the others go."""
    spans = list(member.keys.values())
    removed = [span for span in spans if span.key in STRUCTURED_KEYS]
    first, rest = removed[0], removed[1:]
    why = f"{member.name}: drop {', '.join(span.key for span in removed)}; add {MANUAL_KEY}"
    if member.flow:
        edits = [_edit(doc, first.start, first.end, MANUAL_ITEM, why)]
        for run in _runs(spans, rest):  # an item and its comma go together
            after = spans.index(run[-1]) + 1
            start, end = (run[0].start, spans[after].start) if after < len(spans) else (spans[spans.index(run[0]) - 1].end, run[-1].end)
            edits.append(_edit(doc, start, end, "", f"{member.name}: drop {', '.join(span.key for span in run)}"))
        return edits
    end = _block_end(doc, member, first)
    line_break = "\n" if doc.text[end - 1] == "\n" else ""
    edits = [_edit(doc, first.start, end, MANUAL_ITEM + line_break, why)]
    for span in rest:
        line_start = doc.text.rfind("\n", 0, span.start) + 1
        edits.append(_edit(doc, line_start, _block_end(doc, member, span), "", f"{member.name}: drop {span.key}"))
    return edits


def _runs(spans: list[KeySpan], chosen: list[KeySpan]) -> list[list[KeySpan]]:
    """CHOSEN grouped into runs of neighbours in SPANS."""
    runs: list[list[KeySpan]] = []
    for span in chosen:
        if runs and spans.index(runs[-1][-1]) + 1 == spans.index(span):
            runs[-1].append(span)
        else:
            runs.append([span])
    return runs


def _block_end(doc: NativeYaml, member: ParsedEntry, span: KeySpan) -> int:
    """Just after the key's last line: its value's last line (and trailing comment), then the comment lines
    indented deeper than the entry's keys that follow it, which belong to its block."""
    end = line_end(doc.text, span.end)
    while end < len(doc.text):
        following = doc.text[end + 1 : line_end(doc.text, end + 1)]
        body = following.lstrip(" ")
        if not body.startswith("#") or len(following) - len(body) <= member.entry.column:
            break
        end = line_end(doc.text, end + 1)
    return min(end + 1, len(doc.text))


def _check_only_members_changed(doc: NativeYaml, groups: list[OpGroup], edits: list[Edit], removed: tuple[str, ...]) -> NativeYaml:
    """Every entry but the members parses to the same value; each member loses exactly REMOVED and gains the key."""
    members = {m.name for g in groups for m in g.members}
    planner_bug = f"{doc.rel_path}: the planned edit of the entries {sorted(members)} would %s; please report this with the file"
    try:
        after = load(doc.rel_path, apply_edits(doc.text.encode(), edits).decode())
    except BadInput as error:
        raise BadInput(planner_bug % f"not parse ({error})")
    expected = []
    for entry, values in zip(doc.entries, doc.values):
        if entry.name in members:
            values = {k: v for k, v in values.items() if k not in removed} | {MANUAL_KEY: True}
        expected.append(values)
    if expected != after.values:
        raise BadInput(planner_bug % "change more than those entries")
    return after


def derivatives_edits(text: str, overloads: tuple[str, ...]) -> tuple[list[Edit], list[str]]:
    """Remove the formula entries of these overloads; return the edits and the names removed."""
    parse(DERIVATIVES, text)
    lines = split_lines(text)
    starts = line_starts(text.encode())
    edits, removed = [], []
    for entry in split_entries(DERIVATIVES, lines, DERIVATIVES_ENTRY):
        if entry.name not in overloads:
            continue
        end = entry.end_line
        while end < len(lines) and not lines[end].strip():
            end += 1  # the blank lines after it, not the comment that heads the next entry
        edits.append(Edit(DERIVATIVES, starts[entry.first_line], starts[end], "", f"remove the formula of {entry.name}"))
        removed.append(entry.name)
    return edits, removed
