"""Guarded bypass: the public API takes the CPU kernel directly only when that is all the dispatcher would do.

The op's entries only gain `manual_cpp_binding: True`: torchgen keeps generating the
structured CPU kernel (`at::cpu::mul`), the autograd, Meta and CUDA kernels, and renames
its dispatcher-calling API to `__dispatch_`. By hand, in the templates: `at::mul`,
`at::mul_out`, `Tensor::mul`, ... check a guard, then call `at::cpu::` or, as generated,
the dispatcher; the renamed functions inside `at` (`at::redispatch::mul`, which the autograd
codegen's kernels call, and `at::symint::` templates) are written again as generated.
Derivatives, native sources and callers are untouched.

The guard computes the key set the dispatcher would dispatch on (the inputs' keys with
the thread-local ones applied) and takes the fast path only when it holds nothing but
the CPU kernel and the layers that would have nothing to do: autograd (no input has
autograd metadata) and ADInplaceOrView (whose version bump the fast path does itself).
It also requires no RecordFunction callback (profiler), since the dispatcher would run it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from codemod.capture.capture import ApiFunction, Capture
from codemod.model import cpp_syntax
from codemod.model.edits import Edit
from codemod.model.errors import BadInput
from codemod.model.tree import Tree
from codemod.plan.cpp import (
    BELOW_AUTOGRAD,
    FUNCTION_PLACEHOLDERS,
    FUNCTIONS_CPP,
    FUNCTIONS_H,
    REDISPATCH_FUNCTIONS_H,
    REDISPATCH_PLACEHOLDERS,
    TENSOR_METHODS_CPP,
    SourceFile,
    after_placeholder,
    block,
    declaration_edits,
    definition_edits,
)

_OPS_CALL_ARGS = re.compile(r"at::_ops::\w+::call\((.*)\);", re.DOTALL)
_TENSOR = re.compile(r"^(const )?at::Tensor &$")
FUNCTIONS_H_INCLUDES = ("#include <ATen/record_function.h>", "#include <c10/core/impl/LocalDispatchKeySet.h>")
DEFINITION_INCLUDES = ("#include <ATen/Functions.h>", "#include <ATen/CPUFunctions.h>")
# The template of each generated header (Capture.renamed_inside_at's sources), and the placeholder they follow
RENAMED_INTO = {"Functions.h": (FUNCTIONS_H, FUNCTION_PLACEHOLDERS), "RedispatchFunctions.h": (REDISPATCH_FUNCTIONS_H, REDISPATCH_PLACEHOLDERS)}


def guard_namespace(op: str) -> str:
    return f"detail::codemod_guarded_{op}"


def guard(op: str) -> str:
    """The guard, inline in Functions.h; one per op, so two guarded ops never collide."""
    return f"""
namespace {guard_namespace(op)} {{
// What the dispatcher would run besides the CPU kernel for a plain dense CPU tensor:
// autograd (nothing to record without autograd metadata), ADInplaceOrView (a version
// bump, done by the caller) and BackendSelect (factories only).
constexpr c10::DispatchKeySet kernel_suffices({{c10::DispatchKey::CPU, c10::DispatchKey::AutogradCPU,
                                                c10::DispatchKey::ADInplaceOrView, c10::DispatchKey::BackendSelect}});
// Key sets built here, at compile time: DispatchKeySet::has(DispatchKey) left out of line costs ~24 instructions.
constexpr c10::DispatchKeySet cpu_kernel(c10::DispatchKey::CPU);
constexpr c10::DispatchKeySet inplace_or_view(c10::DispatchKey::ADInplaceOrView);

// The key set the dispatcher would dispatch on, when calling the CPU kernel directly does what it would do.
// Always inlined: a compiler may leave it out of line in a large file, and the call costs ~30 instructions.
template <typename... Tensors>
C10_ALWAYS_INLINE std::optional<c10::DispatchKeySet> cpu_fast_path(const Tensors&... tensors) {{
  if (((tensors.unsafeGetTensorImpl()->autograd_meta() != nullptr) || ...)) {{
    return std::nullopt;  // may require grad, be a view of one, or carry a forward-mode tangent
  }}
  const c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
  const c10::DispatchKeySet keys = ((tensors.key_set() | ...) | local.included_) - local.excluded_;
  // raw bits: subtraction keeps backend bits, and a CUDA or Meta bit must send us to the dispatcher
  if ((keys.raw_repr() & ~kernel_suffices.raw_repr()) != 0 || !keys.has_all(cpu_kernel)) {{
    return std::nullopt;
  }}
  if (at::getStepCallbacksUnlessEmpty(at::RecordScope::FUNCTION).has_value()) {{
    return std::nullopt;  // a profiler or observer expects to see the op
  }}
  return keys;
}}

// What ADInplaceOrView does after the kernel: bump the version of every mutated tensor.
template <typename... Tensors>
C10_ALWAYS_INLINE void bump_versions(c10::DispatchKeySet keys, const Tensors&... mutated) {{
  if (keys.has_all(inplace_or_view)) {{
    (mutated.unsafeGetTensorImpl()->bump_version(), ...);
  }}
}}
}} // namespace {guard_namespace(op)}"""


def template_edits(tree: Tree, capture: Capture) -> list[Edit]:
    op = capture.op
    cpu = set(capture.cpu_functions)
    functions_h = SourceFile.read(tree, FUNCTIONS_H)
    what = "calls the CPU kernel directly when the guard allows, else the dispatcher"

    def define(api: ApiFunction) -> str:
        return guarded_definition(op, api, cpu)

    symint = _renamed_inside_at(tree, capture, "Functions.h")[1]  # in the block declaration_edits writes
    return [
        *functions_h.include_edits(op, FUNCTIONS_H_INCLUDES, "include what the guard reads"),
        *declaration_edits(tree, capture, guard(op) + (f"\n\n{symint}" if symint else "")),
        *definition_edits(tree, FUNCTIONS_CPP, op, capture.functions, define, what, "at::", DEFINITION_INCLUDES),
        *definition_edits(tree, TENSOR_METHODS_CPP, op, capture.methods, define, what, "Tensor::", DEFINITION_INCLUDES),
        *_redispatch_edits(tree, capture),
    ]


def _redispatch_edits(tree: Tree, capture: Capture) -> list[Edit]:
    """`at::redispatch::mul`, ... as generated, after RedispatchFunctions.h's placeholder (torchgen renames them)."""
    source, definitions = _renamed_inside_at(tree, capture, "RedispatchFunctions.h")
    if not definitions:
        return []
    names = [s.name for s in capture.renamed_inside_at if s.source == "RedispatchFunctions.h"]
    what = "written by hand as torchgen generated them before the bypass (it now names them __dispatch_; generated code calls them)"
    return [source.edit(after_placeholder(source, REDISPATCH_PLACEHOLDERS)[0], block(capture.op, what, definitions), f"define {', '.join(names)}")]


def _renamed_inside_at(tree: Tree, capture: Capture, header: str) -> tuple[SourceFile, str]:
    """HEADER's template, and the text of the op's definitions torchgen generated into HEADER inside `at` under a
    name it now renames (capture.renamed_inside_at), each in its namespaces below the placeholder's ("": none)."""
    rel, placeholders = RENAMED_INTO[header]
    source = SourceFile.read(tree, rel)
    scope = after_placeholder(source, placeholders)[2]
    texts = []
    for snippet in (s for s in capture.renamed_inside_at if s.source == header):
        namespace = tuple(snippet.name.split("::")[:-1])
        if namespace[: len(scope)] != scope:
            raise BadInput(f"{rel}: its placeholder is in namespace {'::'.join(scope)}, which does not hold {snippet.name}; the tool does not know where to write it")
        inner = namespace[len(scope) :]
        opened = "".join(f"namespace {name} {{\n" for name in inner)
        closed = "".join(f"\n}} // namespace {name}" for name in reversed(inner))
        texts.append(f"{opened}{snippet.text}{closed}")
    return source, "\n\n".join(texts)


@dataclass(frozen=True)
class GuardedCall:
    """What a guarded definition of API passes its guard: the tensors it reads (`*this` first for a method), and of
    those, the ones the call mutates (whose versions it bumps)."""

    params: list[tuple[str, str]]  # (type as written, name) of the definition, without `*this`
    is_method: bool
    tensors: list[str]
    mutated: list[str]


def guarded_call(op: str, api: ApiFunction) -> GuardedCall:
    """API's parameters as its guarded definition passes them to the guard; refused unless every tensor is plain."""
    src = cpp_syntax.parse(f"{api.definition_head} {{}}".encode())
    node = next(n for n in src.root.named_children if n.type == "function_definition")
    params = cpp_syntax.parameters(node)
    unsupported = [f"{kind} {name}" for kind, name in params if "Tensor" in kind and not _TENSOR.match(kind)]
    if unsupported:
        raise BadInput(f"{api.overload}: the guard reads plain Tensor arguments only, not {', '.join(unsupported)}; bypass {op} without --guarded")
    is_method = api.definition_head.split("(")[0].rstrip().endswith("Tensor::" + api.name)
    tensors = [name for kind, name in params if _TENSOR.match(kind)]
    mutated = [name for kind, name in params if kind == "at::Tensor &"]
    if is_method:
        tensors.insert(0, "*this")
        if api.name.endswith("_"):
            mutated.insert(0, "*this")
    return GuardedCall(params, is_method, tensors, mutated)


def guarded_definition(op: str, api: ApiFunction, cpu_functions: set[str]) -> str:
    """The generated definition, its dispatcher call kept as the fallback behind the fast path."""
    if api.name not in cpu_functions:
        raise BadInput(f"torchgen generates no at::cpu::{api.name} for {api.overload}; the guarded bypass calls it")
    guarded = guarded_call(op, api)
    tensors, mutated = guarded.tensors, guarded.mutated
    if guarded.is_method:
        call = _OPS_CALL_ARGS.search(api.body)
        args = call.group(1) if call else ""
    else:
        args = ", ".join(name for _, name in guarded.params)
    namespace = guard_namespace(op)
    fast_call = f"at::cpu::{api.name}({args})"
    fast = f"        {BELOW_AUTOGRAD}\n"  # the kernel below autograd, as the dispatcher runs it
    if mutated:
        fast += (
            f"        auto&& result = {fast_call};\n"
            f"        {namespace}::bump_versions(*keys, {', '.join(mutated)});\n"
            f"        return result;\n"
        )
    else:
        fast += f"        return {fast_call};\n"
    fallback = "\n".join(f"    {line.strip()}" for line in api.body.strip()[1:-1].splitlines() if line.strip())
    return (
        f"{api.definition_head} {{\n"
        f"    if (auto keys = {namespace}::cpu_fast_path({', '.join(tensors)})) {{\n{fast}    }}\n"
        f"{fallback}\n}}"
    )
