"""The check against torch binds every parameter type a structured op of the installed torch has.

The types are enumerated from the installed wheel's own native_functions.yaml with the installed torchgen, as
RegisterCPU.cpp declares each CPU wrapper (the text codemod's capture reads), so a release that brings a new type
fails here by its name. One extension binds a function per type, compiled with the check's own machinery (real g++,
real libtorch; cached in the build cache).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import torch
import torchgen
from torchgen.api.types import NativeSignature
from torchgen.context import native_function_manager
from torchgen.gen import get_grouped_native_functions, parse_native_yaml
from torchgen.model import DispatchKey, NativeFunctionsGroup

from codemod.verify import bypass_ext, extension, harness
from codemod.verify.signature import Parameter, parameters, plain_type

PACKAGED = Path(torchgen.__file__).parent / "packaged" / "ATen"


def wheel_parameter_types() -> dict[str, dict[str, str]]:
    """Each parameter type (by plain_type) of every overload of every structured group with a CPU kernel in the
    installed wheel's yaml: {type: {an overload that has it: the parameter as its CPU wrapper declares it}}."""
    parsed = parse_native_yaml(str(PACKAGED / "native/native_functions.yaml"), str(PACKAGED / "native/tags.yaml"))
    cpu = parsed.backend_indices[DispatchKey.CPU]
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for group in get_grouped_native_functions(parsed.native_functions):
        if not (isinstance(group, NativeFunctionsGroup) and group.structured and cpu.has_kernel(group.out)):
            continue
        for function in group.functions():
            kernel = cpu.get_kernel(function)
            # as torchgen's RegisterDispatchKey declares a structured CPU wrapper (its manager makes `Tensor[]` an
            # ITensorListRef in a structured group); parsed from its definition, as the capture parses RegisterCPU.cpp
            with native_function_manager(function):
                wrapper = NativeSignature(function.func, prefix="wrapper_CPU_", symint=kernel is not None and kernel.supports_symint())
                for parameter, argument in zip(parameters(f"{wrapper.defn()} {{}}"), wrapper.arguments()):
                    found[plain_type(parameter.type)][str(function.func.name)] = argument.nctype.cpp_type()
    return found


WHEEL_TYPES = wheel_parameter_types()


def test_the_enumeration_sees_every_structured_group() -> None:
    overloads = {name for by_overload in WHEEL_TYPES.values() for name in by_overload}
    assert {"cat", "cat.out", "mul.Tensor", "index.Tensor", "sum.dim_IntList"} <= overloads
    assert len(overloads) > 600, len(overloads)
    assert "at::ITensorListRef" in WHEEL_TYPES and "c10::List<std::optional<at::Tensor>>" in WHEEL_TYPES


@pytest.mark.parametrize("type_", sorted(WHEEL_TYPES))
def test_every_parameter_type_of_a_structured_op_has_a_binding(type_: str) -> None:
    overload, declared = next(iter(WHEEL_TYPES[type_].items()))
    assert type_ in bypass_ext.BOUND_TYPES, f"{type_} ({overload}'s `{declared}`): the check has no binding for it"


def test_the_binding_of_every_type_compiles_and_takes_python_values() -> None:
    """A C++ function per parameter text (the wheel's, and `const T &` of every bound type), each bound as the check
    binds a CPU wrapper's forward; the tensor lists are called with Python lists."""
    declared = {text for by_overload in WHEEL_TYPES.values() for text in by_overload.values()}
    declared |= {f"const {type_} &" for type_ in bypass_ext.BOUND_TYPES}
    functions, bound, lists = [], [], []
    for number, text in enumerate(sorted(declared)):
        (parameter,) = parameters(f"int64_t take_{number}({text} value)")
        returned = "value.size()" if "List" in plain_type(parameter.type) else "0"  # a tensor list: its length
        functions.append(f"int64_t take_{number}({text} value) {{ return {returned}; }}")
        bound.append(bypass_ext.binding(bypass_ext.Bound(text, f"take_{number}", f"take_{number}",
                                                         (Parameter("value", parameter.type, None),), "int64_t")))
        if "List" in plain_type(parameter.type):  # the bench harness's Sample holds it too, made of N-element tensors
            # as make_sample sets it: a float tensor and an index
            made = f"{harness.sample_type(parameter)} value; value = {harness.list_sample(parameter, ['float32', 'int64'])};"
            functions.append(f"int64_t made_{number}(int64_t numel) {{ {made} return value.size(); }}")
            bound.append(f'  m.def("made_{number}", &made_{number});')
            lists.append(number)

    def render(name: str) -> str:
        return "\n".join(["#include <ATen/ATen.h>", "#include <torch/csrc/utils/pybind.h>", "", extension.TO_SCALAR,
                          *functions, f"PYBIND11_MODULE({name}, m) {{", *bound, "}", ""])

    module, _ = extension.load("codemod_bound_types", render)
    texts = sorted(declared)
    tensors = [torch.ones(2), torch.zeros(3)]
    for text, value in (("const at::ITensorListRef &", tensors), ("const at::TensorList &", tensors),
                        ("const c10::List<::std::optional<at::Tensor>> &", [tensors[0], None])):
        assert getattr(module, f"take_{texts.index(text)}")(value=value) == 2, text
    assert {texts[number] for number in lists} >= {"const at::ITensorListRef &", "const c10::List<::std::optional<at::Tensor>> &"}
    for number in lists:
        assert getattr(module, f"made_{number}")(3) == 2, texts[number]
