"""Any set of ops, bypassed in any order and mode, reverts in any order to the same bytes (issue 13, item 1).

The properties run on copies of target_tree/ with the real planner (torchgen capture, the tree's autograd loader)
and the real journal and transactions, through the functions `codemod bypass --no-build --no-verify` and
`codemod revert` call: the property is about the bytes, so the compile and the codegen (a minute per op here)
are left to `test_a_small_stack_with_full_verification`, which runs the CLI with every check on.
Each example plans every op it bypasses (about 2 s an op), hence the small max_examples.
"""
from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemod.apply import journal
from codemod.model.tree import NATIVE_FUNCTIONS, TEMPLATES, Tree, locate
from codemod.plan.plan import make_plan
from tests.conftest import TARGET_TREE, run_codemod

OPS = ("add", "atan2", "copysign", "div", "fmax", "hypot", "maximum", "mul", "sub")
FUNCTIONS_H = f"{TEMPLATES}/Functions.h"
REAL_YAML = "aten/src/ATen/native/real/native_functions.yaml"  # where the symlinked yaml points
COMMENT = {".yaml": b"# ", ".py": b"# "}  # anything else is C++


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


def bypass(tree: Tree, op: str, guarded: bool) -> None:
    journal.apply(tree, [make_plan(tree, op, guarded)])


def revert(tree: Tree, *ops: str, force: bool = False) -> None:
    journal.revert(tree, list(ops), force)


def quiet_lines(pristine: Path) -> dict[str, list[bytes]]:
    """Per file any op edits: lines no op's bypass comes within 3 lines of, and unique in the file (to find them again)."""
    tree = locate(pristine)
    near: dict[str, set[int]] = {}
    originals: dict[str, bytes] = {}
    for op in OPS:
        for guarded in (False, True):
            for change in make_plan(tree, op, guarded).changes:
                if change.before is None:
                    continue
                originals[change.path] = change.before
                old, new = change.before.splitlines(keepends=True), change.after.splitlines(keepends=True)
                for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
                    if tag != "equal":
                        near.setdefault(change.path, set()).update(range(i1 - 3, i2 + 4))
    quiet = {}
    for path, data in originals.items():
        lines = data.splitlines(keepends=True)
        quiet[path] = [
            line for index, line in enumerate(lines)
            if index not in near[path] and line.strip() and lines.count(line) == 1 and _comment_may_precede(path, lines, index)
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


@pytest.fixture(scope="module")
def quiet(pristine: Path) -> dict[str, list[bytes]]:
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


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(stack=stacks())
def test_any_subset_any_modes_any_orders_with_user_edits_revert_byte_identical(
    stack, pristine: Path, quiet: dict[str, list[bytes]], tmp_path: Path
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
    """Plain mul and guarded sub bypassed with every check (compile against libtorch, the tree's codegen, once for
    both ops), then reverted in the other order: byte-identical."""
    expected = state(tree)
    plain = run_codemod("bypass", "mul", "div", "--tree", str(tree))
    assert plain.returncode == 0, plain.stderr
    assert plain.stderr.count("verified: autograd codegen ran clean") == 1
    assert "at::__dispatch_mul" in plain.stderr and "at::__dispatch_div" in plain.stderr
    guarded = run_codemod("bypass", "sub", "--guarded", "--tree", str(tree))
    assert guarded.returncode == 0, guarded.stderr
    for op in ("mul", "sub", "div"):
        result = run_codemod("revert", op, "--tree", str(tree))
        assert result.returncode == 0, result.stderr
    assert state(tree) == expected
