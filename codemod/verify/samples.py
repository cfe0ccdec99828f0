"""The inputs the bypass check calls each structured group with.

- PyTorch's own OpInfo sample inputs (`torch.testing._internal.common_methods_invocations.op_db`,
  imported once per process): each sample of the op's OpInfos, in the dtypes the OpInfo
  supports on CPU among DTYPES, bound to the group's arguments by the schema; a sample that
  fits another overload (`mul(t, 2)` is mul.Scalar) is left to that overload.
- Calls generated from the schema (torchgen's FunctionSchema): Tensor arguments random,
  Scalar 2 and 0.5, int dims valid for the shape, bool both, optional None and a value,
  a `str` each value the OpInfo samples pass it and its schema default (`string_values`).
- Our edge cases on top: dtypes, broadcasting, non-contiguous and channels-last tensors,
  0-dim and empty tensors (`edge_calls`); the out= cases are the checker's.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torchgen.model import Argument, BaseTy, BaseType, FunctionSchema, ListType, OptionalType, SchemaKind, Type

from codemod.model import cache
from codemod.model.errors import BadInput
from codemod.model.native_yaml import OpGroup
from codemod.verify.signature import python_name

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool, torch.complex64)
# Beyond this many combinations of generated values, each argument varies alone from the first combination.
MAX_COMBINATIONS = 64
STR = BaseType(BaseTy.str)
TENSOR = BaseType(BaseTy.Tensor)


@dataclass(frozen=True)
class Overload:
    name: str  # "sum.dim_IntList"
    schema: FunctionSchema  # the tree's own, parsed by torchgen

    @property
    def kind(self) -> SchemaKind:
        return self.schema.kind()

    @property
    def python_name(self) -> str:
        return python_name(self.name)

    def reference(self):
        """The installed torch's dispatcher entry for this overload: what the bypass must agree with."""
        base, _, overload = self.name.partition(".")
        packet = getattr(torch.ops.aten, base, None)
        found = getattr(packet, overload or "default", None) if packet is not None else None
        if found is None:
            raise BadInput(f"the installed torch has no aten::{self.name} to check the bypass against")
        return found


@dataclass(frozen=True)
class Group:
    """A structured group's overloads, and its arguments (those of its out= overload, less out)."""

    functional: Overload | None
    inplace: Overload | None
    out: Overload

    @property
    def arguments(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.out.schema.arguments.flat_all if a not in self.out.schema.arguments.out)

    @property
    def overloads(self) -> tuple[Overload, ...]:
        return tuple(o for o in (self.functional, self.out, self.inplace) if o is not None)


def group_of(op_group: OpGroup) -> Group:
    return group_from(op_group.schemas)


def group_from(schemas: Sequence[Sequence[str]]) -> Group:
    """The Group of SCHEMAS (OpGroup.schemas): each member's overload name and its schema's text."""
    overloads = [Overload(name, FunctionSchema.parse(func)) for name, func in schemas]
    by_kind = {o.kind: o for o in overloads}
    return Group(by_kind.get(SchemaKind.functional), by_kind.get(SchemaKind.inplace), by_kind[SchemaKind.out])


@dataclass(frozen=True)
class Call:
    """One set of arguments for a group, by name (out= excluded), and where it came from."""

    source: str  # "OpInfo sum sample 3", "schema", "edge: channels-last"
    arguments: dict[str, object]
    # an OpInfo sample whose in-place call would have to grow self: PyTorch's tests skip in-place then;
    # our own broadcast case runs it (both paths must raise)
    broadcasts_input: bool = False

    def describe(self) -> str:
        return f"{self.source}: " + ", ".join(f"{name}={_show(value)}" for name, value in self.arguments.items())


def _show(value: object) -> str:
    if isinstance(value, torch.Tensor):
        layout = "" if value.is_contiguous() or value.dim() < 2 else (
            " channels-last" if value.dim() == 4 and value.is_contiguous(memory_format=torch.channels_last) else " non-contiguous"
        )
        return f"{dtype_name(value.dtype)}{list(value.shape)}{layout}"
    return repr(value)


# ---------------------------------------------------------------- OpInfo samples

@functools.cache
def op_db() -> tuple:
    """PyTorch's OpInfos (about 4 s to import; needs numpy and expecttest)."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db as db
    except ImportError as error:
        raise BadInput(f"the bypass check uses PyTorch's OpInfo samples, which need numpy and expecttest: {error}") from None
    return tuple(db)


def opinfos(op: str) -> list:
    return [info for info in op_db() if info.name == op or info.aten_name == op]


def supported_dtypes(infos: list) -> list[torch.dtype]:
    supported = set().union(*(info.supported_dtypes("cpu") for info in infos)) if infos else set(DTYPES)
    return [d for d in DTYPES if d in supported]


@dataclass(frozen=True)
class OpSamples:
    """What PyTorch's OpInfos give a group: the dtypes of DTYPES they support for the op, and each one's calls
    (float32's always: bench times a float32 call); SKIPPED: the sample generators that raised, each with why."""

    dtypes: tuple[torch.dtype, ...]
    calls: dict[torch.dtype, list[Call]]
    skipped: tuple[str, ...] = ()


class _Unpicklable(Exception):
    def __init__(self, made: OpSamples) -> None:
        super().__init__("the samples hold a value pickle refuses")
        self.made = made


def op_samples(group: Group, op: str) -> OpSamples:
    """OP's OpInfo samples bound to GROUP, kept in the build cache by torch's version, OP, the group's schemas and this
    module's code: they are the same whatever the tree, so only the first check of an op imports op_db (seconds).
    Samples that cannot be saved (a value pickle refuses) are used as they are, and made again next time."""
    key = cache.digest(torch.__version__, op, *(str(o.schema) for o in group.overloads), Path(__file__).read_bytes())[:20]

    def make(scratch: Path) -> None:
        torch.manual_seed(0)
        dtypes = tuple(supported_dtypes(opinfos(op)))
        skipped: list[str] = []
        calls = {dtype: list(opinfo_calls(group, op, dtype, skipped)) for dtype in dict.fromkeys([*dtypes, torch.float32])}
        made = OpSamples(dtypes, calls, tuple(skipped))
        try:
            torch.save(made, scratch / _SAMPLES)
        except (pickle.PicklingError, TypeError, AttributeError):
            raise _Unpicklable(made) from None

    entry = f"samples-{key}"
    try:
        kept, cached = cache.cached_build(entry, _SAMPLES, make)
        try:
            return torch.load(kept / _SAMPLES, weights_only=False)  # our own file, found by its content's key
        except (OSError, EOFError, RuntimeError, pickle.UnpicklingError):
            if not cached:
                raise
        cache.drop(entry)  # kept truncated or corrupt: made again
        kept, _ = cache.cached_build(entry, _SAMPLES, make)
    except _Unpicklable as refused:
        return refused.made
    return torch.load(kept / _SAMPLES, weights_only=False)


_SAMPLES = "samples.pt"


def opinfo_calls(group: Group, op: str, dtype: torch.dtype, skipped: list[str] | None = None) -> Iterator[Call]:
    """The OpInfo samples of OP in DTYPE that bind to GROUP's arguments; where none does, the calls of GROUP's
    overloads that the samples of OpInfos reaching OP make (`reached_calls`). A sample generator that raises (real
    bmm's in int64: `random_ expects 'from' to be less than 'to'`) gives the samples it made; it is named in SKIPPED."""
    bound_any = False
    skipped = [] if skipped is None else skipped
    for info in opinfos(op):
        for index, sample in _samples(info, dtype, skipped):
            bound = bind(group, (sample.input, *sample.args), sample.kwargs)
            if bound is not None:
                bound_any = True
                yield Call(f"{_label(info)} sample {index}", bound, bool(sample.broadcasts_input))
    if not bound_any:
        yield from reached_calls(group, op, dtype, skipped)


def _samples(info, dtype: torch.dtype, skipped: list[str]) -> Iterator[tuple[int, object]]:
    """INFO's DTYPE samples, numbered, as many as its generator makes before it raises (named in SKIPPED)."""
    index = 0
    try:
        for sample in info.sample_inputs("cpu", dtype):
            yield index, sample
            index += 1
    except Exception as error:  # noqa: BLE001  (PyTorch's test code: whatever it raises, the samples made are used)
        why = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        skipped.append(f"{_label(info)} {dtype_name(dtype)} samples from {index} on ({type(error).__name__}: {why})")


def _label(info) -> str:
    return f"OpInfo {info.name}{'.' + info.variant_test_name if info.variant_test_name else ''}"


def reached_calls(group: Group, op: str, dtype: torch.dtype, skipped: list[str]) -> Iterator[Call]:
    """Calls of GROUP's overloads made by the DTYPE samples of the OpInfos named like a part of OP before an
    underscore (`nn.functional.nll_loss` for nll_loss_forward, which has no OpInfo of its own), recorded as the
    dispatcher passes them (a TorchDispatchMode sees the calls their Python functions decompose into)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    overloads = {o.reference(): o for o in group.overloads}
    outs = {a.name for a in group.out.schema.arguments.out}
    recorded: list[tuple[tuple, dict]] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in overloads:  # copied before the call, which may write them
                recorded.append(tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, (args, kwargs or {})))
            return func(*args, **(kwargs or {}))

    for info in op_db():
        if info.name == op or not op.startswith(info.name.split(".")[-1] + "_") or dtype not in info.supported_dtypes("cpu"):
            continue
        for index, sample in _samples(info, dtype, skipped):
            recorded.clear()
            with Recorder(), contextlib.suppress(Exception):  # a sample torch refuses records nothing of use
                info.op(sample.input, *sample.args, **sample.kwargs)
            for number, (args, kwargs) in enumerate(recorded):
                bound = bind(group, args, {k: v for k, v in kwargs.items() if k not in outs})
                if bound is not None:
                    yield Call(f"{_label(info)} sample {index}, its call {number} of {op}", bound)


def representative(group: Group, op: str) -> Call:
    """The call bench times: the first float32 OpInfo sample whose tensors are all 1-D of one length (so its
    other arguments hold for N-element tensors), else the first call generated for 2-element tensors; every
    argument that has a default takes it, as in the call people write (`a + b` is add with alpha=1)."""
    calls = op_samples(group, op).calls[torch.float32]
    for call in calls:
        shapes = {t.shape for v in call.arguments.values() for t in tensors_in(v)}
        if len(shapes) == 1 and len(next(iter(shapes))) == 1:
            return _with_defaults(group, call)
    return _with_defaults(group, schema_calls(group, (2,), torch.float32, "generated from the schema", strings=string_values(group, calls))[0])


class NoValue(BadInput):
    """A call cannot be generated: an argument has no value to take (a `str` without samples or default)."""


def string_values(group: Group, calls: list[Call]) -> dict[str, tuple[str, ...]]:
    """Each `str` argument's values for generated calls: those PyTorch's OpInfo samples (CALLS) pass it, in
    their order, then its schema default; none where neither has one."""
    defaults = _reference_defaults(group)
    found = {}
    for argument in group.arguments:
        if STR in (argument.type, OptionalType(STR)):
            passed = [c.arguments[argument.name] for c in calls if isinstance(c.arguments.get(argument.name), str)]
            default = [defaults[argument.name]] if isinstance(defaults.get(argument.name), str) else []
            found[argument.name] = tuple(dict.fromkeys([*passed, *default]))
    return found


def _with_defaults(group: Group, call: Call) -> Call:
    declared = _reference_defaults(group)
    defaults = {a.name: normalized(a.type, declared[a.name]) for a in group.arguments if a.name in declared}
    changed = [name for name, value in defaults.items() if is_tensor_value(call.arguments[name]) or call.arguments[name] != value]
    if not changed:
        return call
    return Call(f"{call.source}, {', '.join(changed)} at its default", {**call.arguments, **defaults}, call.broadcasts_input)


def is_tensor_value(value: object) -> bool:
    return isinstance(value, torch.Tensor)


def tensors_in(value: object) -> list[torch.Tensor]:
    """The tensors VALUE holds: itself, or a tensor list's (`Tensor[]`, `Tensor?[]`)."""
    if isinstance(value, (list, tuple)):
        return [v for v in value if is_tensor_value(v)]
    return [value] if is_tensor_value(value) else []


def bind(group: Group, args: tuple, kwargs: dict) -> dict[str, object] | None:
    """ARGS and KWARGS by the group's argument names, defaults filled in; None when they fit another overload."""
    arguments = group.arguments
    positional = group.out.schema.arguments.flat_positional
    if len(args) > len(positional):
        return None
    bound = dict(zip((a.name for a in positional), args))
    for name, value in kwargs.items():
        if name in bound or name not in {a.name for a in arguments}:
            return None
        bound[name] = value
    defaults = _reference_defaults(group)
    for argument in arguments:
        if argument.name not in bound:
            if argument.name not in defaults:
                return None
            bound[argument.name] = defaults[argument.name]
    if not all(accepts(a.type, bound[a.name]) for a in arguments):
        return None
    return {a.name: normalized(a.type, bound[a.name]) for a in arguments}


def _reference_defaults(group: Group) -> dict[str, object]:
    """Default values as Python objects, from the installed torch's schema of the out= overload."""
    return {a.name: a.default_value for a in group.out.reference()._schema.arguments if a.has_default_value()}


def accepts(type_: Type, value: object) -> bool:
    if isinstance(type_, OptionalType):
        return value is None or accepts(type_.elem, value)
    if isinstance(type_, ListType):
        elem = type_.elem
        if isinstance(elem, BaseType) and elem.name in (BaseTy.int, BaseTy.SymInt):
            return _is_int(value) or (isinstance(value, (list, tuple)) and all(_is_int(v) for v in value))
        return isinstance(value, (list, tuple)) and all(accepts(elem, v) for v in value)
    if not isinstance(type_, BaseType):
        return False
    name = type_.name
    if name == BaseTy.Tensor:
        return isinstance(value, torch.Tensor)
    if name == BaseTy.Scalar:
        return isinstance(value, (bool, int, float, complex))
    if name in (BaseTy.int, BaseTy.SymInt):
        return _is_int(value)
    if name == BaseTy.float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == BaseTy.bool:
        return isinstance(value, bool)
    if name == BaseTy.str:
        return isinstance(value, str)
    if name == BaseTy.ScalarType:
        return isinstance(value, torch.dtype)
    return False


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def normalized(type_: Type, value: object) -> object:
    """An int where an int list goes becomes a one-element list, as torch's Python binding reads it."""
    list_type = type_.elem if isinstance(type_, OptionalType) else type_
    if isinstance(list_type, ListType) and value is not None:
        return [value] if _is_int(value) else list(value)
    return value


# ---------------------------------------------------------------- generated from the schema

def make_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(-9, 10, shape, dtype=dtype)
    return torch.randn(shape, dtype=dtype)


A_TENSOR = object()  # a generated value: a fresh tensor of the call's shape and dtype
# A generated value: an int64 tensor of the call's shape whose every element indexes every dim of that shape (the
# elements of a `Tensor?[]`, which ATen's schemas use for advanced indices alone, and a tensor named `index` or
# `indices`): a float tensor there only tells that torch refuses it.
AN_INDEX = object()
INDEX_NAMES = ("index", "indices")


def values(argument: Argument, ndim: int, strings: dict[str, tuple[str, ...]]) -> tuple[object, ...]:
    """The values a generated call tries for ARGUMENT (A_TENSOR where a tensor goes); a `str` takes STRINGS'."""
    type_ = argument.type
    optional = isinstance(type_, OptionalType)
    base = type_.elem if optional else type_
    if base == STR:
        found: tuple[object, ...] = strings.get(argument.name, ())
        if not found and not optional:
            raise NoValue(f"the check cannot generate a value for `{argument.name}` ({type_}): no OpInfo sample "
                          "passes one and the schema gives no default")
    elif isinstance(base, ListType) and base.elem in (TENSOR, OptionalType(TENSOR)):
        # `Tensor[]` (cat's tensors): two tensors of the call's shape; `Tensor?[]` (index's indices): an index of each
        # of the first two dims
        found = ([AN_INDEX] * max(1, min(2, ndim)) if base.elem == OptionalType(TENSOR) else [A_TENSOR, A_TENSOR],)
    elif isinstance(base, ListType) and (base.size or 0) > 1:  # `int[2] kernel_size`: torch's binding takes that many
        found = ([1] * base.size, [2] * base.size)
    elif isinstance(base, ListType):
        found = _dim_lists(ndim)
    elif not isinstance(base, BaseType):
        raise BadInput(f"the check cannot generate a value for `{argument.name}` ({type_})")
    else:
        found = {
            BaseTy.Tensor: (AN_INDEX if argument.name in INDEX_NAMES else A_TENSOR,),
            BaseTy.Scalar: (2, 0.5),
            BaseTy.float: (2.0, 0.5),
            BaseTy.bool: (False, True),
            BaseTy.int: (0, -1) if ndim else (0,),
            BaseTy.SymInt: (0, -1) if ndim else (0,),
            BaseTy.ScalarType: (torch.float64,),
        }.get(base.name, ())
        if not found:
            raise BadInput(f"the check cannot generate a value for `{argument.name}` ({type_})")
    if optional:
        several = isinstance(base, ListType) or base == STR  # dims and modes: each of them
        return (None, *(found if several else found[:1]))
    return found


def _dim_lists(ndim: int) -> tuple[list[int], ...]:
    """Dims valid for a tensor of NDIM dimensions: none, the first, the last, the first two."""
    if ndim == 0:
        return ([], [0])
    return ([], [0], [-1], *([[0, 1]] if ndim > 1 else []))


def schema_calls(group: Group, shapes: dict[str, tuple[int, ...]] | tuple[int, ...],
                 dtypes: dict[str, torch.dtype] | torch.dtype, source: str, layout=None,
                 strings: dict[str, tuple[str, ...]] | None = None) -> list[Call]:
    """Every combination of generated values (each varying alone beyond MAX_COMBINATIONS), with fresh tensors
    of SHAPES in DTYPES (each one for all, or by argument name), LAYOUT applied to each, a `str` STRINGS'
    values (`string_values`). Raises NoValue when an argument has none."""
    arguments = group.arguments
    shape_of = (lambda name: shapes[name]) if isinstance(shapes, dict) else (lambda name: shapes)
    dtype_of = (lambda name: dtypes[name]) if isinstance(dtypes, dict) else (lambda name: dtypes)
    ndim = len(shape_of(arguments[0].name))
    options = [values(a, ndim, strings or {}) for a in arguments]
    combinations = list(itertools.product(*options))
    if len(combinations) > MAX_COMBINATIONS:
        first = tuple(o[0] for o in options)
        combinations = [first] + [
            (*first[:i], value, *first[i + 1:]) for i, option in enumerate(options) for value in option[1:]
        ]

    def made(value: object, name: str) -> object:
        if isinstance(value, list):  # a tensor list's tensors, or a dim list's ints
            return [made(v, name) for v in value]
        if value is AN_INDEX:
            tensor = torch.randint(0, max(1, min(shape_of(name), default=1)), shape_of(name))
        elif value is A_TENSOR:
            tensor = make_tensor(shape_of(name), dtype_of(name))
        else:
            return value
        return layout(tensor) if layout is not None else tensor

    calls = []
    for combination in combinations:
        bound = {}
        for argument, value in zip(arguments, combination):
            bound[argument.name] = made(value, argument.name)
        calls.append(Call(source, bound))
    return calls


def _transposed(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.t().contiguous().t() if tensor.dim() == 2 else tensor


def _channels_last(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous(memory_format=torch.channels_last)


def edge_calls(group: Group, dtypes: list[torch.dtype], strings: dict[str, tuple[str, ...]] | None = None) -> list[Call]:
    """Our own cases on top of PyTorch's samples: dtypes, layouts, 0-dim, empty, broadcasting, type promotion
    (a `str` takes STRINGS' values; NoValue when it has none)."""
    tensor_names = [a.name for a in group.arguments if a.type == TENSOR]

    def generated(shapes, dtype, source: str, layout=None) -> list[Call]:
        return schema_calls(group, shapes, dtype, source, layout, strings)

    calls = [c for dtype in DTYPES for c in generated((3, 4), dtype, f"edge: {dtype_name(dtype)} [3,4]")]
    calls += generated((3, 4), torch.float32, "edge: non-contiguous", layout=_transposed)
    calls += generated((2, 3, 4, 5), torch.float32, "edge: channels-last", layout=_channels_last)
    calls += generated((), dtypes[0], "edge: 0-dim")
    calls += generated((0, 3), dtypes[0], "edge: empty [0,3]")
    if len(tensor_names) > 1:
        spread = {name: (3, 1) if i == 0 else (1, 4) for i, name in enumerate(tensor_names)}
        spread |= {a.name: (3, 1) for a in group.arguments if a.name not in spread}
        calls += generated(spread, dtypes[0], "edge: broadcast [3,1] with [1,4] (in-place grows self)")
        promoted = {name: torch.int64 if i == 0 else torch.float32 for i, name in enumerate(tensor_names)}
        promoted |= {a.name: torch.float32 for a in group.arguments if a.name not in promoted}  # Tensor? ones too
        calls += generated((3, 4), promoted, "edge: promotion int64 with float32 (in-place cannot cast)")
    return calls


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
