"""Any set of ops, bypassed in any order and mode, reverts in any order to the same bytes (issue 13, item 1; issue 18,
item 2: neighbours too).

The properties run on copies of target_tree/ with the real planner (torchgen capture, the tree's autograd loader)
and the real journal and transactions, through the functions `codemod bypass --no-build --no-verify` and
`codemod revert` call: the property is about the bytes, so the compile and the codegen (a minute per op here)
are left to `test_a_small_stack_with_full_verification`, which runs the CLI with every check on.

Planning is cheap but for torchgen: an op's capture (two torchgen runs, about 2 s) and the whole-yaml check. The
pairs and the stacks ask torchgen once per input (`torchgen_once`): the check by the yaml's bytes, the capture by the
op's entries (its templates are the pristine tree's: another op's bypass adds its own blocks to them and changes
nothing an op's capture reads, which `test_another_op_s_bypass_does_not_change_a_capture` checks).

"Any" is proven over all of them by `python benchmarks/exhaustive.py tests/test_any_order.py` (every ordered pair in
every pair of modes, every op stacked; docs/safety.md shows its dated result); each run of the suite checks a sample
drawn with the session's seed (tests/sampling.py).
"""
from __future__ import annotations

import difflib
import functools
import itertools
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from codemod.apply import journal
from codemod.capture import capture as capture_step
from codemod.capture import codegen
from codemod.cli import catalog
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, TAGS, TEMPLATES, Tree, locate
from codemod.plan.plan import FileChange, Plan, make_plan, op_entries
from tests import sampling, several_ops
from tests.conftest import TARGET_TREE, run_codemod
from tests.test_guarded_unit import assert_unit_compiled

OPS = tuple(status.op for status in catalog.catalog(locate(TARGET_TREE)) if status.bypassable)  # every one of them
FUNCTIONS_H = f"{TEMPLATES}/Functions.h"
REAL_YAML = "aten/src/ATen/native/real/native_functions.yaml"  # where the symlinked yaml points
COMMENT = {".yaml": b"# ", ".py": b"# "}  # anything else is C++
# The cases: entries next to each other in derivatives.yaml (and the yaml); the first op reverted first.
NEIGHBOURS = (("neg", "exp"), ("cos", "sin"), ("lt", "eq"), ("addmv", "nextafter"))
# (first, second, (first guarded, second guarded)): every ordered pair in every pair of modes; the neighbours, whose
# hunks touch, are a class of their own.
PAIRS = {
    "neighbours": [(first, second, (False, False)) for first, second in NEIGHBOURS],
    "any": [(*pair, modes) for modes in itertools.product((False, True), repeat=2) for pair in itertools.permutations(OPS, 2)],
}


def prepared_copy(destination: Path) -> Path:
    """target_tree/ with its yaml behind a symlink and an executable template: both must survive."""
    shutil.rmtree(destination, ignore_errors=True)
    shutil.copytree(TARGET_TREE, destination)
    (destination / REAL_YAML).parent.mkdir()
    (destination / NATIVE_FUNCTIONS).rename(destination / REAL_YAML)
    (destination / NATIVE_FUNCTIONS).symlink_to("real/native_functions.yaml")
    (destination / FUNCTIONS_H).chmod(0o755)
    return destination


def state(root: Path) -> dict[str, tuple]:
    """Every file's bytes and mode, every symlink's target, every directory: all must come back."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            found[rel] = ("dir",)
        elif "__pycache__" not in path.parts:
            found[rel] = ("file", path.read_bytes(), path.stat().st_mode)
    return found


_guardable: dict[str, bool] = {}


def mode_for(tree: Tree, op: str, guarded: bool) -> bool:
    """GUARDED where OP has a guarded bypass (the guard reads plain Tensor arguments only: clamp's Tensor? has none)."""
    if guarded and op not in _guardable:
        try:
            make_plan(tree, op, True)
            _guardable[op] = True
        except BadInput:
            _guardable[op] = False
    return guarded and _guardable[op]


def bypass(tree: Tree, op: str, guarded: bool) -> None:
    journal.apply(tree, [make_plan(tree, op, mode_for(tree, op, guarded))])


def revert(tree: Tree, *ops: str, force: bool = False) -> None:
    journal.revert(tree, list(ops), force)


def quiet_lines(pristine: Path) -> dict[str, list[bytes]]:
    """Per file any op edits: lines no op's bypass comes within 3 lines of, unique in the file and written by no
    bypass (to find them again whatever the stack: a scaffolding's own `namespace {` would make a second)."""
    tree = locate(pristine)
    near: dict[str, set[int]] = {}
    written: dict[str, set[bytes]] = {}
    originals: dict[str, bytes] = {}
    for op in OPS:
        for guarded in {False, mode_for(tree, op, True)}:
            for change in make_plan(tree, op, guarded).changes:
                if change.before is None:
                    continue
                originals[change.path] = change.before
                old, new = change.before.splitlines(keepends=True), change.after.splitlines(keepends=True)
                for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
                    if tag != "equal":
                        near.setdefault(change.path, set()).update(range(i1 - 3, i2 + 4))
                        written.setdefault(change.path, set()).update(new[j1:j2])
    quiet = {}
    for path, data in originals.items():
        lines = data.splitlines(keepends=True)
        quiet[path] = [
            line for index, line in enumerate(lines)
            if index not in near[path] and line.strip() and lines.count(line) == 1 and line not in written.get(path, ())
            and _comment_may_precede(path, lines, index)
        ]
    return {path: lines for path, lines in quiet.items() if lines}


def _comment_may_precede(path: str, lines: list[bytes], index: int) -> bool:
    """A comment line inserted before LINES[INDEX] keeps the file parseable by the planners."""
    line = lines[index]
    if path.endswith(".yaml"):
        return line.startswith((b"- func:", b"- name:"))
    if path.endswith(".py"):
        return line.startswith(b"def ")
    return index > 0 and not lines[index - 1].rstrip().endswith(b"\\") and line.startswith((b"#include", b"namespace", b"}", b"TORCH_", b"Tensor"))


def free_lines(quiet: dict[str, list[bytes]], edits: list[tuple[str, bytes, bytes]]) -> list[tuple[str, bytes]]:
    """The quiet lines no user edit has gone before yet."""
    done = {(path, line) for path, line, _ in edits}
    return [(path, line) for path in sorted(quiet) for line in quiet[path] if (path, line) not in done]


def user_edit(root: Path, path: str, line: bytes, number: int) -> tuple[str, bytes, bytes]:
    """Insert a comment line before LINE of PATH (where it is now); return what to insert in the pristine file too."""
    comment = COMMENT.get(Path(path).suffix, b"// ") + f"user edit {number}\n".encode()
    target = root / path
    data = target.read_bytes()
    assert data.count(line) == 1, f"{path}: {line!r} is no longer unique"
    target.write_bytes(data.replace(line, comment + line))
    return path, line, comment


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepared_copy(tmp_path_factory.mktemp("pristine") / "tree")


_real_capture, _real_check = capture_step.capture, codegen.check_native_yaml
_captures: dict[tuple, object] = {}  # (op, its entries before and after, overloads) -> its capture on target_tree
_checked_clean: set[tuple[bytes, bytes]] = set()  # (native_functions.yaml, tags.yaml) torchgen's loader took


def pristine_capture(op: str, *inputs):
    """OP's capture of these entries by the real torchgen, on the pristine target_tree's templates; once."""
    if (op, *inputs) not in _captures:
        _captures[(op, *inputs)] = _real_capture(locate(TARGET_TREE), op, *inputs)
    return _captures[(op, *inputs)]


def _check_once(tree: Tree) -> None:
    key = (tree.path(NATIVE_FUNCTIONS).read_bytes(), tree.path(TAGS).read_bytes())
    if key not in _checked_clean:
        _real_check(tree)
        _checked_clean.add(key)


def ask_torchgen_once(patch: pytest.MonkeyPatch) -> None:
    """The planner asks torchgen once per input (the inputs, and why they suffice: the module's docstring)."""
    patch.setattr(capture_step, "capture", lambda tree, op, *inputs: pristine_capture(op, *inputs))
    patch.setattr(codegen, "check_native_yaml", _check_once)


@pytest.fixture
def torchgen_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ask_torchgen_once(monkeypatch)


@pytest.fixture(scope="module")
def quiet(pristine: Path) -> dict[str, list[bytes]]:
    with pytest.MonkeyPatch.context() as patch:
        ask_torchgen_once(patch)
        return quiet_lines(pristine)


def stacks():
    """A subset of the ops in a bypass order, each plain or guarded, and user edits between bypasses."""
    return st.lists(st.sampled_from(OPS), min_size=2, max_size=len(OPS), unique=True).flatmap(
        lambda order: st.tuples(
            st.just(order),
            st.lists(st.booleans(), min_size=len(order), max_size=len(order)),
            st.lists(st.integers(0, len(order)), max_size=4),  # after how many bypasses a user edit is made
            st.randoms(use_true_random=False),
        )
    )


@sampling.examples(3, 40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(stack=stacks())
def test_any_subset_any_modes_any_orders_with_user_edits_revert_byte_identical(
    stack, pristine: Path, quiet: dict[str, list[bytes]], tmp_path: Path, torchgen_once: None
) -> None:
    order, guarded, edit_points, rng = stack
    expected = state(pristine)
    tree_root = tmp_path / "tree"
    shutil.rmtree(tree_root, ignore_errors=True)
    shutil.copytree(pristine, tree_root, symlinks=True)
    tree = locate(tree_root)
    edits = []

    def edit_somewhere() -> None:
        edits.append(user_edit(tree_root, *rng.choice(free_lines(quiet, edits)), len(edits)))

    for done, (op, mode) in enumerate(zip(order, guarded)):
        for _ in range(edit_points.count(done)):
            edit_somewhere()
        bypass(tree, op, mode)
    for _ in range(edit_points.count(len(order))):
        edit_somewhere()
    assert (tree_root / NATIVE_FUNCTIONS).is_symlink()

    for path, line, comment in edits:
        key = REAL_YAML if path == NATIVE_FUNCTIONS else path  # the edit went through the symlink
        kind, data, mode = expected[key]
        expected[key] = (kind, data.replace(line, comment + line), mode)
    everything = tmp_path / "bypassed"
    shutil.rmtree(everything, ignore_errors=True)
    shutil.copytree(tree_root, everything, symlinks=True)
    for attempt in range(3):
        shutil.rmtree(tree_root)
        shutil.copytree(everything, tree_root, symlinks=True)
        reverts = list(order)
        rng.shuffle(reverts)
        while reverts:  # one or several ops per revert, as `revert OP1 OP2` takes them
            size = rng.randint(1, 3)
            revert(tree, *reverts[:size])
            reverts = reverts[size:]
        assert state(tree_root) == expected, f"bypassed {list(zip(order, guarded))}, edits {edits}, revert attempt {attempt}"


def test_the_reported_failures(tmp_path: Path) -> None:
    """The issue's cases: mul+maximum; hypot, maximum, fmax then hypot first; atan2+copysign; maximum+hypot."""
    expected = state(TARGET_TREE)
    for ops, reverts in (
        (("mul", "maximum"), ("mul", "maximum")),
        (("hypot", "maximum", "fmax"), ("hypot", "fmax", "maximum")),
        (("atan2", "copysign"), ("atan2", "copysign")),
        (("maximum", "hypot"), ("maximum", "hypot")),
    ):
        root = tmp_path / "-".join(ops)
        shutil.copytree(TARGET_TREE, root)
        tree = locate(root)
        for op in ops:
            bypass(tree, op, False)
        for op in reverts:
            revert(tree, op)
            left = {j.op for j in journal.bypassed(tree)}
            assert all(not journal.changed_since(tree, j) for j in journal.bypassed(tree)), f"after revert {op}"
            assert not any(f"@codemod-bypass {op}".encode() in p.read_bytes() for p in root.rglob("*.*") if p.is_file()), op
            assert op not in left
        assert state(root) == expected, ops


def test_force_never_leaves_an_op_half_there(tmp_path: Path) -> None:
    """A user edit inside hypot's block: revert refuses; --force drops that edit, takes hypot out whole and keeps the others."""
    root = prepared_copy(tmp_path / "tree")
    expected = state(root)
    tree = locate(root)
    for op in ("hypot", "maximum", "fmax"):
        bypass(tree, op, op == "maximum")
    binary_ops = root / "aten/src/ATen/native/BinaryOps.cpp"
    binary_ops.write_bytes(binary_ops.read_bytes().replace(b"// @codemod-bypass hypot end\n", b"// @codemod-bypass hypot end (edited)\n", 1))
    refused = run_codemod("revert", "hypot", "--tree", str(root))
    assert refused.returncode == 1 and "a later edit overlaps a hunk of the bypass" in refused.stderr
    forced = run_codemod("revert", "hypot", "--tree", str(root), "--force")
    assert forced.returncode == 0, forced.stderr
    assert not any(b"@codemod-bypass hypot" in p.read_bytes() for p in root.rglob("*") if p.is_file() and ".codemod" not in p.parts)
    assert [j.op for j in journal.bypassed(tree)] == ["maximum", "fmax"]
    assert all(not journal.changed_since(tree, j) for j in journal.bypassed(tree))
    result = run_codemod("revert", "--all", "--tree", str(root))
    assert result.returncode == 0, result.stderr
    assert state(root) == expected


def test_several_ops_in_one_command_one_transaction(tmp_path: Path) -> None:
    """`bypass OP1 OP2` plans each op on the tree the previous one leaves and writes them in one transaction;
    `revert --all` takes them out together. --no-verify: this is about the transaction, the next test verifies."""
    root = prepared_copy(tmp_path / "tree")
    expected = state(root)
    result = run_codemod("bypass", "mul", "maximum", "fmax", "--tree", str(root), "--no-verify")
    assert result.returncode == 0, result.stderr
    journals = journal.bypassed(locate(root))
    assert [(j.op, j.mode) for j in journals] == [("mul", "plain"), ("maximum", "plain"), ("fmax", "plain")]
    again = run_codemod("bypass", "mul", "--tree", str(root), "--guarded", "--no-verify")
    assert again.returncode == 2 and "mul is already bypassed in plain mode" in again.stderr
    result = run_codemod("revert", "maximum", "mul", "--tree", str(root))
    assert result.returncode == 0, result.stderr
    assert "reverted maximum (plain)" in result.stderr and "reverted mul (plain)" in result.stderr
    assert run_codemod("revert", "--all", "--tree", str(root)).returncode == 0
    assert state(root) == expected


def test_a_small_stack_with_full_verification(tree: Path) -> None:
    """Guarded mul (the tutorial's last step: the build cache holds the docs' compiles of it), then plain div and the
    drawn signature class in one command over it (the tree's codegen once for them), each verified in full (compile
    against libtorch, the tree's codegen, the compile check), then reverted in another order: byte-identical. The state
    test_slim_compile.py and test_signatures.py verify too (tests/several_ops.py: the build cache shares it). (sub's
    unit of guarded functions, which passes a Scalar on, is compiled over a plain bypass by test_guarded_unit.py.)"""
    expected = state(tree)
    guarded = several_ops.bypass_guarded_mul(tree)
    assert_unit_compiled(guarded.stderr, "mul")
    plain = several_ops.bypass_plain_ops(tree)
    assert plain.stderr.count("verified: autograd codegen ran clean") == 1
    assert all(f"at::__dispatch_{op}" in plain.stderr for op in several_ops.PLAIN_OPS), plain.stderr
    bypassed = [("mul", "guarded"), *((op, "plain") for op in several_ops.PLAIN_OPS)]
    assert [(j.op, j.mode) for j in journal.bypassed(locate(tree))] == bypassed
    for op in (*several_ops.PLAIN_OPS[1:], "mul", "div"):
        result = run_codemod("revert", op, "--tree", str(tree))
        assert result.returncode == 0, result.stderr
    assert state(tree) == expected


@pytest.mark.parametrize(("first", "second"), NEIGHBOURS)
def test_neighbours_bypassed_one_after_the_other_revert_first_one_first(first: str, second: str, tree: Path) -> None:
    """`bypass neg; bypass exp; revert neg` (and the issue's other neighbours): their hunks touch, none overlaps."""
    expected = state(tree)
    for op in (first, second):
        result = run_codemod("bypass", op, "--tree", str(tree), "--no-build", "--no-verify")
        assert result.returncode == 0, result.stderr
    result = run_codemod("revert", first, "--tree", str(tree))
    assert result.returncode == 0, result.stderr
    assert "--force" not in result.stderr
    assert [j.op for j in journal.bypassed(locate(tree))] == [second]
    assert not journal.changed_since(locate(tree), journal.load(locate(tree), second))
    assert run_codemod("revert", second, "--tree", str(tree)).returncode == 0
    assert state(tree) == expected


def test_neighbours_bypassed_in_one_command_revert_in_either_order(tree: Path) -> None:
    expected = state(tree)
    result = run_codemod("bypass", "neg", "exp", "--tree", str(tree), "--no-build", "--no-verify")
    assert result.returncode == 0, result.stderr
    bypassed = tree.parent / "bypassed"
    shutil.copytree(tree, bypassed, symlinks=True)
    for order in (("neg", "exp"), ("exp", "neg")):
        shutil.rmtree(tree)
        shutil.copytree(bypassed, tree, symlinks=True)
        for op in order:
            result = run_codemod("revert", op, "--tree", str(tree))
            assert result.returncode == 0, f"revert {order}: {result.stderr}"
        assert state(tree) == expected, order


@functools.cache
def alone(pristine: Path, op: str, guarded: bool) -> Plan:
    """OP's plan on PRISTINE, in the mode asked where it has it."""
    return make_plan(locate(pristine), op, mode_for(locate(pristine), op, guarded))


def pair_failures(pristine: Path, work: Path, first: str, second: str, modes: tuple[bool, bool]) -> list[str]:
    """FIRST in the first mode (guarded or not) and SECOND in the second: bypass FIRST then SECOND on a copy of
    PRISTINE, then revert FIRST then SECOND, and SECOND then FIRST. Each revert that was refused or did not end
    byte-identical."""
    expected = state(pristine)
    root, bypassed, failures = work / "tree", work / "bypassed", []
    shutil.copytree(pristine, bypassed, symlinks=True)
    tree = locate(bypassed)
    journal.apply(tree, [alone(pristine, first, modes[0])])
    journal.apply(tree, [make_plan(tree, second, mode_for(tree, second, modes[1]))])
    for order in ((first, second), (second, first)):
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(bypassed, root, symlinks=True)
        try:
            for op in order:
                revert(locate(root), op)
        except VerificationFailed as refused:
            failures.append(f"bypass {first}, {second} {modes}; revert {order}: {str(refused).splitlines()[1]}")
            continue
        if state(root) != expected:
            failures.append(f"bypass {first}, {second} {modes}; revert {order}: not byte-identical")
    return failures


def pair_name(pair: tuple[str, str, tuple[bool, bool]]) -> str:
    first, second, modes = pair
    return "-".join(f"{op}{'(guarded)' if guarded else ''}" for op, guarded in zip((first, second), modes))


@sampling.parametrize(("first", "second", "modes"), PAIRS, 6, ids=pair_name)
def test_any_ordered_pair_reverts_in_both_orders_byte_identical(
    first: str, second: str, modes: tuple[bool, bool], pristine: Path, tmp_path: Path, torchgen_once: None
) -> None:
    """Bypass A then B (each plain or guarded), revert A then B and B then A: a drawn sample of the pairs, the
    neighbours always."""
    failures = pair_failures(pristine, tmp_path, first, second, modes)
    assert not failures, "\n".join(failures)


@sampling.parametrize("order", OPS, 4, together=True)
def test_another_op_s_bypass_does_not_change_a_capture(order: tuple[str, ...], pristine: Path, tmp_path: Path) -> None:
    """Drawn ops bypassed on top of each other with the real planner (torchgen on the tree's templates, with the
    bypasses before it): each capture equals the one on the pristine templates (what `torchgen_once` serves), and
    the stack reverts in a drawn order, byte-identical."""
    expected = state(pristine)
    root = tmp_path / "tree"
    shutil.copytree(pristine, root, symlinks=True)
    tree = locate(root)
    for op in order:
        plan = make_plan(tree, op)
        entries = op_entries(locate(pristine), op)
        assert plan.capture == pristine_capture(op, *entries.capture_inputs(), entries.overloads), op
        journal.apply(tree, [plan])
    revert(tree, *sampling.draw(order, len(order)))
    assert state(root) == expected


def test_force_drops_only_the_edits_inside_the_op_s_lines_and_names_them(tree: Path) -> None:
    """One edit inside exp's block and one far from it in the same file: revert refuses naming the first and offers
    --force; --force drops it (named by file:line) and keeps the other."""
    unary_ops = tree / "aten/src/ATen/native/UnaryOps.cpp"
    expected = state(tree)
    assert run_codemod("bypass", "exp", "--tree", str(tree), "--no-build", "--no-verify").returncode == 0
    data = unary_ops.read_bytes()
    inside = data.index(b"// @codemod-bypass exp end\n")
    data = data[:inside] + b"// my note inside\n" + data[inside:]
    far = data.index(b"namespace at::native {")
    data = data[:far] + b"// my note far away\n" + data[far:]
    unary_ops.write_bytes(data)
    line = data[:inside].count(b"\n") + 1
    refused = run_codemod("revert", "exp", "--tree", str(tree))
    assert refused.returncode == 1
    assert "aten/src/ATen/native/UnaryOps.cpp:" in refused.stderr and "+// my note inside" in refused.stderr
    assert "`codemod revert exp --force`" in refused.stderr
    forced = run_codemod("revert", "exp", "--tree", str(tree), "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"dropped the later edit at aten/src/ATen/native/UnaryOps.cpp:{line} (inside the bypass's lines); the other later edits kept" in forced.stderr
    original = expected["aten/src/ATen/native/UnaryOps.cpp"][1]
    at = original.index(b"namespace at::native {")
    assert unary_ops.read_bytes() == original[:at] + b"// my note far away\n" + original[at:]
    del expected["aten/src/ATen/native/UnaryOps.cpp"]
    assert {k: v for k, v in state(tree).items() if k != "aten/src/ATen/native/UnaryOps.cpp"} == expected


def test_force_is_not_offered_where_it_cannot_help(tree: Path) -> None:
    """An edit made before another op's bypass: --force cannot drop it (the later bypass stands on it); the message
    names the op to revert first and offers no --force."""
    assert run_codemod("bypass", "exp", "--tree", str(tree), "--no-build", "--no-verify").returncode == 0
    unary_ops = tree / "aten/src/ATen/native/UnaryOps.cpp"
    unary_ops.write_bytes(unary_ops.read_bytes().replace(b"// @codemod-bypass exp end\n", b"// mine\n// @codemod-bypass exp end\n", 1))
    assert run_codemod("bypass", "neg", "--tree", str(tree), "--no-build", "--no-verify").returncode == 0
    refused = run_codemod("revert", "exp", "--tree", str(tree))
    assert refused.returncode == 1 and "revert neg first" in refused.stderr
    assert "--force`" not in refused.stderr
    forced = run_codemod("revert", "exp", "--tree", str(tree), "--force")
    assert forced.returncode == 1 and "revert neg first" in forced.stderr


def test_a_directory_two_bypasses_made_files_in_goes_with_the_last_of_them(target_tree: Path, tmp_path: Path) -> None:
    """Two ops' new files in one new directory (the first bypass made it): reverted in either order, the directory
    goes with the second revert, not before (the other's file is there) and not never."""
    new_dir = "aten/src/ATen/native/generated"
    for order in (("one", "two"), ("two", "one")):
        root = tmp_path / "-".join(order)
        shutil.copytree(target_tree, root)
        expected = state(root)
        tree = locate(root)
        for op in ("one", "two"):
            change = FileChange(f"{new_dir}/{op}.cpp", None, f"// {op}\n".encode())
            journal.apply(tree, [Plan(op, (op,), (change,), (), (), (), None)])
        assert journal.load(tree, "one").created_dirs == (new_dir,) and journal.load(tree, "two").created_dirs == ()
        revert(tree, order[0])
        assert (root / new_dir).is_dir()
        revert(tree, order[1])
        assert state(root) == expected, order
