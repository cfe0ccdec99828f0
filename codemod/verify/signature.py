"""The C++ parameters of a captured declaration, as the harness and the extension store and pass them.

Below both (the harness renders checks from them, the extension binds them), so neither imports the other."""
from __future__ import annotations

import re
from dataclasses import dataclass

from codemod.capture.capture import as_native_api
from codemod.model import cpp_syntax


def ext_namespace(op: str) -> str:
    """The extension's own namespace, so nothing collides with libtorch's symbols."""
    return f"codemod_ext_{op}"


def python_name(overload: str) -> str:
    """The overload's function in the extension: "sum.dim_IntList" is `sum_dim_IntList`."""
    return overload.replace(".", "_")


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str  # as declared, without const and &: what the harness stores
    default: str | None


def parameters(declaration: str) -> list[Parameter]:
    """The parameters of a C++ function declaration (or definition), in order."""
    src = cpp_syntax.parse(f"{declaration};".encode())
    declarator = next(n for n in cpp_syntax.walk(src.root) if n.type == "function_declarator")
    found = []
    for param in declarator.child_by_field_name("parameters").named_children:
        default = param.child_by_field_name("default_value")
        found.append(Parameter(
            name=cpp_syntax.text(param.child_by_field_name("declarator")).lstrip("&* "),
            type=cpp_syntax.text(param.child_by_field_name("type")),
            default=cpp_syntax.text(default) if default is not None else None,
        ))
    return found


def forward_parameters(wrapper: str) -> list[Parameter]:
    """The parameters of the at::native:: forward the plain bypass writes for a structured CPU WRAPPER (its text): the
    wrapper's, spelled as the op's native API takes them after the bypass (plan/cpp.py writes it so)."""
    return parameters(as_native_api(wrapper))


def value_return_type(declaration: str) -> str:
    """The return type of a C++ function declaration (or definition), by value: `at::Tensor &` is `at::Tensor`,
    `::std::tuple<at::Tensor &,at::Tensor &>` is `::std::tuple<at::Tensor,at::Tensor>`."""
    # parsed as a member: tree-sitter reads some declarations at namespace scope as expressions (`at::Tensor & x(...)`)
    src = cpp_syntax.parse(f"struct S {{ {declaration}; }};".encode())
    node = next(n for n in cpp_syntax.walk(src.root) if n.type in ("field_declaration", "function_definition"))
    return re.sub(r"\s*&", "", cpp_syntax.text(node.child_by_field_name("type")))


def plain_type(type_: str) -> str:
    """A declared type without spaces and leading `::` (`::std::optional<at::ScalarType>` is `std::optional<at::ScalarType>`)."""
    return re.sub(r"\s+", "", type_).removeprefix("::").replace("<::", "<")


# The storage kept for an argument whose C++ type is a view (by its plain_type), and how a stored `{}` is
# passed on. Every other type is stored as declared.
VIEW_STORAGE = {
    "at::IntArrayRef": ("std::vector<int64_t>", "{}"),
    "at::OptionalIntArrayRef": ("std::optional<std::vector<int64_t>>", "({0} ? at::OptionalIntArrayRef(*{0}) : at::OptionalIntArrayRef())"),
    # `Tensor[]`: an ITensorListRef in a structured group, a TensorList where the tree's torchgen predates ITensorListRef
    "at::ITensorListRef": ("std::vector<at::Tensor>", "at::ITensorListRef(at::TensorList({}))"),
    "at::TensorList": ("std::vector<at::Tensor>", "at::TensorList({})"),
}
