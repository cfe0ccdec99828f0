"""Verification compiles what the bypass wrote: real torchgen regenerates the headers, real g++ compiles
every edited source and rewritten caller against them.

The trees are `codemod tree from-torch` around target_tree/'s sources: target_tree/'s own yaml and
templates are a slim subset, whose headers cannot replace the installed torch's (it is checked as such).
The compiles are shared through the build cache (CODEMOD_BUILD_CACHE): the doctored plan is made on a copy of the
tree the CLI run bypassed a copy of, with the same files and checkout build (so the same flags), so its untouched
files and headers are those the CLI run compiled: only the files it breaks are compiled again.
"""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from codemod.apply import journal
from codemod.capture import codegen
from codemod.capture.codegen import AUTOGRAD_OUT
from codemod.model import progress
from codemod.model.errors import VerificationFailed
from codemod.model.tree import NATIVE_SOURCES, TEMPLATES, Tree, locate
from codemod.plan.plan import Plan, make_plan
from codemod.verify import compile_check, generated_units
from codemod.verify.verify import codegen_ahead, entries_in_tree, generated_sources, verify
from tests.conftest import OUTPUT_SCHEMA, TARGET_TREE, run_codemod, snapshot

BINARY_OPS = f"{NATIVE_SOURCES}/BinaryOps.cpp"
# A caller of at::cpu::mul that also includes a header neither target_tree/ nor the torch wheel has.
VENDOR_CALLER = "torch/csrc/codemod_fixture/uses_vendor.cpp"
MISSING_HEADER = "vendor_blas/gemm_config.h"
VENDOR_CALLER_TEXT = f"""#include <ATen/CPUFunctions.h>
#include <{MISSING_HEADER}>

at::Tensor scaled_product(const at::Tensor& a, const at::Tensor& b) {{
  return at::cpu::mul(a, b);
}}
"""


def full_tree(where: Path, extra_sources: dict[str, str]) -> Path:
    """`codemod tree from-torch` around a copy of target_tree/'s sources and EXTRA_SOURCES."""
    sources = where / "sources"
    shutil.copytree(TARGET_TREE, sources)
    for path, text in extra_sources.items():
        (sources / path).parent.mkdir(parents=True, exist_ok=True)
        (sources / path).write_text(text)
    result = run_codemod("tree", "from-torch", str(where / "tree"), "--sources", str(sources))
    assert result.returncode == 0, result.stderr
    return where / "tree"


# A caller newer than the installed torch, as a checkout's own build compiles it: it needs its build directory's
# generated ATen/Config.h (AT_ONEDNN_ENABLED) and a macro its compile_commands.json entry sets.
CHECKOUT_CALLER = "torch/csrc/codemod_fixture/onednn_caller.cpp"
CHECKOUT_CALLER_TEXT = """#include <ATen/Config.h>
#include <ATen/CPUFunctions.h>
#include <ATen/Functions.h>

#ifndef CODEMOD_FIXTURE_CHECKOUT_BUILD
#error compiled without the flags compile_commands.json gives this file
#endif

#if AT_ONEDNN_ENABLED()
constexpr bool onednn = true;
#else
constexpr bool onednn = false;
#endif

at::Tensor onednn_product(const at::Tensor& a, const at::Tensor& b) {
  return onednn ? at::cpu::mul(a, b) : a;
}
"""
# The checkout's generated configuration: the installed one, and the macro a newer release renamed it to.
CHECKOUT_CONFIG = "build/aten/src/ATen/Config.h"
CHECKOUT_CONFIG_TEXT = """#pragma once
#include_next <ATen/Config.h>
#define AT_ONEDNN_ENABLED() AT_MKLDNN_ENABLED()
"""
# A line of the static runtime newer than the installed torch (Tensor::is_onednn came later): it never compiled here.
STATIC_RUNTIME = "torch/csrc/jit/runtime/static/ops.cpp"
NEWER_THAN_TORCH = "\nbool codemod_fixture_is_onednn(const at::Tensor& t) {\n  return t.is_onednn();\n}\n"


def checkout_build(tree: Path) -> None:
    """TREE's own build directory: the generated Config.h, and compile_commands.json for CHECKOUT_CALLER."""
    (tree / CHECKOUT_CONFIG).parent.mkdir(parents=True)
    (tree / CHECKOUT_CONFIG).write_text(CHECKOUT_CONFIG_TEXT)
    entry = {
        "directory": str(tree / "build"),
        "file": str(tree / CHECKOUT_CALLER),
        # paths relative to the entry's directory, as CMake may write them; per-operator headers are left off
        "arguments": ["c++", "-DCODEMOD_FIXTURE_CHECKOUT_BUILD", "-DAT_PER_OPERATOR_HEADERS", "-I", "aten/src", "-c", str(tree / CHECKOUT_CALLER)],
    }
    (tree / "build/compile_commands.json").write_text(json.dumps([entry]))


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full tree around target_tree/'s sources, the vendor caller, a caller that needs the checkout's build, and a
    static runtime with a line newer than the installed torch; shared by the module, never written."""
    static_runtime = (TARGET_TREE / STATIC_RUNTIME).read_text() + NEWER_THAN_TORCH
    return full_tree(
        tmp_path_factory.mktemp("compile"),
        {VENDOR_CALLER: VENDOR_CALLER_TEXT, CHECKOUT_CALLER: CHECKOUT_CALLER_TEXT, STATIC_RUNTIME: static_runtime},
    )


def built_copy(checkout: Path, where: Path) -> Path:
    """A copy of CHECKOUT at WHERE with its own build directory (compile_commands.json names files by absolute path)."""
    tree = shutil.copytree(checkout, where, symlinks=True)
    checkout_build(tree)
    return tree


def compiling_copy(checkout: Path, where: Path) -> Path:
    """A built copy of CHECKOUT where every source compiles: no vendor caller, the static runtime as target_tree/ has it.
    Its other files, headers and flags are those of the CLI run's copy: their compiles are found in the build cache."""
    tree = built_copy(checkout, where)
    (tree / VENDOR_CALLER).unlink()
    shutil.copy(TARGET_TREE / STATIC_RUNTIME, tree / STATIC_RUNTIME)
    return tree


@pytest.fixture(scope="module")
def bypassed(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """`codemod bypass mul --json` on a built copy of the checkout: (report, stderr). --no-build: the harness and its
    checks against at::mul are the other tests' (test_bypass.py, test_build.py); here the compile check is judged."""
    tree = built_copy(checkout, tmp_path_factory.mktemp("bypassed") / "tree")
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--json", "--no-build")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    OUTPUT_SCHEMA.validate(report)
    return report, result.stderr


def _compile_line(verified: list[str]) -> str:
    lines = [line for line in verified if line.startswith("g++ -c")]
    assert len(lines) == 1, verified
    return lines[0]


def test_bypass_compiles_every_edited_source_and_caller_and_names_them(bypassed: tuple[dict, str]) -> None:
    report, stderr = bypassed
    not_compiled_here = (VENDOR_CALLER, STATIC_RUNTIME)  # by the tests below
    edited_sources = sorted(
        row["path"] for row in report["ops"][0]["files"]
        if row["path"].endswith(".cpp") and not row["path"].startswith(TEMPLATES) and row["path"] not in not_compiled_here
    )
    assert BINARY_OPS in edited_sources and CHECKOUT_CALLER in edited_sources
    compile_line = _compile_line(report["verified"])
    named = compile_line.split(" compiles ", 1)[1].split(" against ", 1)[0].split(", ")
    assert sorted(n for n in named if " (generated" not in n) == edited_sources
    assert f"verified: {compile_line}" in stderr
    # BinaryOps.cpp includes ATen/Functions.h and (through ATen/core/Tensor.h) ATen/core/TensorBody.h
    assert f"from the edited {TEMPLATES}/Functions.h, {TEMPLATES}/TensorBody.h (" in compile_line


def test_the_sources_torchgen_generates_for_the_op_are_compiled_as_a_cpu_build_compiles_them(bypassed: tuple[dict, str]) -> None:
    """torchgen's sources for mul's entries that hold its code: the registrations, Operators, the AOTInductor C shim, and
    Functions.cpp and core/TensorMethods.cpp generated from the templates the hand-written API was written into (which
    are therefore not named as not compiled); the autograd codegen's sources that hold mul's code, its Python bindings
    (which call the hand-written at::mul and Tensor::mul) among them; the CUDA shim is named, with why."""
    report, _ = bypassed
    compile_line = _compile_line(report["verified"])
    named = compile_line.split(" compiles ", 1)[1].split(" against ", 1)[0].split(", ")
    generated = {n.split(" (", 1)[0]: n.split(" (", 1)[1] for n in named if " (generated" in n}
    for template, place in (("Functions.cpp", "build/aten/src/ATen/Functions.cpp"), ("TensorMethods.cpp", "build/aten/src/ATen/core/TensorMethods.cpp")):
        assert generated.pop(place) == f"generated from the edited {TEMPLATES}/{template})"
        assert not any(item.startswith(f"{TEMPLATES}/{template}") for item in report["unchecked"]), report["unchecked"]
    assert {
        "build/aten/src/ATen/RegisterCompositeImplicitAutograd_0.cpp", "build/aten/src/ATen/Operators_0.cpp",
        "torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.cpp",
    } <= set(generated)
    assert not any("CUDA" in path for path in generated)
    # torchgen's unsharded copy is compiled only in the stead of several shards that hold the op's code, which it names
    in_one_unit = r"generated(?: by the autograd codegen)?: the op's code of \w+_\{\d+(?:,\d+)+\}\.cpp in one unit\)"
    assert all(re.fullmatch(in_one_unit, what) for path, what in generated.items() if path.endswith("Everything.cpp")), generated
    assert "torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.cpp: torchgen's code for mul on a backend a CPU build (USE_CUDA=0) does not compile" in report["unchecked"]
    autograd = {path for path, what in generated.items() if what == "generated by the autograd codegen)"}
    assert {
        "torch/csrc/autograd/generated/python_torch_functions_0.cpp", "torch/csrc/autograd/generated/python_variable_methods.cpp",
        "torch/csrc/autograd/generated/TraceType_0.cpp",
    } <= autograd, generated
    assert not any(item.startswith("torch/csrc/autograd/generated/") for item in report["unchecked"]), report["unchecked"]


def test_the_op_s_code_in_several_shards_of_one_template_compiles_as_one_unit(tree: Path, tmp_path: Path) -> None:
    """torchgen shards a template's output by a hash of each function's name: mul's autograd kernels fall in several
    shards of VariableType.cpp. They compile as one unit, torchgen's unsharded copy beside them, which holds every line
    of theirs that names the op, and is named with the shards it stands for; no two units are shards of one template.
    (The tree and runs of the README's first command: the session's build cache holds them.)"""
    located = locate(tree)
    plan = make_plan(located, "mul")
    journal.apply(located, [plan])
    entries = entries_in_tree(located, plan.overloads)
    autograd_run, entries_run = codegen.autograd_on_entries(located, entries)[0], codegen.aten_on_entries(located, entries, tmp_path)[0]
    units = generated_units.units(entries_run, autograd_run, entries_run, [plan]).units
    templates = [re.sub(r"(_\d+|Everything)\.cpp$", "", unit.path) for unit in units]
    assert len(templates) == len(set(templates)), [unit.path for unit in units]
    (variable_type,) = [unit for unit in units if unit.path == f"{AUTOGRAD_OUT}/VariableTypeEverything.cpp"]
    numbers = re.fullmatch(r"generated by the autograd codegen: the op's code of VariableType_\{(\d+(?:,\d+)+)\}\.cpp in one unit", variable_type.what)
    assert numbers is not None, variable_type.what
    shards = [f"VariableType_{number}.cpp" for number in numbers[1].split(",")]
    in_one_unit = set(variable_type.text.splitlines())
    for shard in shards:
        naming_the_op = [line for line in (autograd_run / AUTOGRAD_OUT / shard).read_bytes().splitlines() if re.search(rb"\bmul", line)]
        assert naming_the_op and set(naming_the_op) <= in_one_unit, shard


def test_a_checkouts_own_build_is_what_its_sources_compile_against(bypassed: tuple[dict, str]) -> None:
    """The caller compiles only with its compile_commands.json flags and the build directory's Config.h."""
    report, _ = bypassed
    assert CHECKOUT_CALLER in _compile_line(report["verified"])
    assert not any(CHECKOUT_CALLER in line for line in report["unchecked"])


def test_errors_a_file_had_before_the_bypass_are_not_blamed_on_it(bypassed: tuple[dict, str]) -> None:
    report, stderr = bypassed
    line = ((TARGET_TREE / STATIC_RUNTIME).read_text() + NEWER_THAN_TORCH).splitlines().index("  return t.is_onednn();") + 1
    expected = f"{STATIC_RUNTIME}: did not compile before the bypass (first error {STATIC_RUNTIME}:{line}: "
    assert any(item.startswith(expected) and "is_onednn" in item for item in report["unchecked"]), report["unchecked"]
    assert f"not compiled: {expected}" in stderr
    assert STATIC_RUNTIME not in _compile_line(report["verified"])


def test_a_source_including_a_header_nobody_has_is_named_and_not_called_verified(bypassed: tuple[dict, str]) -> None:
    report, stderr = bypassed
    assert VENDOR_CALLER in {row["path"] for row in report["ops"][0]["files"]}  # its call was rewritten
    expected = f"{VENDOR_CALLER}: includes <{MISSING_HEADER}> ({VENDOR_CALLER}:2), which neither the tree nor the installed torch has"
    assert expected in report["unchecked"]
    assert f"not compiled: {expected}" in stderr
    assert not any(VENDOR_CALLER in line for line in report["verified"])
    assert not any(VENDOR_CALLER in line for line in stderr.splitlines() if line.startswith("verified:"))


def doctored(plan: Plan) -> tuple[Plan, int]:
    """PLAN with a line that does not compile after its block in BinaryOps.cpp, and that line's number."""
    marker = f"// @codemod-bypass {plan.op} begin".encode()
    changes = []
    for change in plan.changes:
        if change.path == BINARY_OPS:
            at = change.after.index(b"\n", change.after.index(marker)) + 1
            after = change.after[:at] + b"int doctored = codemod_undeclared_name;\n" + change.after[at:]
            line = after[:at].count(b"\n") + 1
            change = dataclasses.replace(change, after=after)
        changes.append(change)
    return dataclasses.replace(plan, changes=tuple(changes)), line


def test_a_plan_whose_edit_does_not_compile_is_refused_before_writing_at_the_trees_file_and_line(
    tmp_path: Path, checkout: Path, bypassed: tuple[dict, str],  # after the CLI run on the same files: its compiles are cached
) -> None:
    located = locate(built_copy(checkout, tmp_path / "tree"))
    plan, line = doctored(make_plan(located, "mul"))
    broken = next(c for c in plan.changes if c.path == STATIC_RUNTIME)
    new_error = b"\nint codemod_also_undeclared = codemod_other_undeclared_name;\n"
    plan = dataclasses.replace(plan, changes=tuple(
        dataclasses.replace(c, after=c.after + new_error) if c is broken else c for c in plan.changes
    ))
    pristine = snapshot(located.root)
    # before writing, as the CLI runs it: refused with g++'s errors on the bytes the plan would write, nothing written
    with pytest.raises(VerificationFailed) as refused, codegen_ahead(located, [plan], compile_first=True) as verdicts:
        verdicts()
    assert snapshot(located.root) == pristine
    assert str(refused.value).startswith("in the result of `bypass mul`, the code the bypass leaves does not compile")
    assert str(refused.value).endswith("nothing was written (`--dry-run --no-verify` prints the patch)")
    journal.apply(located, [plan])  # and after writing (verify finds the records of the same compiles)
    with pytest.raises(VerificationFailed) as failed:
        verify(located, plan=plan)
    for message in (str(refused.value), str(failed.value)):
        assert f"{BINARY_OPS}:{line}:16: error: " in message and "codemod_undeclared_name" in message
        assert "was not declared in this scope" in message
        assert "codemod-compile-" not in message  # the scratch copy is named as the tree's file
        # of the file that did not compile before the bypass, only the error the bypass brought
        assert "codemod_other_undeclared_name" in message and "is_onednn" not in message
    assert failed.value.exit_code == 1


def replaced(plan: Plan, path: str, old: bytes, new: bytes) -> Plan:
    """PLAN writing NEW where it writes OLD in PATH."""
    changes = tuple(dataclasses.replace(c, after=c.after.replace(old, new)) if c.path == path else c for c in plan.changes)
    assert old in next(c.after for c in plan.changes if c.path == path) and old not in next(c.after for c in changes if c.path == path)
    return dataclasses.replace(plan, changes=changes)


def test_a_hand_written_definition_whose_parameters_drifted_is_the_undefined_symbol_a_build_meets_at_link_time(
    tmp_path: Path, checkout: Path, bypassed: tuple[dict, str],
) -> None:
    """at::native::mul defined with a parameter that is not const: BinaryOps.cpp compiles (a new overload), but the
    registration torchgen generates calls the declared one, which no object defines."""
    report, _ = bypassed
    # the fixture's vendor caller and static runtime do not compile: what they define is unknown, so nothing is judged
    (link,) = [line for line in report["unchecked"] if line.startswith(f"{compile_check.LINK}: ")]
    assert VENDOR_CALLER in link and STATIC_RUNTIME in link and "not compiled, so what they define is unknown" in link
    located = locate(compiling_copy(checkout, tmp_path / "tree"))
    plan = make_plan(located, "mul")
    journal.apply(located, [plan])
    report = verify(located, plan=plan)
    assert any(line.startswith("the ") and " objects link with no undefined symbol" in line for line in report.verified), report
    journal.revert(located, ["mul"])
    declared = b"at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {"
    plan = replaced(make_plan(located, "mul"), BINARY_OPS, declared, declared.replace(b"const at::Tensor& other", b"at::Tensor& other"))
    journal.apply(located, [plan])
    with pytest.raises(VerificationFailed) as failed:
        verify(located, plan=plan)
    message = str(failed.value)
    assert message.startswith("the compiled objects do not link"), message
    assert "`at::native::mul(at::Tensor const&, at::Tensor const&)`, referenced by " in message
    assert "build/aten/src/ATen/RegisterCompositeImplicitAutograd_0.cpp" in message.split("at::native::mul(", 1)[1].splitlines()[0]


def test_a_hand_written_api_that_does_not_compile_in_its_generated_source_is_refused_before_writing(
    tmp_path: Path, checkout: Path, bypassed: tuple[dict, str],  # after the CLI run on the same files: its compiles are cached
) -> None:
    """The hand-written at::mul lives in the Functions.cpp template; a call there that matches no at::native::mul is
    found by compiling the Functions.cpp torchgen generates from it (the template itself is not C++), on the bytes the
    bypass would write: refused with g++'s errors before anything is written, as the CLI runs it. The same compile's
    record is what verify finds, had the tree been written (the class of the real-sources sweep's `all` and `any`:
    torchgen's code for the op that g++ rejects)."""
    located = locate(built_copy(checkout, tmp_path / "tree"))
    template = f"{TEMPLATES}/Functions.cpp"
    plan = replaced(make_plan(located, "mul"), template, b"return at::native::mul(self, other);", b"return at::native::mul(self, other, other);")
    pristine = snapshot(located.root)
    with pytest.raises(VerificationFailed) as refused, codegen_ahead(located, [plan], compile_first=True) as verdicts:
        verdicts()
    message = str(refused.value)
    assert message.startswith("in the result of `bypass mul`, the code the bypass leaves does not compile"), message
    assert f"build/aten/src/ATen/Functions.cpp (generated from the edited {template}):" in message
    assert "no matching function for call to" in message and "at::native::mul" in message
    assert message.endswith("nothing was written (`--dry-run --no-verify` prints the patch)")
    assert snapshot(located.root) == pristine
    journal.apply(located, [plan])
    with pytest.raises(VerificationFailed) as failed:
        verify(located, plan=plan)
    assert f"build/aten/src/ATen/Functions.cpp (generated from the edited {template}):" in str(failed.value)


def test_a_hand_written_method_that_python_cannot_call_fails_in_the_generated_bindings(tmp_path: Path) -> None:
    """Tensor::mul_ written by hand without `const`: the kernel sources compile (their callers hold a mutable tensor),
    but the Python binding the autograd codegen generates calls it on a const tensor, as every generated method is
    called: the op's bindings, compiled, find it. (Compiled with the edited sources alone: every other generated unit
    would be compiled again against the changed headers, and none of them calls the method.)"""
    located = locate(full_tree(tmp_path, {}))  # where every source compiles
    plan = make_plan(located, "mul")
    in_place = b"mul_(const at::Tensor& other) const"
    for template in (f"{TEMPLATES}/TensorBody.h", f"{TEMPLATES}/TensorMethods.cpp"):
        plan = replaced(plan, template, in_place, in_place.removesuffix(b" const"))
    journal.apply(located, [plan])
    headers = compile_check.regenerate_headers(located)
    bindings = [u for u in generated_sources(located, [plan], headers).units if u.path == f"{AUTOGRAD_OUT}/python_variable_methods.cpp"]
    assert len(bindings) == 1 and b"self.mul_(other)" in bindings[0].text
    with pytest.raises(VerificationFailed) as failed:
        compile_check.check(located, headers, [plan], units=bindings)
    message = str(failed.value)
    assert f"{AUTOGRAD_OUT}/python_variable_methods.cpp (generated by the autograd codegen):" in message, message
    assert "discards qualifiers" in message and BINARY_OPS + ":" not in message


# A structured op taking a tensor list, in the shape of PyTorch's own kernel sources (a precomputed meta, as the
# wheel's yaml declares cat.out's), written for these tests: laid over a full tree, it makes cat bypassable.
CAT_KERNEL = f"{NATIVE_SOURCES}/TensorShape.cpp"
CAT_KERNEL_TEXT = """#include <ATen/core/Tensor.h>
#include <ATen/TensorMeta.h>
#include <ATen/WrapDimUtils.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/cat_meta.h>
#include <ATen/ops/cat_native.h>
#endif

// cat: the tensors one after the other along one dimension; the others must agree.

namespace at::meta {

TORCH_PRECOMPUTE_META_FUNC(cat)(const ITensorListRef& tensors, int64_t dim) {
  const auto parts = tensors.materialize();
  TORCH_CHECK(!parts.empty(), "cat expects a non-empty list of tensors");
  const Tensor& first = parts[0];
  const int64_t along = maybe_wrap_dim(dim, first.dim());
  DimVector shape(first.sizes().begin(), first.sizes().end());
  shape[along] = 0;
  for (const Tensor& part : parts) {
    shape[along] += part.size(along);
  }
  set_output_raw_strided(0, shape, {}, first.options());
  return TORCH_PRECOMPUTE_STRUCT(cat)()
      .set_dim(along)
      .set_valid(0)
      .set_all_contiguous(false)
      .set_all_same_dtype(true)
      .set_all_same_sizes_and_stride(false)
      .set_memory_format(MemoryFormat::Contiguous);
}

} // namespace at::meta

namespace at::native {

TORCH_IMPL_FUNC(cat_out_cpu)
(const ITensorListRef& tensors, int64_t dim, int64_t valid, bool all_contiguous, bool all_same_dtype,
 bool all_same_sizes_and_stride, MemoryFormat memory_format, const Tensor& result) {
  int64_t offset = 0;
  for (const Tensor& part : tensors) {
    result.narrow(dim, offset, part.size(dim)).copy_(part);
    offset += part.size(dim);
  }
}

} // namespace at::native
"""


def test_a_tensor_list_reaches_the_kernel_the_bypass_leaves_unstructured(tmp_path: Path) -> None:
    """Found by the sweep of PyTorch's own TensorShape.cpp: torchgen spells cat's `Tensor[]` ITensorListRef only while
    its group is structured, so after the bypass the native API it declares takes a TensorList. The at::native:: forwards
    written by hand take it so (a drifted one is a new overload: a build meets the declared one undefined at link time);
    the hand-written at::cat keeps its API and passes them a copy of the list. The kernel source and the Functions.cpp
    torchgen generates from the edited template compile against the regenerated headers, and their objects link. An op
    without methods leaves TensorBody.h and TensorMethods.cpp as they are."""
    located = locate(full_tree(tmp_path, {CAT_KERNEL: CAT_KERNEL_TEXT}))
    plan = make_plan(located, "cat")
    assert not {f"{TEMPLATES}/TensorBody.h", f"{TEMPLATES}/TensorMethods.cpp"} & {change.path for change in plan.changes}
    journal.apply(located, [plan])
    functions = located.path(f"{TEMPLATES}/Functions.cpp").read_text()
    assert "at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {" in functions
    assert functions.count("std::vector<at::Tensor>(tensors.begin(), tensors.end())") == 3  # cat, cat_out, cat_outf
    assert "at::Tensor cat(at::TensorList tensors, int64_t dim) {" in located.path(CAT_KERNEL).read_text()
    assert_kernel_and_functions_cpp_compile_and_link(located, plan, CAT_KERNEL)


def assert_kernel_and_functions_cpp_compile_and_link(located: Tree, plan: Plan, kernel: str) -> None:
    """The kernel source and the Functions.cpp torchgen generates from the edited template compile against the
    regenerated headers, and their two objects link."""
    headers = compile_check.regenerate_headers(located)
    units = [u for u in generated_sources(located, [plan], headers).units if u.path == "build/aten/src/ATen/Functions.cpp"]
    assert len(units) == 1 and f"at::native::{plan.op}(".encode() in units[0].text
    report = compile_check.check(located, headers, [plan], units=units)
    assert report.compiled == (kernel, "build/aten/src/ATen/Functions.cpp") and report.not_compiled == ()
    assert report.linked == 2


# An op taking an int array, which the dispatcher takes as SymInt[] (a kernel of ours in PyTorch's shape).
PAD_KERNEL = f"{NATIVE_SOURCES}/ReplicationPadding.cpp"
PAD_KERNEL_TEXT = """#include <algorithm>

#include <ATen/core/Tensor.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/replication_pad1d_meta.h>
#include <ATen/ops/replication_pad1d_native.h>
#endif

// replication_pad1d: the last dimension widened on each side by repeating its edge values.

namespace at::meta {

TORCH_META_FUNC(replication_pad1d)(const Tensor& input, IntArrayRef padding) {
  TORCH_CHECK(padding.size() == 2, "padding size is expected to be 2");
  TORCH_CHECK(input.dim() == 2 || input.dim() == 3, "expected a 2D or 3D input, got ", input.dim(), "D");
  DimVector shape(input.sizes().begin(), input.sizes().end());
  shape.back() += padding[0] + padding[1];
  TORCH_CHECK(shape.back() >= 1, "the padded width must be at least 1, got ", shape.back());
  set_output_raw_strided(0, shape, {}, input.options());
}

} // namespace at::meta

namespace at::native {

TORCH_IMPL_FUNC(replication_pad1d_out_cpu)
(const Tensor& input, IntArrayRef padding, const Tensor& output) {
  const int64_t width = input.size(-1);
  for (int64_t column = 0; column < output.size(-1); ++column) {
    const int64_t from = std::clamp<int64_t>(column - padding[0], 0, width - 1);
    output.select(-1, column).copy_(input.select(-1, from));
  }
}

} // namespace at::native
"""


def test_an_int_array_reaches_the_kernel_in_the_type_each_function_takes_it(tmp_path: Path) -> None:
    """Found by the sweep of PyTorch's own UpSampleBicubic2d.cpp: the generated at:: function taking an IntArrayRef
    passes the dispatcher a SymIntArrayRef it makes of it (c10::fromIntArrayRefSlow), and the kernel the bypass calls
    instead takes the IntArrayRef: the hand-written function passes its own, the `_symint` one converts its
    SymIntArrayRef as torchgen's wrapper does. Generated Functions.cpp did not compile."""
    located = locate(full_tree(tmp_path, {PAD_KERNEL: PAD_KERNEL_TEXT}))
    plan = make_plan(located, "replication_pad1d")
    journal.apply(located, [plan])
    functions = re.sub(r"\s+", " ", located.path(f"{TEMPLATES}/Functions.cpp").read_text()).replace("( ", "(").replace(" )", ")")
    for head, call in (
        ("replication_pad1d(const at::Tensor& self, at::IntArrayRef padding)", "(self, padding)"),
        ("replication_pad1d_symint(const at::Tensor& self, c10::SymIntArrayRef padding)", "(self, C10_AS_INTARRAYREF_SLOW(padding))"),
        ("replication_pad1d_out(at::Tensor& out, const at::Tensor& self, at::IntArrayRef padding)", "_out(self, padding, out)"),
    ):
        assert f"{head} {{ return at::native::replication_pad1d{call};" in functions, head
    assert "fromIntArrayRefSlow" not in functions
    assert_kernel_and_functions_cpp_compile_and_link(located, plan, PAD_KERNEL)


def test_where_the_autograd_codegen_refuses_the_op_s_entries_alone_its_sources_are_named_not_compiled(
    tmp_path: Path, checkout: Path, bypassed: tuple[dict, str],  # after the CLI run on the same files: its compiles are cached
) -> None:
    """A tree's own autograd codegen whose Python bindings need the whole yaml: its run on the whole edited yaml passes,
    so the bypass is verified, and the autograd sources are named as not compiled with the codegen's own words."""
    tree = built_copy(checkout, tmp_path / "tree")
    codegen_code = tree / "tools/autograd/gen_autograd.py"
    text = codegen_code.read_text()
    assert "def gen_autograd_python(" in text
    codegen_code.write_text(text.replace("def gen_autograd_python(", "def gen_autograd_python(*args, **kwargs):\n    raise RuntimeError('codemod fixture: the bindings need every entry')\n\n\ndef _unused(", 1))
    result = run_codemod("bypass", "mul", "--tree", str(tree), "--no-build", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = "torch/csrc/autograd/generated/: the autograd codegen refuses the op's entries alone (RuntimeError: codemod fixture: the bindings need every entry)"
    assert any(item.startswith(expected) for item in report["unchecked"]), report["unchecked"]
    assert "(generated by the autograd codegen)" not in _compile_line(report["verified"])


def test_the_regenerated_headers_precompiled_change_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """In an empty build cache, with a PCH made for two users or more, the files of a bypass that read the regenerated
    Functions.h alike with it as without it load one PCH of it, made once; VariableTypeManual.cpp, which reads c10's OptionalRef.h before the assert macro
    that header uses is defined (so with the PCH it would read the macro expanded), is refused it. Compiled again without
    that PCH (a header no file reads in its place), in a cache holding only the records of the compiles that loaded none
    (the same command again: g++ is not run twice on them), every verdict is the same."""
    located = locate(full_tree(tmp_path, {}))
    plan = make_plan(located, "mul")
    journal.apply(located, [plan])
    headers = compile_check.regenerate_headers(located)

    def compile_check_in(cache: str) -> tuple[compile_check.CompileReport, list[str]]:
        monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / cache))
        progress.set_level(progress.VERBOSE)
        try:
            report = compile_check.check(located, headers, [plan])
        finally:
            progress.set_level(progress.NORMAL)
        return report, capsys.readouterr().err.splitlines()

    monkeypatch.setattr(compile_check, "GENERATED_PCH_USERS", 2)  # made here for the three files that pass the check
    with_pch, said = compile_check_in("with")
    loading = {line.rsplit(" ", 1)[1] for line in said if line.startswith("$ ") and " -c " in line and "/generated_pch.h " in line}
    assert {located.path(BINARY_OPS).as_posix(), located.path("aten/src/ATen/native/BlasScale.cpp").as_posix()} <= loading
    assert not any(path.endswith("VariableTypeManual.cpp") for path in loading)
    assert sum(line.startswith("precompile generated_pch.h") for line in said) == 1
    records = {record: json.loads(record.read_text()) for record in (tmp_path / "with" / "syntax").glob("*.json")}
    precompiled = [kept for kept in records.values() if kept.get("precompiled")]
    # what the PCH read is what they read (g++'s -MD names none of it): a change there is a change of their inputs
    assert len(precompiled) == len(loading)
    assert all(any(path.endswith("/c10/core/TensorImpl.h") for path in kept["outside_tree"]) for kept in precompiled)
    (tmp_path / "without" / "syntax").mkdir(parents=True)
    for record, kept in records.items():
        if not kept.get("precompiled"):
            for kept_file in (record, record.with_suffix(".o")):  # the record and the object a clean compile's names
                if kept_file.is_file():
                    shutil.copy(kept_file, tmp_path / "without" / "syntax" / kept_file.name)
    reads_nothing = tmp_path / "reads_nothing.h"
    reads_nothing.write_text("#include <codemod_no_file_reads_this.h>\n")
    monkeypatch.setattr(compile_check, "GENERATED_PCH", reads_nothing)
    without_pch, said = compile_check_in("without")
    assert not any(line.startswith("precompile reads_nothing.h") for line in said)
    compiled_again = {line.rsplit(" ", 1)[1] for line in said if line.startswith("$ ") and " -c " in line}
    assert compiled_again == loading  # those that loaded the PCH, compiled now without it
    same = ("compiled", "templates_compiled", "not_compiled", "through", "per_operator")
    assert [getattr(with_pch, name) for name in same] == [getattr(without_pch, name) for name in same]
    assert set(with_pch.compiled) == {BINARY_OPS, "aten/src/ATen/native/BlasScale.cpp", STATIC_RUNTIME, "torch/csrc/autograd/VariableTypeManual.cpp"}


def test_a_slim_trees_headers_are_not_used_and_the_reason_is_given(checkout: Path) -> None:
    slim = compile_check.slim_tree(locate(TARGET_TREE))
    assert slim is not None and "lacks" in slim and "compiled against a full tree's headers" in slim
    assert compile_check.slim_tree(locate(checkout)) is None
