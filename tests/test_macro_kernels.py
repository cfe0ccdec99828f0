"""Structured kernels defined through a file's own macros, found where the compiler sees them (issue 12, items 1, 2, 6).

The finder runs on macro shapes written here; `ops` lists target_tree/'s macro-defined ops as bypassable;
each op target_tree/ defines through macros, with the lerp name coincidence, with
its meta and impl in two files, or with other backends' kernels elsewhere (addmv)
bypasses with verification and reverts byte-identical; and the native sources the
bypass edits compile against the headers the bypassed tree's torchgen regenerates.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from codemod.model.tree import NATIVE_SOURCES
from codemod.plan.structured_kernels import IMPL, META, definitions_in
from tests.conftest import TARGET_TREE, run_codemod, snapshot
from tests.full_tree import COMPILED_MACRO_UNITS, MACRO_OPS, MACRO_UNITS, BypassedFullTree
from tests.test_ops import ops_json

# The compile-and-check harness of `bypass` takes `(self, other)` ops with an in-place overload;
# the others bypass with --no-build (the codegen verification still runs).
BUILT = {"nextafter"}

SHAPES = r"""
#define ASSERT_ONLY 1
namespace at::meta {
// one op per macro
#define FLOAT_META(op) \
  TORCH_META_FUNC(op) (const Tensor& self) { build_borrowing_unary_float_op(maybe_get_output(), self); }
FLOAT_META(sin)
FLOAT_META(cos);
// several ops per macro, and an overload per op
#define COMPARE_META(op)                                                          \
  TORCH_META_FUNC2(op, Tensor)(const Tensor& self, const Tensor& other) { f(); }  \
  TORCH_META_FUNC2(op, Scalar)(const Tensor& self, const Scalar& other) { g(); }
COMPARE_META(eq)
TORCH_META_FUNC2(lerp, Scalar) (const Tensor& self, const Tensor& end, const Scalar& weight) { if (a) { b(); } }
#if 0
TORCH_META_FUNC(tan) (const Tensor& self) {}
FLOAT_META(atan)
#elif ASSERT_ONLY && defined(FLOAT_META)
FLOAT_META(exp)
#else
FLOAT_META(log)
#endif
#ifdef FROM_THE_BUILD
FLOAT_META(sqrt)
#endif
// FLOAT_META(acos) and TORCH_META_FUNC(asin) (const Tensor& self) {}
/* COMPARE_META(ne) */
const char* text = "TORCH_META_FUNC(cosh) (const Tensor& self) {}";
} // namespace at::meta
namespace at::native {
// a macro calling a macro, with ## pasting
#define UNARY_IMPL_WITH_STUB(kernel, stub) \
  TORCH_IMPL_FUNC(kernel) (const Tensor& self, const Tensor& result) { stub(device_type(), *this); }
#define UNARY_IMPL(op) UNARY_IMPL_WITH_STUB(op##_out, op##_stub)
UNARY_IMPL(sin)
UNARY_IMPL(
    cos)
TORCH_IMPL_FUNC(lerp_Scalar) (const Tensor& self, const Tensor& end, const Scalar& weight, const Tensor& out) {}
// a comment inside a long #define once made tree-sitter read it as object-like
#define INTEGER_NO_OP_IMPL(kernel, stub)                                \
TORCH_IMPL_FUNC(kernel) (const Tensor& self, const Tensor& result) {    \
  if (c10::isIntegralType(self.scalar_type(), /*includeBool=*/false)) { \
    result.copy_(self);                                                 \
  } else {                                                              \
    stub(device_type(), *this);                                         \
  }                                                                     \
}
INTEGER_NO_OP_IMPL(ceil_out, ceil_stub)
#undef UNARY_IMPL
UNARY_IMPL(exp)
} // namespace at::native
"""


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_the_finder_expands_the_files_own_macros_where_they_are_invoked() -> None:
    found = definitions_in("Shapes.cpp", SHAPES.encode())
    where = {(d.kind, d.struct): (d.line, d.macro) for d in found}
    assert where == {
        (META, "structured_sin"): (_line(SHAPES, "FLOAT_META(sin)"), "FLOAT_META"),
        (META, "structured_cos"): (_line(SHAPES, "FLOAT_META(cos)"), "FLOAT_META"),
        (META, "structured_eq_Tensor"): (_line(SHAPES, "COMPARE_META(eq)"), "COMPARE_META"),
        (META, "structured_eq_Scalar"): (_line(SHAPES, "COMPARE_META(eq)"), "COMPARE_META"),
        (META, "structured_lerp_Scalar"): (_line(SHAPES, "TORCH_META_FUNC2(lerp"), None),
        # `ASSERT_ONLY && defined(FLOAT_META)` is decided by the file's own macros: the #else is dead
        (META, "structured_exp"): (_line(SHAPES, "FLOAT_META(exp)"), "FLOAT_META"),
        # a branch the build decides may be compiled: its definitions count
        (META, "structured_sqrt"): (_line(SHAPES, "FLOAT_META(sqrt)"), "FLOAT_META"),
        (IMPL, "structured_sin_out"): (_line(SHAPES, "UNARY_IMPL(sin)"), "UNARY_IMPL"),
        (IMPL, "structured_cos_out"): (_line(SHAPES, "UNARY_IMPL(\n"), "UNARY_IMPL"),
        # the meta and the native struct of lerp share a name; their kinds tell them apart
        (IMPL, "structured_lerp_Scalar"): (_line(SHAPES, "TORCH_IMPL_FUNC(lerp_Scalar)"), None),
        (IMPL, "structured_ceil_out"): (_line(SHAPES, "INTEGER_NO_OP_IMPL(ceil_out"), "INTEGER_NO_OP_IMPL"),
        # and nothing from #if 0 (tan, atan), the dead #else (log), comments (acos, asin, ne),
        # a string (cosh), or UNARY_IMPL used after its #undef (exp_out)
    }


def test_a_definition_spans_its_invocation_or_its_body() -> None:
    data = SHAPES.encode()
    spans = {(d.kind, d.struct): data[d.start : d.end].decode() for d in definitions_in("Shapes.cpp", data)}
    assert spans[IMPL, "structured_cos_out"] == "UNARY_IMPL(\n    cos)"
    assert spans[META, "structured_eq_Scalar"] == "COMPARE_META(eq)"
    assert spans[META, "structured_lerp_Scalar"].endswith("{ if (a) { b(); } }")


def test_target_tree_sources_in_the_real_shapes() -> None:
    unary = (TARGET_TREE / NATIVE_SOURCES / "UnaryOps.cpp").read_bytes()
    found = {(d.kind, d.struct): d for d in definitions_in("UnaryOps.cpp", unary)}
    assert {d.macro for d in found.values()} == {"UNARY_FLOAT_META", "UNARY_META_REFUSING_BOOL", "UNARY_IMPL", "UNARY_IMPL_WITH_STUB"}
    assert {name for _, name in found} == {
        f"structured_{op}{suffix}" for op in ("sin", "cos", "exp", "neg") for suffix in ("", "_out")
    }
    lerp = (TARGET_TREE / NATIVE_SOURCES / "Lerp.cpp").read_bytes()
    assert {d.key for d in definitions_in("Lerp.cpp", lerp)} == {
        (kind, f"structured_lerp_{overload}") for kind in (META, IMPL) for overload in ("Scalar", "Tensor")
    }


def test_ops_lists_the_macro_ops_as_bypassable_and_names_the_structs_it_cannot_find(tree: Path) -> None:
    """(That `bypass` accepts exactly what `ops` lists: tests/test_ops.py.)"""
    statuses = ops_json(tree)
    assert set(MACRO_OPS) <= {op for op, status in statuses.items() if status["bypassable"]}
    # tan's kernels are only in `#if 0` and in comments: both say so, naming the structs by kind
    refused = run_codemod("bypass", "tan", "--tree", str(tree), "--dry-run")
    assert statuses["tan"]["reason"] == "kernel source not in the tree" and refused.returncode == 2
    for said in (statuses["tan"]["detail"], refused.stderr):
        assert "at::meta::structured_tan, at::native::structured_tan_out" in said


def test_lerp_keeps_its_meta_and_its_native_struct(tree: Path, tmp_path: Path) -> None:
    patch = tmp_path / "lerp.patch"
    run = run_codemod("bypass", "lerp", "--tree", str(tree), "--dry-run", "--patch", str(patch))
    assert run.returncode == 0, run.stderr
    shutil.copytree(tree, tmp_path / "applied")
    applied = run_codemod("bypass", "lerp", "--tree", str(tmp_path / "applied"), "--no-build", "--no-verify")
    assert applied.returncode == 0, applied.stderr
    lerp = " ".join((tmp_path / "applied" / NATIVE_SOURCES / "Lerp.cpp").read_text().split())  # as clang-format may wrap
    for overload in ("Scalar", "Tensor"):
        meta = f"struct TORCH_API structured_lerp_{overload} : public TensorIteratorBase {{"
        native = f"struct TORCH_API structured_lerp_{overload} : public at::meta::structured_lerp_{overload} {{"
        # each once, before its own definition, in its own namespace
        assert lerp.count(meta) == 1 and lerp.count(native) == 1
        assert lerp.index("namespace at::meta {") < lerp.index(meta) < lerp.index(f"TORCH_META_FUNC2(lerp, {overload})")
        assert lerp.index("namespace at::native {") < lerp.index(native) < lerp.index(f"TORCH_IMPL_FUNC(lerp_{overload})")


def test_addmv_needs_only_its_cpu_kernel_and_reports_the_others_lost(tree: Path) -> None:
    run = run_codemod("bypass", "addmv", "--tree", str(tree), "--dry-run")
    assert run.returncode == 0, run.stderr
    assert "structured_addmv_out_cuda" in run.stderr.split("addmv loses:")[1]
    assert "struct TORCH_API structured_addmv_out_cpu : public at::meta::structured_addmv" in run.stdout
    assert "structured_addmv_out_cuda" not in run.stdout


def test_each_op_in_these_shapes_bypasses_verified_and_reverts_byte_identical(tree: Path) -> None:
    before = snapshot(tree)
    for op in MACRO_OPS:  # one tree: sin, cos, exp and neg share UnaryOps.cpp, eq and lt Comparison.cpp
        flags = () if op in BUILT else ("--no-build",)  # g++ on the edited sources: test_edited_sources_compile...
        run = run_codemod("bypass", op, "--tree", str(tree), *flags, "--no-compile")
        assert run.returncode == 0, f"{op}: {run.stderr}"
        assert "verified: torchgen (ATen codegen) ran clean" in run.stderr, op
        if op in BUILT:
            assert "checks: " in run.stderr and ", 0 failed" in run.stderr, run.stderr
        edited = {line.split()[0] for line in run.stderr.splitlines() if line.startswith(f"  {NATIVE_SOURCES}/") and ".cpp " in line}
        assert edited == {f"{NATIVE_SOURCES}/{name}" for name in MACRO_OPS[op]}, (op, edited)
    # Last bypassed, first reverted. (In bypass order, the three-way revert refuses exp: sin's and cos's
    # formulas, put back by their reverts, sit right where exp's bypass deleted its own.)
    for op in reversed(MACRO_OPS):
        reverted = run_codemod("revert", op, "--tree", str(tree))
        assert reverted.returncode == 0, f"{op}: {reverted.stderr}"
    assert snapshot(tree) == before


@pytest.mark.sampled(drawn=list(COMPILED_MACRO_UNITS), of=len(MACRO_UNITS))
def test_the_edited_sources_compile_against_the_regenerated_headers(bypassed_full_tree: BypassedFullTree) -> None:
    """Each op above bypassed in conftest's full tree (after test_real_tree.py's ops), its ATen regenerated, the
    sources the bypasses edit compiled against the regenerated headers (a sample of them: full_tree.py)."""
    runs = bypassed_full_tree.runs
    for op in MACRO_OPS:
        assert runs[f"bypass {op}"].returncode == 0, f"bypass {op}: {runs[f'bypass {op}'].stderr}"
    assert runs["torchgen"].returncode == 0, runs["torchgen"].stderr[-3000:]
    for name in COMPILED_MACRO_UNITS:
        result = bypassed_full_tree.compiles[name]
        assert result.returncode == 0, f"{name}:\n{result.stderr[-4000:]}"
