"""Render the checking/timing harness: the bypass's scaffolding in its own namespace inside `cpp_ext/harness.cpp.in`.

`codemod build OP` compiles exactly what `codemod bypass OP` splices into the tree's native source
(`plan_cpp.scaffolding`, one source of truth) against the installed, unmodified libtorch. The installed headers
still declare (and libtorch exports) the meta and native structs, so only the CPU helpers, structured classes,
wrappers and at::native forwards are compiled. For a (self, other) op the harness carries C++ checks of every
group; for every op, one representative call both paths time."""
from __future__ import annotations

import json
from dataclasses import dataclass

from codemod.capture.capture import ApiFunction, Capture
from codemod.model.cache import REPO
from codemod.model.errors import BadInput
from codemod.model.native_yaml import OpGroup
from codemod.plan import cpp as plan_cpp
from codemod.verify.signature import VIEW_STORAGE, Parameter, ext_namespace, forward_parameters, parameters, plain_type

HARNESS_TEMPLATE = REPO / "cpp_ext" / "harness.cpp.in"


# The tensors the harness passes under these names; every other parameter is an "extra" (alpha, ...).
TENSOR_PARAMETERS = ("self", "other", "out")
# Values the checks try besides an extra's default: by type, and by name where the type says too little.
VALUES_BY_TYPE = {"at::Scalar": ("2", "0.5")}  # 0.5 is refused for integer inputs
VALUES_BY_NAME = {"rounding_mode": ('"trunc"', '"floor"')}
# The default of an extra declared without one, by the start of its type.
UNSET = {"::std::optional<": "::std::nullopt"}


@dataclass(frozen=True)
class HarnessGroup:
    """One structured group as the harness calls it, read from the captured declarations."""

    functional: str  # its functional overload, "div.Tensor_mode"
    extras: tuple[Parameter, ...]  # the functional's parameters besides self and other, defaults filled in
    calls: tuple[str, ...]  # dispatcher/bypass x functional/out=/in-place, each extra passed as `x.NAME`


class NoCppChecks(BadInput):
    """The op's signature is not the harness's `(self, other, ...)` with an in-place overload."""


def _api(functions: tuple[ApiFunction, ...], overload: str, name: str, op: str) -> ApiFunction:
    found = next((f for f in functions if f.overload == overload and f.name == name), None)
    if found is None:
        raise BadInput(f"{op}: the harness calls `{name}` ({overload}), which was not captured")
    return found


def _default(op: str, extra: Parameter, declaration: str) -> str:
    unset = next((value for prefix, value in UNSET.items() if extra.type.startswith(prefix)), None)
    if extra.default is None and unset is None:
        raise NoCppChecks(f"{op}: `{extra.name}` in {declaration} has no default; the harness knows no value for it")
    return extra.default or unset


@dataclass(frozen=True)
class GuardedApi:
    """The guarded bypass's definitions, checked in the harness in place of the plain bypass's forwards."""

    source: str  # its guard and definitions in their own namespace, with what they include
    namespace: str
    method_prefix: str  # a method `Tensor::NAME` is the free function PREFIX + NAME taking `self` first


def harness_group(capture: Capture, group: OpGroup, guarded: GuardedApi | None = None) -> HarnessGroup:
    op = capture.op
    delegates = {d.name.split(".")[0]: d.name for d in group.delegates}
    if op not in delegates or f"{op}_" not in delegates:
        raise NoCppChecks(f"{op}: the harness needs a functional and an in-place overload of {group.out.name}; "
                       f"it has {', '.join(delegates.values()) or 'none'}")
    functional, inplace, out = delegates[op], delegates[f"{op}_"], group.out.name
    declaration = _api(capture.functions, functional, op, op).declaration
    params = parameters(declaration)
    if [p.name for p in params[:2]] != ["self", "other"]:
        raise NoCppChecks(f"{op}: the harness calls `at::{op}(self, other, ...)`; the declaration is {declaration}")
    extras = tuple(Parameter(e.name, e.type, _default(op, e, declaration)) for e in params[2:])
    extra_names = {e.name for e in extras}

    def call(callee: str, declaration: str) -> str:
        names = [p.name for p in parameters(declaration)]
        unknown = [n for n in names if n not in TENSOR_PARAMETERS and n not in extra_names]
        if unknown:
            raise NoCppChecks(f"{op}: the harness has no value for {', '.join(unknown)} of {declaration}")
        return f"{callee}({', '.join(n if n in TENSOR_PARAMETERS else f'x.{n}' for n in names)})"

    def bypass(overload: str) -> str:
        wrapper = capture.cpu_wrappers.get(overload)
        snippet = next((s for s in capture.cpu_scaffolding if s.name == wrapper), None)
        if snippet is None:
            raise BadInput(f"{op}: the harness needs the CPU structured overload {overload}, which was not captured")
        return call(f"{ext_namespace(op)}::{capture.native_kernels[overload]}", snippet.text)

    outf = _api(capture.functions, out, f"{op}_outf", op).declaration
    method = _api(capture.methods, inplace, f"{op}_", op).declaration
    if guarded is None:
        bypassed = (bypass(functional), bypass(out), bypass(inplace))
    else:
        method_args = call("", method).removeprefix("(")  # "other, x.alpha)"
        bypassed = (
            call(f"{guarded.namespace}::{op}", declaration),
            call(f"{guarded.namespace}::{op}_outf", outf),
            f"{guarded.namespace}::{guarded.method_prefix}{op}_(self, {method_args}",
        )
    return HarnessGroup(functional, extras, (
        call(f"at::{op}", declaration), bypassed[0], call(f"at::{op}_outf", outf), bypassed[1], call(f"self.{op}_", method), bypassed[2],
    ))


def _extra_fields(op: str, groups: list[HarnessGroup]) -> str:
    """One field per extra of all groups: a name must mean the same type and default in each."""
    fields: dict[str, Parameter] = {}
    for extra in (e for g in groups for e in g.extras):
        if fields.setdefault(extra.name, extra) != extra:
            raise BadInput(f"{op}: `{extra.name}` is {fields[extra.name]} in one group and {extra} in another")
    return "\n".join(f"  {e.type} {e.name} = {e.default};" for e in fields.values())


def _group_functions(index: int, group: HarnessGroup) -> str:
    calls = ",\n              ".join(group.calls)
    return f"HARNESS_GROUP(_{index},\n              {calls})"


def _group_entry(index: int, group: HarnessGroup) -> str:
    """The group's row of the harness's table: its six functions and its variants (the default call first)."""
    label = f", {group.functional}" if index else ""
    variants = [f'{{"{label}", Extra{{}}}}'] + [
        f'{{R"({label}, {e.name}={value})", with([](Extra& x) {{ x.{e.name} = {value}; }})}}'
        for e in group.extras
        for value in (*VALUES_BY_TYPE.get(e.type, ()), *VALUES_BY_NAME.get(e.name, ()))
    ]
    functions = ", ".join(f"{name}_{index}" for name in (
        "dispatch_functional", "bypass_functional", "dispatch_out", "bypass_out", "dispatch_inplace", "bypass_inplace"
    ))
    return f"      {{{functions},\n       {{{', '.join(variants)}}}}},"


def harness_includes(capture: Capture) -> list[str]:
    """The CPU registration's includes, less the all-op and registration headers the scaffolding does not need."""
    return [i for i in capture.cpu_includes if "Functions.h>" not in i and "library.h>" not in i]


def cpp_checked_groups(capture: Capture, groups: tuple[OpGroup, ...], guarded: GuardedApi | None = None) -> list[HarnessGroup]:
    """The groups as the harness's C++ checks call them; none when the op's signature is not theirs."""
    try:
        return [harness_group(capture, g, guarded) for g in groups]
    except NoCppChecks:
        return []


def _cpp_value(value: object) -> str:
    """VALUE (a sample's non-tensor argument) as a C++ expression."""
    if value is None:
        return "std::nullopt"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, complex):
        return f"c10::complex<double>({value.real!r}, {value.imag!r})"
    if isinstance(value, (list, tuple)):
        return f"std::vector<int64_t>{{{', '.join(map(str, value))}}}"
    if isinstance(value, str):
        return json.dumps(value)
    dtype = str(value).removeprefix("torch.")
    if dtype in _SCALAR_TYPES:
        return _SCALAR_TYPES[dtype]
    raise BadInput(f"the timed call cannot pass {value!r} from C++")


def list_sample(param: Parameter, dtypes: list[str]) -> str:
    """The Sample's value of the tensor list PARAM: a tensor of `numel` elements per dtype of DTYPES, in the type the
    Sample holds it (a std::vector for `Tensor[]`, a c10::List for `Tensor?[]`)."""
    return f"{sample_type(param)}{{{', '.join(tensor_sample(dtype) for dtype in dtypes)}}}"


def tensor_sample(dtype: str) -> str:
    """A tensor of `numel` elements in DTYPE (samples.dtype_name): a floating one random normal; an integral one
    indices of it, each in [0, numel), as an index tensor of the call takes them; a bool one random."""
    if dtype == "float32":  # at::randn's own dtype
        return "at::randn({numel})"
    if dtype.startswith(("float", "complex")):
        return f"at::randn({{numel}}, {_SCALAR_TYPES[dtype]})"
    return f"at::randint({2 if dtype == 'bool' else 'numel'}, {{numel}}, {_SCALAR_TYPES[dtype]})"


# torch's dtype names (samples.dtype_name) as ATen's ScalarType constants
_SCALAR_TYPES = {"float32": "at::kFloat", "float64": "at::kDouble", "float16": "at::kHalf", "bfloat16": "at::kBFloat16",
                 "complex64": "at::kComplexFloat", "complex128": "at::kComplexDouble", "int64": "at::kLong",
                 "int32": "at::kInt", "int16": "at::kShort", "int8": "at::kChar", "uint8": "at::kByte", "bool": "at::kBool"}


def sample_type(param: Parameter) -> str:
    """The type of the Sample's field holding PARAM (a view such as ITensorListRef is held by what owns its elements)."""
    return _stored(param)[0]


def _stored(param: Parameter) -> tuple[str, str]:
    return VIEW_STORAGE.get(plain_type(param.type), (param.type, "{}"))


@dataclass(frozen=True)
class TimedCall:
    """The harness's Sample (one representative call's arguments), make_sample(numel), requiring_grad(sample)
    and both paths' calls. Tensors become N-element tensors of the representative call's dtypes (float32, and int64
    indices where it takes indices)."""

    source: str
    dispatcher_call: str  # "at::sum(s.self, ...)", the arguments as a Sample `s` holds them
    shown: str  # the call as a human reads it


def timed_call(capture: Capture, group: OpGroup, guarded: GuardedApi | None = None) -> TimedCall:
    from codemod.verify import samples  # imports torch: only when a harness is rendered

    op = capture.op
    checked = samples.group_of(group)
    if checked.functional is None:
        raise BadInput(f"{op}: bench times the functional overload, and {group.out.name}'s group has none")
    call = samples.representative(checked, op)
    functional = checked.functional.name
    dispatcher = parameters(_api(capture.functions, functional, functional.split(".")[0], op).declaration)
    wrapper = next(s for s in capture.cpu_scaffolding if s.name == capture.cpu_wrappers[functional])
    # each argument's tensors, by dtype
    held = {p.name: [samples.dtype_name(t.dtype) for t in samples.tensors_in(call.arguments[p.name])] for p in dispatcher}
    tensors = [name for name, dtypes in held.items() if dtypes]
    lists = {name for name in tensors if not samples.is_tensor_value(call.arguments[name])}  # `Tensor[]` (cat's)
    fields = "\n".join(f"  {sample_type(p)} {p.name};" for p in dispatcher)

    def made(param: Parameter) -> str:
        if param.name in lists:
            return list_sample(param, held[param.name])
        return tensor_sample(held[param.name][0]) if param.name in tensors else _cpp_value(call.arguments[param.name])

    assigned = "\n".join(f"  s.{p.name} = {made(p)};" for p in dispatcher)
    first = f"{tensors[0]}[0]" if tensors[0] in lists else tensors[0]

    def passed(params: list[Parameter]) -> str:
        return ", ".join(_stored(p)[1].format(f"s.{p.name}") for p in params)

    dispatcher_call = f"at::{functional.split('.')[0]}({passed(dispatcher)})"
    bypass_call = (  # the plain bypass's at::native:: forward, or the guarded at::OP (same parameters as the dispatcher's)
        f"{ext_namespace(op)}::{capture.native_kernels[functional]}({passed(forward_parameters(wrapper.text))})"
        if guarded is None else f"{guarded.namespace}::{functional.split('.')[0]}({passed(dispatcher)})"
    )

    source = f"""struct Sample {{
{fields}
}};

Sample make_sample(long numel) {{
  Sample s;
{assigned}
  return s;
}}

// the same call with its first tensor requiring grad: does the result get a grad_fn?
Sample requiring_grad(Sample s) {{
  s.{first} = s.{first}.detach().set_requires_grad(true);
  return s;
}}

// a tensor, or a tuple of them, as the op returns
auto dispatch_functional(const Sample& s) {{ return {dispatcher_call}; }}
auto bypass_functional(const Sample& s) {{
  return {bypass_call};
}}"""
    shown = ", ".join(
        f"{p.name}=[{', '.join(f'{dtype}[N]' for dtype in held[p.name])}]" if p.name in lists
        else f"{p.name}={held[p.name][0]}[N]" if p.name in tensors else f"{p.name}={call.arguments[p.name]!r}" for p in dispatcher
    )
    return TimedCall(source, dispatcher_call, f"{functional}({shown}) [{call.source}]")


@dataclass(frozen=True)
class Harness:
    source: str
    cpp_checked: list[HarnessGroup]  # empty: the op's signature has no C++ checks (Python checks it)
    timed: TimedCall


def render(capture: Capture, groups: tuple[OpGroup, ...], guarded: GuardedApi | None = None) -> Harness:
    """The harness: plan_cpp's rendering of the scaffolding, in the extension's namespace, the representative
    call both paths time, and (for a (self, other) op) the C++ checks of each group; with GUARDED, the guarded
    definitions are the bypass path of the checks instead."""
    harness_groups = cpp_checked_groups(capture, groups, guarded)
    timed = timed_call(capture, groups[0], guarded)
    replacements = {
        "@SCAFFOLDING@": plan_cpp.scaffolding(capture) if guarded is None else "",  # guarded: at::cpu:: stays in libtorch
        "@INCLUDES@": "\n".join([*harness_includes(capture), *([guarded.source] if guarded else [])]),
        "@NS@": ext_namespace(capture.op),
        "@OP@": capture.op,
        "@TIMED_CALL@": timed.source,
        "@HAS_CHECKS@": "1" if harness_groups else "0",
        "@EXTRA_FIELDS@": _extra_fields(capture.op, harness_groups),
        "@GROUP_FUNCTIONS@": "\n".join(_group_functions(i, g) for i, g in enumerate(harness_groups)),
        "@GROUPS@": "\n".join(_group_entry(i, g) for i, g in enumerate(harness_groups)),
    }
    text = HARNESS_TEMPLATE.read_text()
    for marker, value in replacements.items():
        text = text.replace(marker, value)
    return Harness(text, harness_groups, timed)
