"""g++ against the installed, unmodified libtorch: where torch is, the commands, and a cached compile.

A source is compiled once, into one object, and linked into what it holds: an executable (its `main`) and, when
it declares one, a Python extension (its PYBIND11_MODULE). The installed torch's headers that every harness and
extension includes (cpp_ext/libtorch_pch.h) are loaded precompiled, built once per torch version, compiler and
flags (codemod.verify.pch), from the second compile of a build cache on: making the PCH costs more than two compiles
save (measured on 2 cores: 38 s of CPU to make it, 523 MB; the harness then compiles in 16 s instead of 30 s), so
the first compile, which may be a cache's only one, does without it and leaves a note that the next one makes it.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from codemod.model import progress
from codemod.model.cache import REPO, cache_dir, cached_build, digest, keep_failed, publish_text
from codemod.model.errors import BadInput, VerificationFailed
from codemod.verify import pch

CXX = os.environ.get("CXX", "g++")
LIBTORCH_PCH = REPO / "cpp_ext" / "libtorch_pch.h"
SOURCE, EXECUTABLE, OBJECT = "harness.cpp", "harness", "harness.o"


class CompileFailed(VerificationFailed):
    """g++ refused the source; its error lines are kept to point at where the bypass splices them."""

    def __init__(self, message: str, errors: list[str]):
        super().__init__(message)
        self.errors = errors


@dataclass(frozen=True)
class Built:
    executable: Path | None  # None: the source has no `main`
    source: Path
    cached: bool
    seconds: float
    key: str
    cpp_checks: bool = False  # the harness has the C++ checks of a (self, other) op
    timed_call: str = ""  # the representative call `time` and `calls` make, as a human reads it
    module: Path | None = None  # the Python extension linked from the same object, when the source declares one


def recorded(name: str) -> Built | None:
    """The Built `record` kept under NAME, as a cache hit; None when there is none or the cache no longer
    holds what it built."""
    kept = cache_dir() / name
    if not kept.is_file():
        return None
    fields = json.loads(kept.read_text())
    out_dir = cache_dir() / fields.pop("entry")
    executable = out_dir / EXECUTABLE if fields.pop("executable") else None
    module_name = fields.pop("module")
    module = out_dir / module_name if module_name else None
    if not all(product.is_file() for product in (executable, module) if product is not None):
        return None
    return Built(executable, out_dir / SOURCE, cached=True, seconds=0.0, module=module, **fields)


def record(name: str, built: Built) -> None:
    """Keep BUILT under NAME (the key of what it was built from), for `recorded`."""
    fields = {"entry": built.source.parent.name, "executable": built.executable is not None,
              "module": built.module.name if built.module else None, "key": built.key, "cpp_checks": built.cpp_checks,
              "timed_call": built.timed_call}
    publish_text(cache_dir() / name, json.dumps(fields))


def toolchain() -> list[str]:
    """What a compile's output depends on besides its source: the compiler, its flags (the installed torch's and
    Python's headers), torch's and Python's versions."""
    return [CXX, *compile_flags(), importlib.metadata.version("torch"), sys.version]


def torch_dir() -> Path:
    """The installed torch package, found without importing it (that takes seconds)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise BadInput("torch is not installed in this Python; `codemod build` compiles against its libtorch")
    return Path(spec.origin).parent


def compile_flags() -> list[str]:
    """torch.utils.cpp_extension's flags for a CPU extension, plus -O2 and one section per function, so that the
    executable linked from the same object drops the Python binding it does not call (--gc-sections)."""
    torch = torch_dir()
    return [
        "-O2", "-std=c++20", "-fPIC", "-ffunction-sections", "-fdata-sections",
        f"-I{torch / 'include'}", f"-I{torch / 'include/torch/csrc/api/include'}",
        "-isystem", sysconfig.get_path("include", scheme="posix_prefix"),
    ]


def compile_command(source: Path, output: Path) -> list[str]:
    return [CXX, *compile_flags(), "-c", str(source), "-o", str(output)]


def link_executable(obj: Path, output: Path) -> list[str]:
    torch_lib = torch_dir() / "lib"
    return [CXX, str(obj), "-o", str(output), "-Wl,--gc-sections", f"-L{torch_lib}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{torch_lib}"]


def link_module(obj: Path, output: Path) -> list[str]:
    """As torch.utils.cpp_extension links a CPU extension (Python loads torch's libraries first)."""
    return [CXX, "-shared", str(obj), "-o", str(output), f"-L{torch_dir() / 'lib'}", "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]


def compile_source(source_text: str, name: str = "harness", module: str | None = None, executable: bool = True) -> Built:
    """Compile SOURCE_TEXT once and link it into an executable and, with MODULE (the name its PYBIND11_MODULE
    declares), into that Python extension; cached by the hash of source + commands + torch and Python versions.

    Raises CompileFailed with the compiler's own message on a compile error.
    """
    started = time.perf_counter()
    placeholder = Path(SOURCE), Path(OBJECT)
    links = [*([link_executable(*placeholder)] if executable else []), *([link_module(*placeholder)] if module else [])]
    commands = "\0".join(" ".join(command) for command in [compile_command(*placeholder), *links])
    key = digest(source_text, commands, importlib.metadata.version("torch"), sys.version)[:20]
    product = EXECUTABLE if executable else f"{module}.so"

    def make(scratch: Path) -> None:
        if shutil.which(CXX) is None:
            raise BadInput(f"{CXX}: compiler not found (set CXX)")
        source, obj = scratch / SOURCE, scratch / OBJECT
        source.write_text(source_text)
        with pch.loaded_when_asked_again(CXX, LIBTORCH_PCH, compile_flags()) as loading:
            _run([CXX, *loading, *compile_command(source, obj)[1:]], source, name)
        if executable:
            _run(link_executable(obj, scratch / EXECUTABLE), source, name)
        if module:
            _run(link_module(obj, scratch / f"{module}.so"), source, name)
        obj.unlink()  # linked into both; not needed again

    out_dir, cached = cached_build(f"{name}-{key}", product, make)
    return Built(
        out_dir / EXECUTABLE if executable else None, out_dir / SOURCE, cached, time.perf_counter() - started, key,
        module=out_dir / f"{module}.so" if module else None,
    )


def _run(command: list[str], source: Path, name: str) -> None:
    progress.command(command)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if "error" in line]
        shown = "\n".join((errors or result.stderr.splitlines())[:20])
        raise CompileFailed(
            f"compiling the extension failed ({CXX} exit {result.returncode}); source kept at "
            f"{keep_failed(source, name)}:\n{shown}",
            errors,
        )
