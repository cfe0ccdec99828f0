"""Compile the bypass's hand-written CPU scaffolding outside libtorch, into a checking/timing harness.

`codemod build OP` renders exactly what `codemod bypass OP` splices into the tree's
native source (`plan_cpp.scaffolding`, one source of truth), wraps it in its own
namespace with the harness in `cpp_ext/harness.cpp.in`, and compiles it with g++
against the installed, unmodified libtorch. The installed headers still declare
(and libtorch exports) the meta and native structs, so only the CPU helpers,
structured classes, wrappers and at::native forwards are compiled here.

Outputs are cached under `cpp_ext/build/` by the content hash of source + command;
the capture (two torchgen runs) is cached by the hash of everything it reads.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from codemod import capture as capture_step
from codemod import cpp_syntax, native_yaml, plan_cpp, plan_yaml
from codemod.capture import Capture
from codemod.plan import op_entries
from codemod.errors import BadInput, VerificationFailed
from codemod.tree import TAGS, TEMPLATES, Tree

REPO = Path(__file__).resolve().parent.parent
HARNESS_TEMPLATE = REPO / "cpp_ext" / "harness.cpp.in"
CXX = os.environ.get("CXX", "g++")


def cache_dir() -> Path:
    return Path(os.environ.get("CODEMOD_BUILD_CACHE", REPO / "cpp_ext" / "build"))


def ext_namespace(op: str) -> str:
    """The extension's own namespace, so nothing collides with libtorch's symbols."""
    return f"codemod_ext_{op}"


@dataclass(frozen=True)
class Built:
    executable: Path
    source: Path
    cached: bool
    seconds: float
    key: str


# ---------------------------------------------------------------- torch / compiler

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


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def compile_source(source_text: str, name: str = "harness") -> Built:
    """Compile SOURCE_TEXT into an executable, cached by the hash of source + command + torch version.

    Raises VerificationFailed with the compiler's own message on a compile error.
    """
    started = time.perf_counter()
    placeholder = Path("SOURCE.cpp"), Path("OUTPUT")
    command_shape = compile_command(*placeholder)
    key = _digest(source_text, "\0".join(command_shape), importlib.metadata.version("torch"))[:20]
    out_dir = cache_dir() / f"{name}-{key}"
    source, executable = out_dir / "harness.cpp", out_dir / "harness"
    if executable.is_file():
        return Built(executable, source, True, time.perf_counter() - started, key)
    if shutil.which(CXX) is None:
        raise BadInput(f"{CXX}: compiler not found (set CXX)")
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=cache_dir(), ignore_cleanup_errors=True) as scratch:
        tmp_source, tmp_exe = Path(scratch) / "harness.cpp", Path(scratch) / "harness"
        tmp_source.write_text(source_text)
        result = subprocess.run(compile_command(tmp_source, tmp_exe), capture_output=True, text=True)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line]
            shown = "\n".join((errors or result.stderr.splitlines())[:20])
            raise VerificationFailed(
                f"compiling the extension failed ({CXX} exit {result.returncode}); source kept at "
                f"{_keep_failed(tmp_source, name)}:\n{shown}"
            )
        try:
            Path(scratch).rename(out_dir)  # atomic publish; a concurrent build may have won
        except OSError:
            if not executable.is_file():
                raise
    return Built(executable, source, False, time.perf_counter() - started, key)


def _keep_failed(source: Path, name: str) -> Path:
    kept = cache_dir() / f"{name}-failed.cpp"
    shutil.copyfile(source, kept)
    return kept


# ---------------------------------------------------------------- capture and render

def _codegen_fingerprint(tree: Tree) -> list[bytes | str]:
    """Everything besides the yaml that decides what torchgen generates, and the code that captures it."""
    parts: list[bytes | str] = [tree.path(TAGS).read_bytes()]
    for path in sorted(tree.path(TEMPLATES).rglob("*")):
        if path.is_file():
            parts += [path.name, path.read_bytes()]
    torchgen = tree.root / "torchgen" if tree.has_own_torchgen else None
    if torchgen is None:
        spec = importlib.util.find_spec("torchgen")
        torchgen = Path(spec.origin).parent if spec and spec.origin else None
    if torchgen is not None:
        for path in sorted(torchgen.rglob("*.py")):
            if "packaged" not in path.parts:
                parts += [str(path.relative_to(torchgen)), path.read_bytes()]
    for module in (capture_step, native_yaml, plan_yaml):
        parts.append(Path(module.__file__).read_bytes())
    return parts


def capture_for(tree: Tree, op: str) -> Capture:
    """The op's Capture, as make_plan computes it, cached by the hash of all its inputs."""
    entries = op_entries(tree, op)
    (before, after), overloads = entries.capture_inputs(), entries.overloads
    key = _digest(op, before, after, "\0".join(overloads), *_codegen_fingerprint(tree))[:20]
    cached = cache_dir() / f"capture-{op}-{key}.json"
    if cached.is_file():
        return Capture.from_json(cached.read_text())
    captured = capture_step.capture(tree, op, before, after, overloads)
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(captured.to_json())
    tmp.replace(cached)
    return captured


# The tensors the harness passes under these names; every other parameter is an "extra" (alpha, ...).
TENSOR_PARAMETERS = ("self", "other", "out")
# Non-default values the checks try for an extra parameter of this type: 0.5 is refused for integer inputs.
NON_DEFAULT_VALUES = {"at::Scalar": ("2", "0.5")}


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


@dataclass(frozen=True)
class Signatures:
    """What the harness calls on each path, read from the captured declarations."""

    extras: list[Parameter]  # the functional's parameters besides self and other, with their defaults
    calls: dict[str, str]  # harness marker -> C++ call expression


def _api(functions, overload: str, name: str, op: str):
    found = next((f for f in functions if f.overload == overload and f.name == name), None)
    if found is None:
        raise BadInput(f"{op}: the harness calls `{name}` ({overload}), which was not captured")
    return found


def signatures(capture: Capture) -> Signatures:
    """The six calls (functional, out=, in-place; dispatcher and bypass) with each extra argument as `x.NAME`."""
    op = capture.op
    functional = _api(capture.functions, f"{op}.Tensor", op, op)
    params = parameters(functional.declaration)
    if [p.name for p in params[:2]] != ["self", "other"]:
        raise BadInput(f"{op}: the harness calls `at::{op}(self, other, ...)`; the declaration is {functional.declaration}")
    extras = params[2:]
    for extra in extras:
        if extra.default is None or extra.name in TENSOR_PARAMETERS:
            raise BadInput(
                f"{op}: `{extra.name}` in {functional.declaration} has no default; the harness calls "
                f"{op}.Tensor with its defaults and knows no value for it"
            )
    extra_names = {e.name for e in extras}

    def call(callee: str, declaration: str) -> str:
        names = [p.name for p in parameters(declaration)]
        unknown = [n for n in names if n not in TENSOR_PARAMETERS and n not in extra_names]
        if unknown:
            raise BadInput(f"{op}: the harness has no value for {', '.join(unknown)} of {declaration}")
        return f"{callee}({', '.join(n if n in TENSOR_PARAMETERS else f'x.{n}' for n in names)})"

    def bypass(overload: str) -> str:
        wrapper = capture.cpu_wrappers.get(overload)
        snippet = next((s for s in capture.cpu_scaffolding if s.name == wrapper), None)
        if snippet is None:
            raise BadInput(f"{op}: the harness needs the CPU structured overload {overload}, which was not captured")
        return call(f"{ext_namespace(op)}::{capture.native_kernels[overload]}", snippet.text)

    outf = _api(capture.functions, f"{op}.out", f"{op}_outf", op)
    inplace = _api(capture.methods, f"{op}_.Tensor", f"{op}_", op)
    return Signatures(extras, {
        "DISPATCH_FUNCTIONAL": call(f"at::{op}", functional.declaration),
        "BYPASS_FUNCTIONAL": bypass(f"{op}.Tensor"),
        "DISPATCH_OUT": call(f"at::{op}_outf", outf.declaration),
        "BYPASS_OUT": bypass(f"{op}.out"),
        "DISPATCH_INPLACE": call(f"self.{op}_", inplace.declaration),
        "BYPASS_INPLACE": bypass(f"{op}_.Tensor"),
    })


def render(capture: Capture) -> str:
    """The harness source: plan_cpp's rendering of the scaffolding, in the extension's namespace."""
    sigs = signatures(capture)
    includes = [i for i in capture.cpu_includes if "Functions.h>" not in i and "library.h>" not in i]
    variants = [
        f'  {{ Extra x; x.{e.name} = {value}; all.push_back({{", {e.name}={value}", x}}); }}'
        for e in sigs.extras for value in NON_DEFAULT_VALUES.get(e.type, ())
    ]
    text = HARNESS_TEMPLATE.read_text()
    replacements = {
        "@SCAFFOLDING@": plan_cpp.scaffolding(capture),
        "@INCLUDES@": "\n".join(includes),
        "@NS@": ext_namespace(capture.op),
        "@OP@": capture.op,
        "@EXTRA_FIELDS@": "\n".join(f"  {e.type} {e.name} = {e.default};" for e in sigs.extras),
        "@VARIANTS@": "\n".join(variants),
        **{f"@{marker}@": expression for marker, expression in sigs.calls.items()},
    }
    for marker, value in replacements.items():
        text = text.replace(marker, value)
    return text


def build(tree: Tree, op: str) -> Built:
    return compile_source(render(capture_for(tree, op)), name=op)


# ---------------------------------------------------------------- run

@dataclass(frozen=True)
class CheckResult:
    ok: bool
    passed: int
    failed: int
    output: str


def run_checks(executable: Path) -> CheckResult:
    result = subprocess.run([str(executable), "check"], capture_output=True, text=True)
    output = result.stdout + result.stderr
    passed = sum(line.startswith("ok ") for line in output.splitlines())
    failed = sum(line.startswith("FAIL ") for line in output.splitlines())
    return CheckResult(result.returncode == 0 and failed == 0 and passed > 0, passed, failed, output)


def run_json_lines(command: list[str]) -> list[dict]:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise VerificationFailed(f"{' '.join(command)} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
