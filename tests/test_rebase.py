"""Taking one step out of a file's history (codemod/apply/rebase.py), on files made of neighbouring blocks.

Every kind of file a bypass edits is a run of blocks whose edges repeat: derivatives.yaml and native_functions.yaml
entries each end in the same blank line, C++ functions in `}` and a blank line, include blocks are lines of one
shape. Each step here changes its own block (deletes it, replaces a line of it, adds a block after it), so the steps
commute and the file without any one of them is known: the other steps applied to the base. Neighbouring steps
touch; none overlaps another. Removing any step, in any history, must give exactly that file. (Where a later step
adds a block exactly where X's bytes were, bytes cannot say which comes first: the rule puts X's bytes first, so
the blocks here are added before the block they are made for.)
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from codemod.apply import rebase
from codemod.model import line_diff

SHAPES = {  # a block of each kind of file, named by its index
    "derivatives.yaml": lambda i: [f"- name: f{i}(Tensor self) -> Tensor\n", "  self: grad\n", "  result: auto_element_wise\n", "\n"],
    "native_functions.yaml": lambda i: [f"- func: f{i}.out(Tensor self) -> Tensor\n", "  structured: True\n", "  dispatch:\n", "    CPU: f_out\n", "\n"],
    "C++ source": lambda i: [f"Tensor f{i}(const Tensor& self) {{\n", "  return self;\n", "}\n", "\n"],
    "template": lambda i: ["// ${decls}\n", f"TORCH_API Tensor f{i}(const Tensor& self);\n", "\n"],
    "include block": lambda i: [f"#include <ATen/ops/f{i}.h>\n"],
}
KINDS = ("delete", "replace", "add before", "add a copy before")


def changed(blocks: list[tuple[int, list[str]]], anchor: int, kind: str, shape) -> list[tuple[int, list[str]]]:
    """BLOCKS (each with the number it was made for) with block ANCHOR changed by KIND."""
    at = next(i for i, (number, _) in enumerate(blocks) if number == anchor)
    if kind == "delete":
        return blocks[:at] + blocks[at + 1 :]
    if kind == "replace":  # a line inside the block, as a yaml key becomes another
        block = list(blocks[at][1])
        block[len(block) // 2] = f"  // changed by step {anchor}\n"
        return [*blocks[:at], (anchor, block), *blocks[at + 1 :]]
    added = shape(anchor + 1000) if kind == "add before" else [f"// added by step {anchor}\n", *shape(anchor)[1:]]
    return [*blocks[:at], (-1, added), *blocks[at:]]


def text(blocks: list[tuple[int, list[str]]]) -> bytes:
    return "".join(line for _, block in blocks for line in block).encode()


@st.composite
def histories(draw):
    """A file of blocks of one shape, some of them changed by steps (one step a block), in a random order."""
    shape = SHAPES[draw(st.sampled_from(sorted(SHAPES)))]
    count = draw(st.integers(2, 8))
    anchors = draw(st.lists(st.integers(0, count - 1), min_size=2, max_size=count, unique=True))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=len(anchors), max_size=len(anchors)))
    return shape, [(i, shape(i)) for i in range(count)], list(zip(anchors, kinds)), draw(st.integers(0, len(anchors) - 1))


@settings(max_examples=400, deadline=None)
@given(history=histories())
def test_any_step_comes_out_of_any_history_of_neighbouring_blocks(history) -> None:
    shape, base, steps, removed_at = history
    states = [base]
    for anchor, kind in steps:
        states.append(changed(states[-1], anchor, kind, shape))
    removed = rebase.Step("X", text(states[removed_at]), text(states[removed_at + 1]))
    later = [rebase.Step(f"step {i}", text(states[i]), text(states[i + 1])) for i in range(removed_at + 1, len(steps))]

    rebased, dropped = rebase.without(removed, later)

    expected, kept = [], states[removed_at]
    for anchor, kind in steps[removed_at + 1 :]:
        kept = changed(kept, anchor, kind, shape)
        expected.append(text(kept))
    assert rebased == expected and not dropped


def test_the_issue_s_neighbours_in_derivatives_yaml() -> None:
    """neg's entry follows exp's: bypass neg, bypass exp, take neg out. The line diff draws neg's deletion one entry
    up (the entries end alike), into exp's; it is the same deletion one entry down, where it only touches."""
    exp = b"- name: exp(Tensor self) -> Tensor\n  self: grad * result.conj()\n  result: auto_element_wise\n\n"
    neg = b"- name: neg(Tensor self) -> Tensor\n  self: grad.neg()\n  result: auto_element_wise\n\n"
    head, tail = b"# exp is its own derivative: reuse the result.\n", b"- name: tan(Tensor self) -> Tensor\n"
    states, dropped = rebase.without(
        rebase.Step("neg", head + exp + neg + tail, head + exp + tail), [rebase.Step("the bypass of exp", head + exp + tail, head + tail)]
    )
    assert states == [head + neg + tail] and not dropped


def test_an_edit_inside_the_step_s_lines_still_conflicts() -> None:
    block = b"Tensor f(const Tensor& self) {\n  return self;\n}\n\n"
    edited = block.replace(b"return self", b"return self.clone()")
    try:
        rebase.without(rebase.Step("X", b"", block), [rebase.Step("a later edit", block, edited)])
    except rebase.Conflict as conflict:
        assert conflict.clash.line == 2 and "+  return self.clone();" in conflict.clash.later_hunk
    else:
        raise AssertionError("an edit of the step's own line was taken for an edit elsewhere")


def test_force_drops_only_the_edits_inside_the_step_s_lines_and_names_them() -> None:
    """A later edit inside X's block and one elsewhere: dropping keeps the second, reports the first by its line."""
    shape = SHAPES["C++ source"]
    before = text([(0, shape(0)), (1, shape(1))])
    after = text([(0, shape(0)), (5, shape(5)), (1, shape(1))])  # X added f5 between f0 and f1
    user = after.replace(b"Tensor f5(const Tensor& self) {\n  return self;", b"Tensor f5(const Tensor& self) {\n  return self * 2;")
    user = user.replace(b"Tensor f1(", b"// note\nTensor f1(")
    states, dropped = rebase.without(rebase.Step("X", before, after), [rebase.Step("a later edit", after, user)], drop_last=True)
    assert states == [before.replace(b"Tensor f1(", b"// note\nTensor f1(")]
    assert [clash.line for clash in dropped] == [6] and "+  return self * 2;" in dropped[0].later_hunk


LINES = st.lists(st.sampled_from(["\n", "}\n", "  dispatch:\n", "- func: f\n", "x\n"]), max_size=30)


@given(old=LINES, new=LINES)
def test_every_diff_of_ours_turns_one_side_into_the_other_and_leaves_the_common_ends_equal(old: list[str], new: list[str]) -> None:
    """line_diff's opcodes (the patch's, revert's and the compile check's) on lines that repeat, as a file's do: they
    cover both sides in order, rebuild NEW from OLD, and report the lines both begin and end with as equal."""
    ops = line_diff.opcodes(old, new)
    rebuilt, i, j = [], 0, 0
    for tag, i1, i2, j1, j2 in ops:
        assert (i1, j1) == (i, j) and tag in ("equal", "replace", "delete", "insert")
        assert (old[i1:i2] == new[j1:j2]) == (tag == "equal")
        rebuilt += new[j1:j2]
        i, j = i2, j2
    assert (i, j) == (len(old), len(new)) and rebuilt == new
    shorter = min(len(old), len(new))
    head = next((k for k in range(shorter) if old[k] != new[k]), shorter)
    tail = next((k for k in range(shorter - head) if old[-1 - k] != new[-1 - k]), shorter - head)
    assert all(head <= i1 and i2 <= len(old) - tail for tag, i1, i2, _, _ in ops if tag != "equal")
    assert line_diff.changes(old, new) == [op for op in ops if op[0] != "equal"]
