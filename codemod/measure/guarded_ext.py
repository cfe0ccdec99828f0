"""The guarded bypass as a Python extension, compiled against the installed libtorch.

`codemod bypass OP --guarded` writes the guard into Functions.h and the guarded
`at::OP`, `at::OP_out`, `Tensor::OP`, `Tensor::OP_` into the templates. This module
renders that text (`plan_guarded.guard` and `guarded_definition`, one source of truth;
the tree's copy is only laid out by clang-format) into its own namespace, since the
installed libtorch already defines those names, and exposes it to Python:

- the functions under their own names: `ext.mul(a, b)`, `ext.mul_out(out, a, b)`, ...;
- each method as a free function taking `self`: `ext.method_mul_(a, b)` is `a.mul_(b)`;
- `ext.cpu_fast_path(*tensors)` (2 or 3 tensors): the guard's decision, for the tests.

Built and cached by `codemod.verify.extension` (torch.utils.cpp_extension); a cache hit
only imports the shared library.

`build` puts the same definitions in `codemod build`'s harness in place of the plain
bypass: the gate `bypass OP --guarded` passes before it writes anything.
"""
from __future__ import annotations

import re
from types import ModuleType

from codemod.capture.capture import Capture
from codemod.model.tree import Tree
from codemod.plan import guarded as plan_guarded
from codemod.plan.plan import op_entries
from codemod.verify import bypass_ext, extension
from codemod.verify.build import compile_harness
from codemod.verify.captured import bypassed_or_current
from codemod.verify.compiler import Built
from codemod.verify.harness import GuardedApi
from codemod.verify.harness import render as harness_source
from codemod.verify.signature import Parameter, parameters, value_return_type

METHOD_PREFIX = "method_"
# `Tensor::mul_(` with or without parameters after it: the method's name and whether it has any.
_METHOD_HEAD = re.compile(r"\bTensor::(\w+)\((\s*\))?")
_CONST_BEFORE_BODY = re.compile(r"\)\s*const\s*\{", re.MULTILINE)


def ext_namespace(op: str) -> str:
    return f"codemod_guarded_ext_{op}"


def as_free_function(definition: str) -> str:
    """A guarded `Tensor::NAME` definition as `method_NAME(const at::Tensor & self, ...)`: same body, `*this` is `self`."""
    head_end = definition.index("{")
    head, body = definition[:head_end + 1], definition[head_end + 1:]
    head = _METHOD_HEAD.sub(
        lambda m: f"{METHOD_PREFIX}{m[1]}(const at::Tensor & self" + (")" if m[2] else ", "), head, count=1
    )
    head = _CONST_BEFORE_BODY.sub(") {", head)
    return head + body.replace("*this", "self")


def _binding(name: str, params: list[Parameter], namespace: str, declaration: str) -> str:
    """`m.def` of NAME, each argument taken as Python gives it (as the bypass check's bindings take them)."""
    return bypass_ext.binding(bypass_ext.Bound(name, name, f"{namespace}::{name}", tuple(params), value_return_type(declaration)))


def guarded_source(capture: Capture) -> str:
    """The headers plan_guarded includes, then its guard and guarded definitions in the extension's namespace."""
    op = capture.op
    cpu = set(capture.cpu_functions)
    definitions = [plan_guarded.guarded_definition(op, f, cpu) for f in capture.functions] + [
        as_free_function(plan_guarded.guarded_definition(op, m, cpu)) for m in capture.methods
    ]
    return "\n".join([
        f"// The guarded bypass as `codemod bypass {op} --guarded` writes it (rendered by plan_guarded, not copied).",
        *plan_guarded.FUNCTIONS_H_INCLUDES,
        *plan_guarded.DEFINITION_INCLUDES,
        f"namespace {ext_namespace(op)} {{",
        "using at::Tensor;  // the method definitions name it unqualified, as inside namespace at",
        plan_guarded.guard(op),
        "",
        "\n\n".join(definitions),
        f"}} // namespace {ext_namespace(op)}",
    ])


def build(tree: Tree, op: str, capture: Capture) -> Built:
    """`codemod build`'s harness with the guarded definitions as the bypass path, compiled: the same checks
    against `at::OP` as the plain bypass passes (checks.run_checks), before `bypass --guarded` writes them."""
    guarded = GuardedApi(guarded_source(capture), ext_namespace(op), METHOD_PREFIX)
    return compile_harness(harness_source(capture, op_entries(tree, op).groups, guarded), f"guarded-{op}")


def render(capture: Capture, module_name: str) -> str:
    namespace = ext_namespace(capture.op)
    self_param = Parameter("self", "at::Tensor", None)
    bindings = [_binding(f.name, parameters(f.declaration), namespace, f.declaration) for f in capture.functions] + [
        _binding(f"{METHOD_PREFIX}{m.name}", [self_param, *parameters(m.declaration)], namespace, m.declaration)
        for m in capture.methods
    ]
    guard = f"{namespace}::{plan_guarded.guard_namespace(capture.op)}::cpu_fast_path"
    return "\n".join([
        guarded_source(capture),
        "",
        "#include <torch/csrc/utils/pybind.h>",
        "",
        extension.TO_SCALAR,
        "",
        f"PYBIND11_MODULE({module_name}, m) {{",
        *bindings,
        "  // the guard's decision, for the tests: does this call take the fast path?",
        f'  m.def("cpu_fast_path", [](const at::Tensor& a, const at::Tensor& b) {{ return static_cast<bool>({guard}(a, b)); }});',
        '  m.def("cpu_fast_path", [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {',
        f"    return static_cast<bool>({guard}(a, b, c));",
        "  });",
        "}",
        "",
    ])


def load(tree: Tree, op: str) -> tuple[ModuleType, bool]:
    """The compiled extension of OP's guarded bypass, and whether it came from the cache."""
    capture = bypassed_or_current(tree, op, guarded=True)[1]
    return extension.load(f"codemod_guarded_{op}", lambda name: render(capture, name))
