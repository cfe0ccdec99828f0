"""The bypass's CPU scaffolding as a Python extension, for the check against torch.

The source holds exactly what `codemod bypass OP` splices into the native source
(`plan_cpp.scaffolding`: the CPU helpers, structured classes, wrappers and the
`at::native::` forwards), in namespace `codemod_ext_OP` as `codemod build`'s harness
has it, compiled against the installed, unmodified libtorch (whose headers still
declare, and whose library exports, the meta and native structs). Each overload of
each structured group with a CPU wrapper is bound under its overload name with dots
as underscores (`ext.sum_dim_IntList(self=..., dim=..., keepdim=..., dtype=...)`,
`ext.cumsum_out(..., out=...)`, `ext.cumsum_(...)`), its parameters by the names
of the captured declaration; `ext.quietly(f)` runs `f()` with libtorch's warnings off. Several ops can share one extension (one compile).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from codemod.capture.capture import Capture
from codemod.model.errors import BadInput
from codemod.model.tree import Tree
from codemod.plan import cpp as plan_cpp
from codemod.verify import extension
from codemod.verify.captured import bypassed_or_current
from codemod.verify.harness import harness_includes
from codemod.verify.signature import (
    VIEW_STORAGE,
    Parameter,
    ext_namespace,
    forward_parameters,
    plain_type,
    python_name,
    value_return_type,
)

# A parameter's type (as declared, without const and &) -> the type the binding takes from Python, and how
# the taken value `{}` is passed on. pybind11 (with torch's casters) converts the rest by value.
_TAKEN = {
    "at::Scalar": ("py::handle", "to_scalar({})"),
    "std::optional<at::Scalar>": ("py::handle", "({0}.is_none() ? std::optional<at::Scalar>() : std::optional<at::Scalar>(to_scalar({0})))"),
    **VIEW_STORAGE,
    "std::optional<c10::string_view>": ("std::optional<std::string>", "({0} ? std::optional<c10::string_view>(*{0}) : std::nullopt)"),
    "c10::string_view": ("std::string", "c10::string_view({})"),
    # `Tensor?[]` (index's indices): a Python list of tensors and Nones
    "c10::List<std::optional<at::Tensor>>": (
        "std::vector<std::optional<at::Tensor>>", "c10::List<std::optional<at::Tensor>>(c10::ArrayRef<std::optional<at::Tensor>>({}))"),
}
_BY_VALUE = {
    "at::Tensor", "std::optional<at::Tensor>", "bool", "int64_t", "double", "at::ScalarType",
    "std::optional<at::ScalarType>", "std::optional<int64_t>", "std::optional<double>", "std::optional<bool>",
}
# Every parameter type the check binds, by plain_type (tests/test_bound_types.py checks that it holds each type a
# structured group of the installed torch has).
BOUND_TYPES = (*_TAKEN, *sorted(_BY_VALUE))


@dataclass(frozen=True)
class Bound:
    """An overload the extension binds: its Python name and the C++ function it calls."""

    overload: str
    python_name: str
    callee: str
    params: tuple[Parameter, ...]
    returns: str  # the callee's return type, by value


def bound_overloads(capture: Capture) -> list[Bound]:
    """Every overload with a CPU wrapper, bound to the at::native:: forward the bypass writes for it."""
    found = []
    for overload, wrapper in capture.cpu_wrappers.items():
        snippet = next((s for s in capture.cpu_scaffolding if s.name == wrapper), None)
        if snippet is None:
            raise BadInput(f"{capture.op}: the CPU wrapper {wrapper} of {overload} was not captured")
        callee = f"{ext_namespace(capture.op)}::{capture.native_kernels[overload]}"
        found.append(Bound(overload, python_name(overload), callee, tuple(forward_parameters(snippet.text)), value_return_type(snippet.text)))
    return found


def binding(bound: Bound) -> str:
    """`m.def` of a lambda taking each parameter as Python gives it, passing it on as the C++ function wants."""
    taken, passed = [], []
    for p in bound.params:
        plain = plain_type(p.type)
        if plain in _TAKEN:
            python_type, expression = _TAKEN[plain]
        elif plain in _BY_VALUE:
            python_type, expression = plain, "{}"
        else:
            raise BadInput(f"{bound.overload}: the check cannot pass `{p.name}` of type {p.type} from Python")
        taken.append(f"{python_type} {p.name}")
        passed.append(expression.format(p.name))
    names = "".join(f', py::arg("{p.name}")' for p in bound.params)
    # by value: a tuple of references would outlive the lambda's parameters (the out= tensors, which Python then
    # gets back as the very objects it passed in)
    return (f'  m.def("{bound.python_name}", []({", ".join(taken)}) -> {bound.returns} {{\n'
            f'    return {bound.callee}({", ".join(passed)});\n  }}{names});')


def render(captures: list[Capture], module_name: str) -> str:
    """An extension holding only the bypasses of CAPTURES and their bindings."""
    includes = dict.fromkeys(i for c in captures for i in harness_includes(c))
    return "\n".join([
        "// The CPU scaffolding `codemod bypass` writes (rendered by plan_cpp, not copied), bound for Python.",
        "#include <ATen/ATen.h>",
        "#include <ATen/NativeFunctions.h>",
        "#include <ATen/native/Resize.h>",
        *includes,
        "",
        *(f"namespace {ext_namespace(c.op)} {{\nusing namespace at;  // the spliced text lives in namespace at::native\n"
          f"{plan_cpp.scaffolding(c)}\n}} // namespace {ext_namespace(c.op)}\n" for c in captures),
        bindings(captures, module_name),
    ])


def bindings(captures: list[Capture], module_name: str) -> str:
    """The module binding the bypasses of CAPTURES, for a source that holds their scaffolding in its namespace (an
    extension of its own, or `codemod build`'s harness: then one compile gives both)."""
    return "\n".join([
        "#include <torch/csrc/utils/pybind.h>",
        "",
        extension.TO_SCALAR,
        "",
        "// The check compares results and errors; libtorch's warnings (out= resized, ...) would only be noise.",
        "struct Silent final : c10::WarningHandler {",
        "  void process(const c10::Warning&) override {}",
        "} silent;",
        "",
        f"PYBIND11_MODULE({module_name}, m) {{",
        '  m.def("quietly", [](py::function run) {',
        "    c10::WarningUtils::WarningHandlerGuard quiet(&silent);",
        "    return run();",
        "  });",
        *(binding(b) for c in captures for b in bound_overloads(c)),
        "}",
        "",
    ])


def unbindable(capture: Capture) -> BadInput | None:
    """Why the check cannot bind CAPTURE's bypass (an overload whose parameter Python cannot pass), or None."""
    try:
        for bound in bound_overloads(capture):
            binding(bound)
    except BadInput as refusal:
        return refusal
    return None


STEM = "codemod_check_{}"


def load(tree: Tree, ops: list[str], captured: dict[str, Capture] | None = None) -> tuple[ModuleType, bool]:
    """One extension binding the bypass of every op of OPS; CAPTURED: plans' captures, by op, where there are."""
    captured = captured or {}
    captures = [captured.get(op) or bypassed_or_current(tree, op)[1] for op in ops]
    for capture in captures:  # refuse an unbindable signature before compiling anything
        refusal = unbindable(capture)
        if refusal is not None:
            raise refusal
    stem = STEM.format(ops[0] if len(ops) == 1 else f"{len(ops)}_ops")
    return extension.load(stem, lambda name: render(captures, name))
