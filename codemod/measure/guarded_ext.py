"""The guarded bypass as a Python extension, compiled against the installed libtorch.

`codemod bypass OP --guarded` writes the guard into Functions.h and the guarded
`at::OP`, `at::OP_out`, `Tensor::OP`, `Tensor::OP_` into the templates. This module
renders that text (`plan_guarded.guard` and `guarded_definition`, one source of truth;
the tree's copy is only laid out by clang-format) into its own namespace, since the
installed libtorch already defines those names, and exposes it to Python:

- the functions under their own names: `ext.mul(a, b)`, `ext.mul_out(out, a, b)`, ...;
- each method as a free function taking `self`: `ext.method_mul_(a, b)` is `a.mul_(b)`;
- `ext.cpu_fast_path(*tensors)` (2 or 3 tensors): the guard's decision, for the tests.

Built with torch.utils.cpp_extension (ninja, the installed torch's flags and pybind11),
cached under `cpp_ext/build/` by the hash of source + flags + torch and Python versions;
a cache hit only imports the shared library.

`build` puts the same definitions in `codemod build`'s harness in place of the plain
bypass: the gate `bypass OP --guarded` passes before it writes anything.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from codemod.plan import guarded as plan_guarded
from codemod.verify.build import (
    Built, GuardedApi, Parameter, _digest, bypassed_or_current, cached_build, compile_source, keep_failed, parameters,
)
from codemod.verify.build import render as harness_source
from codemod.capture.capture import Capture
from codemod.model.errors import VerificationFailed
from codemod.plan.plan import op_entries
from codemod.model.tree import Tree

CFLAGS = ("-O2",)  # as `codemod build`; torch.utils.cpp_extension adds no optimisation level of its own
METHOD_PREFIX = "method_"
SCALAR = "at::Scalar"
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


def _binding(name: str, params: list[Parameter], namespace: str) -> str:
    """`m.def` of a lambda taking each argument by value (a Tensor is a handle) and a Scalar as a Python number."""
    taken = ", ".join(f"py::handle {p.name}" if p.type == SCALAR else f"{p.type} {p.name}" for p in params)
    passed = ", ".join(f"to_scalar({p.name})" if p.type == SCALAR else p.name for p in params)
    names = "".join(f', py::arg("{p.name}")' for p in params)
    return f'  m.def("{name}", []({taken}) {{ return {namespace}::{name}({passed}); }}{names});'


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
    against `at::OP` as the plain bypass passes (build.run_checks), before `bypass --guarded` writes them."""
    guarded = GuardedApi(guarded_source(capture), ext_namespace(op), METHOD_PREFIX)
    return compile_source(harness_source(capture, op_entries(tree, op).groups, guarded), name=f"guarded-{op}")


def render(capture: Capture, module_name: str) -> str:
    namespace = ext_namespace(capture.op)
    self_param = Parameter("self", "at::Tensor", None)
    bindings = [_binding(f.name, parameters(f.declaration), namespace) for f in capture.functions] + [
        _binding(f"{METHOD_PREFIX}{m.name}", [self_param, *parameters(m.declaration)], namespace) for m in capture.methods
    ]
    guard = f"{namespace}::{plan_guarded.guard_namespace(capture.op)}::cpu_fast_path"
    return "\n".join([
        guarded_source(capture),
        "",
        "#include <torch/csrc/utils/pybind.h>",
        "",
        "// pybind11 cannot load a c10::Scalar; a Python bool, int or float keeps its kind, as torch's own bindings do",
        "at::Scalar to_scalar(py::handle value) {",
        "  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();",
        "  if (py::isinstance<py::int_>(value)) return value.cast<int64_t>();",
        "  return value.cast<double>();",
        "}",
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
    import torch  # noqa: F401  (the extension links against the libraries torch loads)

    capture = bypassed_or_current(tree, op, guarded=True)[1]
    stem = f"codemod_guarded_{op}"
    key = _digest(render(capture, stem), "\0".join(CFLAGS), importlib.metadata.version("torch"), sys.version)[:16]
    name = f"{stem}_{key}"  # the module's name is in its source, so the key is taken over the source without it
    built: list[ModuleType] = []

    def make(scratch: Path) -> None:
        source = scratch / f"{name}.cpp"
        source.write_text(render(capture, name))
        built.append(_compile(name, source, scratch))

    out_dir, cached = cached_build(name, f"{name}.so", make)
    if cached:
        return _import(name, out_dir / f"{name}.so"), True
    sys.modules[name] = built[0]
    return built[0], False


def _compile(name: str, source: Path, build_dir: Path) -> ModuleType:
    from torch.utils import cpp_extension

    try:
        return cpp_extension.load(
            name, [str(source)], extra_cflags=list(CFLAGS), build_directory=str(build_dir), verbose=False,
        )
    except RuntimeError as error:
        errors = [line for line in str(error).splitlines() if "error" in line][:20]
        raise VerificationFailed(
            f"compiling the guarded extension of {name} failed; source kept at {keep_failed(source, name)}:\n"
            + "\n".join(errors or [str(error)])
        ) from None


def _import(name: str, library: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module
