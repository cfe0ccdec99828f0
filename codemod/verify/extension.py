"""Compile C++ text as a Python extension against the installed libtorch, cached by content.

torch.utils.cpp_extension builds it (ninja, the installed torch's flags and pybind11)
in a scratch directory published into the build cache by one rename
(`build.cached_build`), keyed by the hash of source + flags + torch and Python
versions; a cache hit only imports the shared library. The guarded bypass
(`codemod.measure.guarded_ext`) and the bypass check (`codemod.verify.bypass_ext`)
both build through here.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from codemod.model.errors import VerificationFailed
from codemod.model.cache import cached_build, digest, keep_failed

CFLAGS = ("-O2",)  # as `codemod build`; torch.utils.cpp_extension adds no optimisation level of its own

# pybind11 cannot load a c10::Scalar; a Python bool, int or float keeps its kind, as torch's own bindings do.
TO_SCALAR = """\
at::Scalar to_scalar(py::handle value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return value.cast<int64_t>();
  if (PyComplex_Check(value.ptr()))  // read through CPython: pybind11's complex caster needs pybind11/complex.h
    return c10::complex<double>(PyComplex_RealAsDouble(value.ptr()), PyComplex_ImagAsDouble(value.ptr()));
  return value.cast<double>();
}"""


def load(stem: str, render: Callable[[str], str]) -> tuple[ModuleType, bool]:
    """The extension RENDER(module name) builds, imported, and whether it came from the cache.

    The module's name is in its source, so the key is taken over the source rendered with STEM."""
    import torch  # noqa: F401  (the extension links against the libraries torch loads)

    key = digest(render(stem), "\0".join(CFLAGS), importlib.metadata.version("torch"), sys.version)[:16]
    name = f"{stem}_{key}"
    built: list[ModuleType] = []

    def make(scratch: Path) -> None:
        source = scratch / f"{name}.cpp"
        source.write_text(render(name))
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
            f"compiling the extension {name} failed; source kept at {keep_failed(source, name)}:\n"
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
