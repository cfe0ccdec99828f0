"""Issue 27 §2: in guarded mode the header's fast path is compiled in the tree, as a file of a build compiles it: a
translation unit that includes the regenerated headers and uses every guarded function (guarded_unit.py), beside the
harness's own copy. Real torchgen regenerates the headers, real g++ compiles the unit."""
from __future__ import annotations

from pathlib import Path

import pytest

from codemod.apply import journal
from codemod.capture.fromtorch import write_tree_from_torch
from codemod.model import native_yaml
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, TEMPLATES, locate
from codemod.plan.plan import make_plan
from codemod.verify import compile_check, guarded_unit
from tests.conftest import TARGET_TREE, run_codemod

# mul: (self, other); sub: a Scalar alpha besides, which every function and method passes on
SIGNATURES = {"mul": "const at::Tensor & self, const at::Tensor & other", "sub": "const at::Tensor & self, const at::Tensor & other, const at::Scalar & alpha"}


@pytest.mark.parametrize("op", sorted(SIGNATURES))
def test_the_unit_uses_every_guarded_function_as_its_declaration_and_the_generated_code_call_it(tree: Path, op: str) -> None:
    (unit,) = guarded_unit.units([make_plan(locate(tree), op, guarded=True)])
    text = unit.text.decode()
    assert f"decltype(auto) {op}_0({SIGNATURES[op]}) {{" in text  # the parameters of the op's own declaration
    arguments = SIGNATURES[op].replace("const at::Tensor & ", "").replace("const at::Scalar & ", "").replace("self, ", "")
    assert f"return self.{op}_({arguments});" in text and "bump_versions(*keys, self);" in text  # the in-place method

    # what the autograd codegen's VariableType kernels of the op call (torchgen renames them __dispatch_ in guarded mode),
    # called in the unit as they call it: the key set, then the arguments in the order torchgen generated them
    redispatched = _redispatched_by_variable_type(tree, op)
    assert redispatched == {op, f"{op}_", f"{op}_outf"}
    for name in redispatched:
        assert f"  return at::redispatch::{name}(dispatchKeySet, " in text


def test_the_unit_compiles_in_the_tree(tree: Path) -> None:
    """Guarded mul through the CLI (the docs' guarded example: their compiles are shared); sub's unit, with the Scalar
    its functions pass on, by the next test."""
    run = run_codemod("bypass", "mul", "--tree", str(tree), "--guarded", "--no-build")
    assert run.returncode == 0, run.stderr
    assert_unit_compiled(run.stderr, "mul")
    assert not tree.joinpath(guarded_unit.PATH).exists()


def assert_unit_compiled(stderr: str, op: str) -> None:
    """STDERR (of a guarded bypass of OP) says the unit using every guarded function of OP compiled, never not."""
    used = f"at::{op}, at::{op}_out, at::{op}_outf, Tensor::{op}, Tensor::{op}_"
    renamed = f"at::redispatch::{op}, at::redispatch::{op}_, at::redispatch::{op}_out, at::redispatch::{op}_outf"
    (verified,) = [line for line in stderr.splitlines() if line.startswith("verified: g++")]
    assert (
        f"compiles {guarded_unit.PATH} (generated, not written to the tree: includes the regenerated ATen/Functions.h and calls {used}, each "
        f"through its guard; includes ATen/RedispatchFunctions.h and calls {renamed}, as generated code calls them)"
    ) in verified
    assert guarded_unit.PATH not in "".join(line for line in stderr.splitlines() if line.startswith("not compiled:"))


def test_a_unit_passing_a_scalar_on_compiles_over_a_plain_bypass(tmp_path: Path) -> None:
    """Guarded sub, whose functions pass a Scalar alpha on, over plain mul (hand-written in the same headers): its unit
    compiles against the headers regenerated from both, with the files sub's bypass edited (its templates: none is
    compiled alone); torchgen's units are the full verification's (test_any_order.py's stack, the docs' tutorial)."""
    write_tree_from_torch(tmp_path / "tree", TARGET_TREE)
    tree = locate(tmp_path / "tree")
    journal.apply(tree, [make_plan(tree, "mul")])
    plan = make_plan(tree, "sub", guarded=True)
    journal.apply(tree, [plan])
    (unit,) = guarded_unit.units([plan])
    assert "const at::Scalar & alpha" in unit.text.decode()
    report = compile_check.check(tree, compile_check.regenerate_headers(tree), [plan], units=(unit,))
    assert guarded_unit.PATH in report.compiled


def test_a_fast_path_that_does_not_compile_in_the_tree_fails_verification_with_gxxs_reason(tmp_path: Path) -> None:
    """The written guard broken where only its use compiles it (a member of the template's parameter pack): the unit
    instantiates it as the guarded definitions do, and g++'s reason is said at the unit."""
    write_tree_from_torch(tmp_path / "tree", TARGET_TREE)
    tree = locate(tmp_path / "tree")
    plan = make_plan(tree, "mul", guarded=True)
    journal.apply(tree, [plan])
    header = tree.path(f"{TEMPLATES}/Functions.h")
    written = header.read_text()
    assert "tensors.key_set()" in written
    header.write_text(written.replace("tensors.key_set()", "tensors.codemod_broken_key_set()"))
    # compiled with the edited sources alone: the torchgen-generated units would each be compiled again against the
    # changed header, and none of them instantiates the guard
    with pytest.raises(VerificationFailed) as failed:
        compile_check.check(tree, compile_check.regenerate_headers(tree), [plan], units=guarded_unit.units([plan]))
    assert failed.value.exit_code == 1
    message = str(failed.value)
    assert f"{guarded_unit.PATH} (generated, not written to the tree:" in message
    assert "error: " in message and "codemod_broken_key_set" in message and "has no member named" in message


def _redispatched_by_variable_type(tree: Path, op: str) -> set[str]:
    """The at::redispatch:: names the autograd codegen's kernels of OP call: torchgen's own C++ name of each overload,
    as gen_variable_type's emit_dispatch_call takes it (the faithful `_outf` of an out overload)."""
    from torchgen.api import cpp
    from torchgen.model import FunctionSchema

    doc = native_yaml.load(NATIVE_FUNCTIONS, tree.joinpath(NATIVE_FUNCTIONS).read_text())
    schemas = [FunctionSchema.parse(m.values["func"]) for g in native_yaml.op_groups(doc, op) for m in g.members]
    return {cpp.name(s, faithful_name_for_out_overloads=True, symint_overload=s.has_symint()) for s in schemas}
