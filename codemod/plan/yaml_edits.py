"""YAML edits: the op's entries become `manual_cpp_binding`; its formulas go.

Edits are whole-line spans found by the locator; the result is re-parsed and
compared entry by entry, so a diff that touched anything but the op's entries
cannot leave the planner.
"""
from __future__ import annotations

import re

from codemod.model.edits import Edit, apply_edits, line_starts
from codemod.model.errors import BadInput
from codemod.model.native_yaml import STRUCTURED_KEYS, NativeYaml, OpGroup, ParsedEntry, parse, split_entries, split_lines
from codemod.model.tree import DERIVATIVES

MANUAL_KEY = "manual_cpp_binding"
DERIVATIVES_ENTRY = re.compile(r"^- name:\s*(?P<name>[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)\s*\(")


def native_functions_edits(doc: NativeYaml, groups: list[OpGroup], guarded: bool = False) -> list[Edit]:
    """Every member becomes `manual_cpp_binding`; unless GUARDED, it also loses its structured keys."""
    starts = line_starts(doc.text.encode())
    edits = []
    for group in groups:
        for member in group.members:
            edits.extend(_add_manual(doc, member, starts) if guarded else _make_manual(doc, member, starts))
    _check_only_members_changed(doc, groups, edits, () if guarded else STRUCTURED_KEYS)
    return edits


def _add_manual(doc: NativeYaml, member: ParsedEntry, starts: list[int]) -> list[Edit]:
    """A key line after the entry's last key block (not after a comment that heads the next entry)."""
    func_line = doc.lines[member.entry.first_line]
    indent = " " * (len(func_line) - len(func_line.lstrip("- ")))
    at = starts[max(span.end_line for span in member.keys.values())]
    return [Edit(doc.rel_path, at, at, f"{indent}{MANUAL_KEY}: True\n", f"{member.name}: add {MANUAL_KEY}, keep the structured kernel")]


def _make_manual(doc: NativeYaml, member: ParsedEntry, starts: list[int]) -> list[Edit]:
    spans = sorted((member.keys[k] for k in STRUCTURED_KEYS if k in member.keys), key=lambda s: s.first_line)
    first_line = doc.lines[spans[0].first_line]
    indent = first_line[: len(first_line) - len(first_line.lstrip(" "))]
    edits = []
    for index, span in enumerate(spans):
        replacement = f"{indent}{MANUAL_KEY}: True\n" if index == 0 else ""
        removed = ", ".join(k for k in STRUCTURED_KEYS if k in member.keys)
        why = f"{member.name}: drop {removed}; add {MANUAL_KEY}" if index == 0 else f"{member.name}: drop {span.key}"
        edits.append(Edit(doc.rel_path, starts[span.first_line], starts[span.end_line], replacement, why))
    return edits


def _check_only_members_changed(doc: NativeYaml, groups: list[OpGroup], edits: list[Edit], removed: tuple[str, ...]) -> None:
    """Every entry but the members parses to the same value; each member loses exactly REMOVED and gains the key."""
    after = parse(doc.rel_path, apply_edits(doc.text.encode(), edits).decode())
    members = {m.name for g in groups for m in g.members}
    expected = []
    for entry in doc.values:
        if entry["func"].split("(")[0] in members:
            entry = {k: v for k, v in entry.items() if k not in removed}
            entry[MANUAL_KEY] = True
        expected.append(entry)
    if expected != after:
        raise BadInput(f"{doc.rel_path}: the planned edit would change more than the entries {sorted(members)}; please report this with the file")


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
