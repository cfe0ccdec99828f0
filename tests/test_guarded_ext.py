"""The guarded bypass, compiled against the installed libtorch (codemod.measure.guarded_ext), against torch itself.

Real torchgen capture, real compiler, real libtorch: the first run compiles each op (about a minute),
later runs import the cached extension. Every correctness case checks first that the guard takes the
fast path on it, so the fast path is what is compared with torch; the rest checks what the fallback keeps.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from codemod.measure import guarded_ext
from codemod.model.tree import locate


@pytest.fixture(scope="module")
def mul(target_tree: Path):
    return guarded_ext.load(locate(target_tree), "mul")[0]


@pytest.fixture(scope="module")
def add(target_tree: Path):
    return guarded_ext.load(locate(target_tree), "add")[0]


def sample(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(-50, 50, shape, dtype=dtype)
    return torch.randn(shape, dtype=dtype)


def strided(shape: tuple[int, int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Non-contiguous but not a view (a view carries autograd metadata, which sends the guard to the dispatcher)."""
    return torch.empty_strided(shape, (1, shape[0]), dtype=dtype).copy_(sample(shape, dtype))


def channels_last(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return sample((2, 3, 4, 5), dtype).contiguous(memory_format=torch.channels_last)


CASES = {
    "float32": (sample((3, 4)), sample((3, 4))),
    "float64": (sample((3, 4), torch.float64), sample((3, 4), torch.float64)),
    "int64": (sample((3, 4), torch.int64), sample((3, 4), torch.int64)),
    "bool": (sample((3, 4), torch.bool), sample((3, 4), torch.bool)),
    "complex64": (sample((3, 4), torch.complex64), sample((3, 4), torch.complex64)),
    "broadcast [3,1]x[1,4] (in-place broadcasts self)": (sample((3, 1)), sample((1, 4))),
    "broadcast [2,3,4]x[4]": (sample((2, 3, 4)), sample((4,))),
    "promotion int64 x float32": (sample((3, 4), torch.int64), sample((3, 4))),
    "promotion bool x int64": (sample((5,), torch.bool), sample((5,), torch.int64)),
    "promotion float32 x complex64": (sample((5,)), sample((5,), torch.complex64)),
    "promotion int64 x 0-dim float64": (sample((3,), torch.int64), torch.scalar_tensor(0.5, dtype=torch.float64)),
    "non-contiguous self": (strided((3, 4)), sample((3, 4))),
    "non-contiguous other": (sample((3, 4), torch.float64), strided((3, 4), torch.float64)),
    "channels-last x channels-last": (channels_last(), channels_last()),
    "channels-last x contiguous": (channels_last(), sample((2, 3, 4, 5))),
    "0-dim x 0-dim": (torch.scalar_tensor(3.0), torch.scalar_tensor(4.0)),
    "0-dim x [3,4]": (torch.scalar_tensor(2.5), sample((3, 4))),
    "empty [0,3]": (sample((0, 3)), sample((0, 3))),
    "empty broadcast [0,1]x[1,3]": (sample((0, 1)), sample((1, 3))),
    "shape mismatch [3]x[4]": (sample((3,)), sample((4,))),
}


def outcome(call: Callable[[], torch.Tensor]) -> torch.Tensor | str:
    """The result, or the first line of the error it raised."""
    try:
        return call()
    except RuntimeError as error:
        return "raises: " + str(error).splitlines()[0]


def assert_same(want: torch.Tensor | str, got: torch.Tensor | str) -> None:
    """Same error, or same dtype, sizes, strides and values (NaN equals NaN)."""
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride())
    assert torch.equal(got, want) or torch.allclose(got, want, rtol=0, atol=0, equal_nan=True)


def check_op(ext, op: str, a: torch.Tensor, b: torch.Tensor, **extra) -> None:
    """Functional, method, out= (both orders, resized from empty) and in-place, against torch."""
    assert ext.cpu_fast_path(a, b), "the guard should take the fast path on plain dense CPU tensors"
    values = tuple(extra.values())
    assert_same(outcome(lambda: getattr(torch, op)(a, b, **extra)), outcome(lambda: getattr(ext, op)(a, b, *values)))
    assert_same(outcome(lambda: getattr(a, op)(b, **extra)), outcome(lambda: getattr(ext, f"method_{op}")(a, b, *values)))

    def torch_out() -> torch.Tensor:
        out = torch.empty(0, dtype=torch.result_type(a, b))
        assert getattr(torch, op)(a, b, **extra, out=out) is out
        return out

    for name, call in ((f"{op}_out", lambda out: (out, a, b, *values)), (f"{op}_outf", lambda out: (a, b, *values, out))):
        def ext_out(name=name, call=call) -> torch.Tensor:
            out = torch.empty(0, dtype=torch.result_type(a, b))
            assert getattr(ext, name)(*call(out)) is out
            return out
        assert_same(outcome(torch_out), outcome(ext_out))

    def in_place(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            self = a.clone(memory_format=torch.preserve_format)
            assert fn(self) is self
            return self
        return run

    assert_same(
        outcome(in_place(lambda self: getattr(self, f"{op}_")(b, **extra))),
        outcome(in_place(lambda self: getattr(ext, f"method_{op}_")(self, b, *values))),
    )


@pytest.mark.parametrize("case", CASES)
def test_mul_agrees_with_torch(mul, case: str) -> None:
    check_op(mul, "mul", *CASES[case])


@pytest.mark.parametrize("alpha", [1, 2, 0.5])  # 0.5 is refused for integer inputs, by both
@pytest.mark.parametrize("case", CASES)
def test_add_with_alpha_agrees_with_torch(add, case: str, alpha: float) -> None:
    check_op(add, "add", *CASES[case], alpha=alpha)


def test_errors_are_torchs(mul) -> None:
    a, b = sample((3, 4)), sample((3, 4))
    assert outcome(lambda: mul.mul_out(torch.empty(3, 4, dtype=torch.int64), a, b)).startswith("raises: result type Float")
    assert_same(outcome(lambda: torch.mul(a, b, out=torch.empty(3, 4, dtype=torch.int64))),
                outcome(lambda: mul.mul_out(torch.empty(3, 4, dtype=torch.int64), a, b)))
    assert_same(outcome(lambda: sample((3, 1)).mul_(sample((1, 4)))),
                outcome(lambda: mul.method_mul_(sample((3, 1)), sample((1, 4)))))
    assert outcome(lambda: mul.method_mul_(sample((3, 1)), sample((1, 4)))).startswith("raises: output with shape [3, 1]")
    ints = sample((3, 4), torch.int64)
    assert_same(outcome(lambda: ints.clone().mul_(a)), outcome(lambda: mul.method_mul_(ints.clone(), a)))


def test_requires_grad_goes_through_autograd_with_correct_gradients(mul) -> None:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert not mul.cpu_fast_path(x, y.detach())
    assert mul.mul(x, y).grad_fn.name() == "MulBackward0"
    assert mul.method_mul(x, y).grad_fn.name() == "MulBackward0"
    assert torch.autograd.gradcheck(mul.mul, (x, y))
    assert torch.autograd.gradcheck(mul.method_mul, (x, y))
    assert torch.autograd.gradgradcheck(mul.mul, (x, y))
    # in-place on a non-leaf records MulBackward0 too
    assert torch.autograd.gradcheck(lambda x, y: mul.method_mul_(x * 1, y), (x, y))


def test_the_profiler_records_the_op(mul) -> None:
    a, b = sample((2,)), sample((2,))
    with torch.profiler.profile() as profile:
        mul.mul(a, b)
        mul.method_mul_(a, b)
    names = [event.name for event in profile.events()]
    assert names.count("aten::mul") == 1 and names.count("aten::mul_") == 1
    assert mul.cpu_fast_path(a, b)  # the profiler is off again


def test_meta_tensors_give_meta_results(mul) -> None:
    a, b = torch.empty(3, 1, device="meta"), torch.empty(1, 4, device="meta", dtype=torch.float64)
    assert not mul.cpu_fast_path(a, b)
    result = mul.mul(a, b)
    assert (result.device.type, result.shape, result.dtype) == ("meta", (3, 4), torch.float64)


class Recorded(torch.Tensor):
    """A wrapper subclass that logs each aten op it sees, then runs it on the wrapped tensor."""

    calls: list[str] = []

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        wrapper = torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, strides=elem.stride())
        wrapper.elem = elem
        return wrapper

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(str(func))
        unwrap = lambda t: t.elem if isinstance(t, cls) else t  # noqa: E731
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))


class Recording(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append(str(func))
        return func(*args, **(kwargs or {}))


def test_torch_dispatch_subclasses_and_modes_see_the_call(mul) -> None:
    a, b = sample((3,)), sample((3,))
    Recorded.calls.clear()
    assert torch.equal(mul.mul(Recorded(a), b), a * b)
    assert Recorded.calls == ["aten.mul.Tensor"]
    out = torch.empty(3)
    with Recording() as mode:
        mul.mul(a, b)
        mul.mul_out(out, a, b)
    assert mode.calls == ["aten.mul.Tensor", "aten.mul.out"]


def test_vmap_over_the_guarded_op(mul) -> None:
    x, y = sample((5, 3)), sample((5, 3))
    assert torch.equal(torch.vmap(mul.mul)(x, y), x * y)
    assert torch.equal(torch.vmap(mul.method_mul, in_dims=(0, None))(x, y[0]), x * y[0])
    assert torch.equal(torch.vmap(lambda a, b: mul.method_mul_(a.clone(), b))(x, y), x * y)


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad", "default"])
def test_fast_path_without_autograd_work(mul, mode: str) -> None:
    context = {"inference_mode": torch.inference_mode, "no_grad": torch.no_grad, "default": torch.enable_grad}[mode]
    normal = sample((4,)), sample((4,))
    with context():
        made_here = sample((4,)), sample((4,))  # inference tensors under inference_mode
        assert mul.cpu_fast_path(*normal) and mul.cpu_fast_path(*made_here)
        assert torch.equal(mul.mul(*made_here), made_here[0] * made_here[1])
        leaf = torch.ones(4, requires_grad=True)
        assert not mul.cpu_fast_path(leaf, normal[1])  # autograd metadata: the dispatcher decides


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad", "default"])
def test_versions_are_bumped_as_the_dispatcher_does(mul, mode: str) -> None:
    context = {"inference_mode": torch.inference_mode, "no_grad": torch.no_grad, "default": torch.enable_grad}[mode]
    a, b = sample((4,)), sample((4,))
    bumps = {}
    for path, in_place, out in (
        ("torch", lambda s: s.mul_(b), lambda o: torch.mul(a, b, out=o)),
        ("guarded", lambda s: mul.method_mul_(s, b), lambda o: mul.mul_out(o, a, b)),
    ):
        self, result = a.clone(), torch.empty(4)
        before = self._version, result._version
        with context():
            assert mul.cpu_fast_path(self, b)
            in_place(self)
            out(result)
        bumps[path] = (self._version - before[0], result._version - before[1])
    assert bumps["guarded"] == bumps["torch"] == (1, 1)


def test_in_place_on_an_inference_tensor_outside_inference_mode_raises_as_torch(mul) -> None:
    with torch.inference_mode():
        made_inside = sample((3,))
    other = sample((3,))
    results = {}
    for path, in_place in (("torch", lambda s, o: s.mul_(o)), ("guarded", mul.method_mul_)):
        with torch.inference_mode():
            self = made_inside.clone()  # an inference tensor, written outside inference mode below
        results[path] = outcome(lambda: in_place(self, other)), self.clone()
    assert results["guarded"][0] == results["torch"][0]
    assert results["torch"][0].startswith("raises: Inplace update to inference tensor outside InferenceMode")
    assert torch.equal(results["guarded"][1], results["torch"][1])


def test_unchanged_op_loads_from_the_cache(mul, target_tree: Path) -> None:
    again, cached = guarded_ext.load(locate(target_tree), "mul")
    assert cached and again is mul  # the module built before, found by its key: nothing compiled


def test_methods_become_free_functions_taking_self() -> None:
    head = "at::Tensor & Tensor::mul_(const at::Tensor & other) const {\n    return f(*this);\n}"
    assert guarded_ext.as_free_function(head) == (
        "at::Tensor & method_mul_(const at::Tensor & self, const at::Tensor & other) {\n    return f(self);\n}"
    )
    assert guarded_ext.as_free_function("at::Tensor Tensor::neg() const {\n}") == (
        "at::Tensor method_neg(const at::Tensor & self) {\n}"
    )
