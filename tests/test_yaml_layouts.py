"""What torchgen accepts, we accept (issue 13, item 4).

mul's three entries in a copy of target_tree/ are rewritten in generated layouts (indentation, key order,
quoting, block or flow style, comments and blank lines anywhere), some of them broken on purpose. The judge
is the installed torchgen's own loader (`parse_native_yaml`): a layout it accepts must be bypassed, the
result must load in torchgen with only mul's entries changed, and revert must give back every byte; a
layout it refuses must exit 2 with torchgen's reason, writing nothing.
"""
from __future__ import annotations

import dataclasses
import json
import marshal
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given
from hypothesis import strategies as st
from torchgen.gen import parse_native_yaml

from codemod.model import native_yaml
from codemod.model.errors import BadInput
from codemod.model.tree import NATIVE_FUNCTIONS, TAGS
from tests import sampling
from tests.conftest import TARGET_TREE, run_codemod, snapshot

MEMBERS = ("mul.Tensor", "mul_.Tensor", "mul.out")
STRUCTURED = {"structured", "structured_inherits", "structured_delegate", "dispatch"}
PRISTINE = (TARGET_TREE / NATIVE_FUNCTIONS).read_text()
PRISTINE_DOC = native_yaml.load(NATIVE_FUNCTIONS, PRISTINE)
BREAKAGES = ("duplicate key", "tab indent", "dispatch line dedented", "unclosed flow mapping")


@dataclasses.dataclass(frozen=True)
class Layout:
    indent: int = 2  # the column of an entry's keys
    dash_alone: bool = False  # `-` on its own line, the keys below it
    key_order: tuple[int, ...] = ()  # a permutation of the entry's keys (empty: as written)
    func_quote: str = ""  # "", "'" or '"'
    dispatch_style: str = "block"  # block, flow, flow-multiline
    dispatch_comment: bool = False  # a comment line inside the dispatch block
    dispatch_blank: bool = False  # a blank line inside the dispatch block
    trailing_comments: bool = False  # `# ...` after every scalar value
    comment_between_keys: bool = False
    blank_between_keys: bool = False
    tags_style: str = "as written"  # as written, block, flow
    flow_entry: bool = False  # the whole entry as `{func: ..., ...}` over several lines
    breakage: str = ""  # one of BREAKAGES, meant to break the layout (torchgen judges whether it does)
    guarded: bool = False  # `bypass --guarded`: the key is added, nothing removed
    document_markers: bool = False  # the file opens with `%YAML 1.1` and `---` and closes with `...`
    bom: bool = False  # the file starts with a UTF-8 byte order mark
    tags_anchor: str = ""  # "another entry": mul's tags are `*t`, anchored on an entry above; "first member": on mul.Tensor's


def _scalar(value: object, quote: str, flow: bool) -> str:
    if value is True:
        return "True"
    text = str(value)
    if quote == '"' or (flow and any(c in text for c in ",[]{}#:")):
        return json.dumps(text)
    return f"'{text}'" if quote == "'" else text


def _value_lines(key: str, value: object, layout: Layout, indent: str, node: str) -> list[str]:
    """The lines of `key: value` in block style, the first without its indentation. NODE: "&t" anchors the tags,
    "*t" writes them as an alias."""
    comment = "  # a trailing comment, not ASCII: é" if layout.trailing_comments else ""
    if key == "func":
        return [f"func: {_scalar(value, layout.func_quote, False)}{comment}"]
    if key == "dispatch":
        items = [(_scalar(k, "", layout.dispatch_style != "block"), _scalar(v, "", layout.dispatch_style != "block")) for k, v in value.items()]
        if layout.dispatch_style == "flow":
            return ["dispatch: {" + ", ".join(f"{k}: {v}" for k, v in items) + "}" + comment]
        if layout.dispatch_style == "flow-multiline":
            return ["dispatch: {", *(f"{indent}    {k}: {v}," for k, v in items), f"{indent}  }}{comment}"]
        inner = [f"{indent}  {k}: {v}{comment}" for k, v in items]
        if layout.dispatch_comment:
            inner.insert(len(inner) // 2, f"{indent}  # a comment inside dispatch, not ASCII: ü")
        if layout.dispatch_blank:
            inner.insert(1, "")
        if layout.breakage == "dispatch line dedented":
            inner[-1] = inner[-1][1:]
        return ["dispatch:", *inner]
    if key == "tags" and node == "*t":
        return [f"tags: *t{comment}"]
    anchor = f" {node}" if key == "tags" else ""
    if key == "tags" and isinstance(value, list) and layout.tags_style == "block":
        return [f"tags:{anchor}", *(f"{indent}- {tag}" for tag in value)]
    if key == "tags" and layout.tags_style == "flow":
        tags = value if isinstance(value, list) else [value]
        return [f"tags:{anchor} [{', '.join(tags)}]{comment}"]
    if anchor:
        return [f"tags:{anchor} " + (f"[{', '.join(value)}]" if isinstance(value, list) else str(value)) + comment]
    if isinstance(value, list):
        return [f"{key}: [{', '.join(value)}]{comment}"]
    return [f"{key}: {_scalar(value, '', False)}{comment}"]


def _flow_item(key: str, value: object, layout: Layout, node: str) -> str:
    if key == "tags" and node:
        return "tags: *t" if node == "*t" else f"tags: &t {json.dumps(value)}"
    if isinstance(value, dict):
        return f"{key}: {{" + ", ".join(f"{_scalar(k, '', True)}: {_scalar(v, '', True)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return f"{key}: [{', '.join(value)}]"
    return f"{key}: {_scalar(value, layout.func_quote if key == 'func' else '', True)}"


def render_entry(values: dict, layout: Layout, node: str = "") -> str:
    keys = list(values)
    if layout.key_order:
        keys = [keys[i] for i in layout.key_order if i < len(keys)]
    if layout.breakage == "duplicate key":
        keys.append("dispatch" if "dispatch" in keys else "structured_delegate")
    if layout.flow_entry:
        body = ",\n   ".join(_flow_item(key, values[key], layout, node) for key in keys)
        return "- {" + body + ("\n" if layout.breakage == "unclosed flow mapping" else "}\n")
    indent = " " * layout.indent
    lines: list[str] = []
    for number, key in enumerate(keys):
        if number and layout.comment_between_keys:
            lines.append(f"{indent}# a comment between keys")
        if number and layout.blank_between_keys:
            lines.append("")
        block = _value_lines(key, values[key], layout, indent, node)
        lines += [indent + block[0], *block[1:]]
    if layout.dash_alone:
        lines.insert(0, "-")
    else:
        lines[0] = "-" + lines[0][1:]
    if layout.breakage == "tab indent":
        lines[1] = "\t" + lines[1].lstrip(" ")
    if layout.breakage == "unclosed flow mapping":
        lines.append(f"{indent}variants: {{function")
    return "\n".join(lines) + "\n"


def variant_text(layout: Layout) -> str:
    """target_tree's yaml with mul's entries in LAYOUT; every other byte as it is (but the anchor LAYOUT may put on
    the first tags of the file)."""
    by_name = PRISTINE_DOC.by_name()
    pieces, cursor = [], 0
    for number, name in enumerate(MEMBERS):
        entry = by_name[name]
        start = sum(len(line) for line in PRISTINE_DOC.lines[: entry.first_line])
        end = sum(len(line) for line in PRISTINE_DOC.lines[: entry.end_line])
        values = PRISTINE_DOC.values[PRISTINE_DOC.entries.index(entry)]
        node = "&t" if layout.tags_anchor == "first member" and number == 0 else "*t" if layout.tags_anchor else ""
        pieces += [PRISTINE[cursor:start], render_entry(values, layout, node)]
        cursor = end
    text = "".join(pieces) + PRISTINE[cursor:]
    if layout.tags_anchor == "another entry":
        text = text.replace("\n  tags: ", "\n  tags: &t ", 1)
    text = f"%YAML 1.1\n---\n{text}...\n" if layout.document_markers else text
    return "\ufeff" + text if layout.bom else text


def torchgen_verdict(tree: Path) -> Exception | None:
    """None when the installed torchgen's own loader accepts the tree's yaml, else what it raised."""
    try:
        parse_native_yaml(str(tree / NATIVE_FUNCTIONS), str(tree / TAGS))
    except Exception as error:  # noqa: BLE001 (torchgen raises YAMLError or AssertionError, both are verdicts)
        return error
    return None


layouts = st.builds(
    Layout,
    indent=st.sampled_from([2, 3, 4, 6]),
    dash_alone=st.booleans(),
    key_order=st.permutations(range(6)).map(tuple) | st.just(()),
    func_quote=st.sampled_from(["", "'", '"']),
    dispatch_style=st.sampled_from(["block", "flow", "flow-multiline"]),
    dispatch_comment=st.booleans(),
    dispatch_blank=st.booleans(),
    trailing_comments=st.booleans(),
    comment_between_keys=st.booleans(),
    blank_between_keys=st.booleans(),
    tags_style=st.sampled_from(["as written", "block", "flow"]),
    flow_entry=st.booleans(),
    breakage=st.sampled_from(["", "", "", "", *BREAKAGES]),
    guarded=st.booleans(),
    document_markers=st.booleans(),
    bom=st.booleans(),
    tags_anchor=st.sampled_from(["", "", "another entry", "first member"]),
)


# The layouts issue 13 found refused, each on its own:
ISSUE_LAYOUTS = (
    Layout(dispatch_comment=True),
    Layout(dispatch_blank=True),
    Layout(dispatch_style="flow-multiline"),
    Layout(func_quote="'"),
    Layout(func_quote='"'),
    Layout(key_order=(2, 0, 1, 3, 4, 5)),
    Layout(indent=4),
    Layout(flow_entry=True),
    Layout(breakage="duplicate key"),
    Layout(flow_entry=True, guarded=True),
    Layout(indent=4, dash_alone=True, guarded=True),
    Layout(document_markers=True, trailing_comments=True),
    # Issue 18, item 7: torchgen accepts a byte order mark, and an alias of another entry's anchored tags
    Layout(bom=True),
    Layout(tags_anchor="another entry"),
    Layout(tags_anchor="first member", tags_style="block", guarded=True),
    Layout(tags_anchor="another entry", flow_entry=True, bom=True, document_markers=True),
)


def layout_name(layout: Layout) -> str:
    """The fields LAYOUT sets otherwise than the default."""
    return ",".join(f"{f.name}={getattr(layout, f.name)!r}" for f in dataclasses.fields(layout) if getattr(layout, f.name) != f.default)


@sampling.parametrize("layout", ISSUE_LAYOUTS, 2, ids=layout_name)
def test_a_layout_the_issues_named_is_judged_as_torchgen_judges_it(layout: Layout) -> None:
    """Two of the issues' layouts each run (all of them under `benchmarks/exhaustive.py`)."""
    bypassed_and_reverted_or_refused_as_torchgen(layout)


@sampling.examples(3, 100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts)
def test_a_layout_torchgen_accepts_is_bypassed_and_reverted_one_it_refuses_exits_2(layout: Layout) -> None:
    refusal = bypassed_and_reverted_or_refused_as_torchgen(layout)
    event("refused by torchgen" if refusal else "accepted by torchgen")


def bypassed_and_reverted_or_refused_as_torchgen(layout: Layout) -> Exception | None:
    """mul's entries in LAYOUT: bypassed, only they changed, and reverted byte for byte, when torchgen accepts the
    yaml; when it refuses it (its refusal returned), `bypass` exits 2 with its reason and writes nothing."""
    with tempfile.TemporaryDirectory(prefix="codemod-layout-") as scratch:
        tree = Path(scratch) / "tree"
        shutil.copytree(TARGET_TREE, tree)
        (tree / NATIVE_FUNCTIONS).write_text(variant_text(layout))
        before = snapshot(tree)
        refusal = torchgen_verdict(tree)
        bypass = run_codemod("bypass", "mul", "--tree", str(tree), "--no-verify", *(["--guarded"] if layout.guarded else []))
        if refusal is not None:
            assert layout.breakage, f"torchgen refused a layout meant to be valid: {refusal}"
            assert bypass.returncode == 2, bypass.stderr
            message = bypass.stderr.strip()
            assert message.count("\n") == 0 and message.startswith(f"codemod: {NATIVE_FUNCTIONS}:")
            if isinstance(refusal, yaml.MarkedYAMLError):
                assert f"{NATIVE_FUNCTIONS}:{refusal.problem_mark.line + 1}: malformed YAML: {refusal.problem}" in message
            else:
                assert "duplicate key" in str(refusal) and "duplicate key" in message
            assert snapshot(tree) == before
            return refusal
        assert bypass.returncode == 0, bypass.stderr
        assert torchgen_verdict(tree) is None, "the bypassed yaml no longer loads in torchgen"
        _assert_only_members_changed(before[NATIVE_FUNCTIONS].decode(), (tree / NATIVE_FUNCTIONS).read_text())
        bypassed = _values((tree / NATIVE_FUNCTIONS).read_bytes())
        for name, value in _values(before[NATIVE_FUNCTIONS]).items():
            if name in MEMBERS:
                kept = value if layout.guarded else {k: v for k, v in value.items() if k not in STRUCTURED}
                value = {**kept, "manual_cpp_binding": True}
            assert bypassed[name] == value, name
        revert = run_codemod("revert", "mul", "--tree", str(tree))
        assert revert.returncode == 0, revert.stderr
        assert snapshot(tree) == before
        return None


def _assert_only_members_changed(before: str, after: str) -> None:
    """The bytes that differ lie within mul's entries (from the first one's line to the last one's end)."""
    by_name = native_yaml.load(NATIVE_FUNCTIONS, before).by_name()
    region_start = min(before.rfind("\n", 0, by_name[name].start) + 1 for name in MEMBERS)
    region_end = max(native_yaml.line_end(before, by_name[name].end) + 1 for name in MEMBERS)
    prefix = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    suffix = next((i for i, (a, b) in enumerate(zip(reversed(before), reversed(after))) if a != b), min(len(before), len(after)))
    assert prefix >= region_start and len(before) - suffix <= region_end, (prefix, region_start, len(before) - suffix, region_end)


def _values(text: bytes) -> dict[str, dict]:
    """Every entry's value by name, as torchgen's loader reads it."""
    return {e["func"].split("(")[0].strip(): e for e in yaml.load(text, Loader=yaml.CSafeLoader)}


@sampling.examples(5, 100, deadline=None)
@given(layout=layouts, damage=st.sampled_from(["none", "truncated", "another shape", "not a regular file"]))
def test_a_parse_kept_in_the_build_cache_is_the_parse_and_a_damaged_one_is_parsed_again(layout: Layout, damage: str) -> None:
    """native_yaml.load keeps what a text that passed its checks parses to (entries, spans, values) in the build cache,
    by the text's bytes: a later load takes it, the same to the last value; a record found truncated, of another
    shape or not a regular file is not trusted, the text parsed again and kept anew. A text it refuses is never kept:
    the refusal is the same each time. (target_tree/'s yaml is shorter than the texts it keeps: kept here all the same.)"""
    text = variant_text(layout)
    with tempfile.TemporaryDirectory(prefix="codemod-kept-parse-") as scratch, pytest.MonkeyPatch.context() as patch:
        patch.setenv("CODEMOD_BUILD_CACHE", scratch)
        patch.setattr(native_yaml, "_KEPT_FROM_CHARS", 0)
        record = native_yaml._parsed_record(text)
        try:
            parsed = native_yaml.load.__wrapped__(NATIVE_FUNCTIONS, text)
        except BadInput as refusal:
            assert not record.exists()
            with pytest.raises(BadInput) as again:
                native_yaml.load.__wrapped__(NATIVE_FUNCTIONS, text)
            assert str(again.value) == str(refusal)
            return
        assert record.is_file()
        if damage == "truncated":
            record.write_bytes(record.read_bytes()[: len(record.read_bytes()) // 2])
        elif damage == "another shape":
            record.write_bytes(marshal.dumps((["mul.Tensor"], {"func": "mul"})))
        elif damage == "not a regular file":
            record.unlink()
            os.mkfifo(record)
        kept = native_yaml.load.__wrapped__(NATIVE_FUNCTIONS, text)
        assert (kept.entries, kept.values, kept.lines, kept.text) == (parsed.entries, parsed.values, parsed.lines, parsed.text)
        assert native_yaml._kept_parse(record) is not None  # whole again: kept anew where it was damaged


def test_a_short_text_is_parsed_each_time_and_never_pushes_a_whole_yaml_out_of_the_build_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path))
    assert len(PRISTINE) < native_yaml._KEPT_FROM_CHARS
    assert native_yaml.load.__wrapped__(NATIVE_FUNCTIONS, PRISTINE).entries == PRISTINE_DOC.entries
    assert not (tmp_path / native_yaml._PARSED).exists()
