"""C++ text as a Python extension against the installed libtorch, cached by content.

`compiler.compile_source` compiles it (torch.utils.cpp_extension's flags, the installed torch's headers
precompiled) and links it as cpp_extension does, in a scratch directory published into the build cache by one
rename; a cache hit only imports the shared library. The guarded bypass (`codemod.measure.guarded_ext`) builds
through `load`; the bypass check's extension is linked from the object of `codemod build`'s harness
(`codemod.verify.build`), one compile for both.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from codemod.model.cache import digest
from codemod.verify.compiler import compile_source

# pybind11 cannot load a c10::Scalar; a Python bool, int or float keeps its kind, as torch's own bindings do.
TO_SCALAR = """\
at::Scalar to_scalar(py::handle value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return value.cast<int64_t>();
  if (PyComplex_Check(value.ptr()))  // read through CPython: pybind11's complex caster needs pybind11/complex.h
    return c10::complex<double>(PyComplex_RealAsDouble(value.ptr()), PyComplex_ImagAsDouble(value.ptr()));
  return value.cast<double>();
}"""


def module_name(stem: str, render: Callable[[str], str]) -> str:
    """STEM and the hash of the source RENDER(STEM) writes: the module's name is in its source (PYBIND11_MODULE),
    and one process may import several builds of one stem."""
    return f"{stem}_{digest(render(stem), importlib.metadata.version('torch'), sys.version)[:16]}"


def load(stem: str, render: Callable[[str], str]) -> tuple[ModuleType, bool]:
    """The extension RENDER(module name) builds, imported, and whether it came from the cache."""
    name = module_name(stem, render)
    built = compile_source(render(name), name=name, module=name, executable=False)
    return import_module(built.module), built.cached


def import_module(library: Path) -> ModuleType:
    """The extension LIBRARY (NAME.so), imported under NAME once per process."""
    import torch  # noqa: F401  (the extension links against the libraries torch loads)

    name = library.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module
