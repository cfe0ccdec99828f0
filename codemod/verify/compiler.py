"""g++ against the installed, unmodified libtorch: where torch is, the command, and a cached compile."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.cache import cached_build, digest, keep_failed

CXX = os.environ.get("CXX", "g++")


class CompileFailed(VerificationFailed):
    """g++ refused the source; its error lines are kept to point at where the bypass splices them."""

    def __init__(self, message: str, errors: list[str]):
        super().__init__(message)
        self.errors = errors


@dataclass(frozen=True)
class Built:
    executable: Path
    source: Path
    cached: bool
    seconds: float
    key: str
    cpp_checks: bool = False  # the harness has the C++ checks of a (self, other) op
    timed_call: str = ""  # the representative call `time` and `calls` make, as a human reads it


def torch_dir() -> Path:
    """The installed torch package, found without importing it (that takes seconds)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise BadInput("torch is not installed in this Python; `codemod build` compiles against its libtorch")
    return Path(spec.origin).parent


def compile_command(source: Path, output: Path) -> list[str]:
    torch = torch_dir()
    return [
        CXX, "-O2", "-std=c++20", "-fPIC",
        f"-I{torch / 'include'}", f"-I{torch / 'include/torch/csrc/api/include'}",
        str(source), "-o", str(output),
        f"-L{torch / 'lib'}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{torch / 'lib'}",
    ]


def compile_source(source_text: str, name: str = "harness") -> Built:
    """Compile SOURCE_TEXT into an executable, cached by the hash of source + command + torch version.

    Raises VerificationFailed with the compiler's own message on a compile error.
    """
    started = time.perf_counter()
    placeholder = Path("SOURCE.cpp"), Path("OUTPUT")
    command_shape = compile_command(*placeholder)
    key = digest(source_text, "\0".join(command_shape), importlib.metadata.version("torch"))[:20]

    def make(scratch: Path) -> None:
        if shutil.which(CXX) is None:
            raise BadInput(f"{CXX}: compiler not found (set CXX)")
        tmp_source, tmp_exe = scratch / "harness.cpp", scratch / "harness"
        tmp_source.write_text(source_text)
        result = subprocess.run(compile_command(tmp_source, tmp_exe), capture_output=True, text=True)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line]
            shown = "\n".join((errors or result.stderr.splitlines())[:20])
            raise CompileFailed(
                f"compiling the extension failed ({CXX} exit {result.returncode}); source kept at "
                f"{keep_failed(tmp_source, name)}:\n{shown}",
                errors,
            )

    out_dir, cached = cached_build(f"{name}-{key}", "harness", make)
    return Built(out_dir / "harness", out_dir / "harness.cpp", cached, time.perf_counter() - started, key)
