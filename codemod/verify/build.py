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

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from codemod.apply import journal
from codemod.capture import capture as capture_step
from codemod.capture.capture import ApiFunction, Capture
from codemod.model import cpp_syntax, native_yaml, progress
from codemod.model.edits import apply_edits
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.native_yaml import OpGroup
from codemod.model.tree import TAGS, TEMPLATES, Tree
from codemod.plan import cpp as plan_cpp
from codemod.plan import yaml_edits as plan_yaml
from codemod.plan.plan import OpEntries, op_entries

REPO = Path(__file__).resolve().parents[2]
HARNESS_TEMPLATE = REPO / "cpp_ext" / "harness.cpp.in"
CXX = os.environ.get("CXX", "g++")


# A real PyTorch checkout builds itself with these (see the README); the harness needs none of them.
# The lab's flags: per-operator headers off, since the hand-written at::OP is declared in Functions.h.
CHECKOUT_BUILD_ENV = {"REL_WITH_DEB_INFO": "1", "USE_PER_OPERATOR_HEADERS": "0", "USE_DISTRIBUTED": "0", "USE_CUDA": "0"}
CHECKOUT_BUILD = " ".join(f"{name}={value}" for name, value in CHECKOUT_BUILD_ENV.items()) + " python setup.py develop"


def is_checkout(tree: Tree) -> bool:
    """A full PyTorch checkout, not our slim target_tree/ or a tree unpacked from the wheel."""
    return tree.path("setup.py").is_file() and tree.path("CMakeLists.txt").is_file()


def has_build_dir(tree: Tree) -> bool:
    """The checkout was configured and built before (CMake's cache is there): an incremental build is possible."""
    return tree.path("build/CMakeCache.txt").is_file()


def build_checkout(tree: Tree) -> None:
    """The checkout's own incremental build, its output streamed to the terminal."""
    command = [sys.executable, "setup.py", "develop"]
    progress.command(command)
    result = subprocess.run(command, cwd=tree.root, env={**os.environ, **CHECKOUT_BUILD_ENV})
    if result.returncode != 0:
        raise VerificationFailed(f"the checkout's build failed (exit {result.returncode}; its output is above): cd {tree.root} && {CHECKOUT_BUILD}")


def cache_dir() -> Path:
    return Path(os.environ.get("CODEMOD_BUILD_CACHE", REPO / "cpp_ext" / "build"))


def ext_namespace(op: str) -> str:
    """The extension's own namespace, so nothing collides with libtorch's symbols."""
    return f"codemod_ext_{op}"


_COMPILER_ERROR = re.compile(r"^[^:\s]+\.cpp:(?P<line>\d+):\d+: (?:fatal )?error: (?P<message>.*)$")


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


def cached_build(entry: str, product: str, make: Callable[[Path], None]) -> tuple[Path, bool]:
    """CACHE/ENTRY, holding PRODUCT, and whether it was there already. MAKE fills a scratch directory
    beside it, published by one rename, so a half-made entry is never seen."""
    out_dir = cache_dir() / entry
    if (out_dir / product).is_file():
        return out_dir, True
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{entry}-", dir=cache_dir(), ignore_cleanup_errors=True) as scratch:
        make(Path(scratch))
        try:
            Path(scratch).rename(out_dir)
        except OSError:  # a concurrent build published first
            if not (out_dir / product).is_file():
                raise
    return out_dir, False


def keep_failed(source: Path, name: str) -> Path:
    """Keep a source that did not compile where the user can open it."""
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


def bypassed_or_current(tree: Tree, op: str, guarded: bool = False) -> tuple[OpEntries, Capture]:
    """OP's structured groups and capture, for the plain or GUARDED bypass: from the tree, or, once OP is bypassed
    (its entries are no longer structured), as its journal recorded them, so build and bench measure what was bypassed."""
    recorded = journal.load(tree, op)
    if recorded is None:
        entries = op_entries(tree, op, guarded)
        return entries, capture_for(tree, op, entries)
    entries = journal.recorded_entries(tree, recorded, guarded)
    if recorded.capture is not None and (recorded.mode == "guarded") == guarded:
        return entries, recorded.capture
    return entries, capture_for(tree, op, entries)  # the other mode's capture, or a journal older than captures


def capture_for(tree: Tree, op: str, entries: OpEntries) -> Capture:
    """The op's Capture, as make_plan computes it, cached by the hash of all its inputs."""
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
# Values the checks try besides an extra's default: by type, and by name where the type says too little.
VALUES_BY_TYPE = {"at::Scalar": ("2", "0.5")}  # 0.5 is refused for integer inputs
VALUES_BY_NAME = {"rounding_mode": ('"trunc"', '"floor"')}
# The default of an extra declared without one, by the start of its type.
UNSET = {"::std::optional<": "::std::nullopt"}


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


# The storage kept for an argument whose C++ type is a view (by its plain_type), and how a stored `{}` is
# passed on. Every other type is stored as declared.
VIEW_STORAGE = {
    "at::IntArrayRef": ("std::vector<int64_t>", "{}"),
    "at::OptionalIntArrayRef": ("std::optional<std::vector<int64_t>>", "({0} ? at::OptionalIntArrayRef(*{0}) : at::OptionalIntArrayRef())"),
}
_SCALAR_TYPES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
                 "uint8": "Byte", "bool": "Bool", "float16": "Half", "bfloat16": "BFloat16", "complex64": "ComplexFloat",
                 "complex128": "ComplexDouble"}


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
        return f"at::ScalarType::{_SCALAR_TYPES[dtype]}"
    raise BadInput(f"the timed call cannot pass {value!r} from C++")


def plain_type(type_: str) -> str:
    """A declared type without spaces and leading `::` (`::std::optional<at::ScalarType>` is `std::optional<at::ScalarType>`)."""
    return re.sub(r"\s+", "", type_).removeprefix("::").replace("<::", "<")


def _stored(param: Parameter) -> tuple[str, str]:
    return VIEW_STORAGE.get(plain_type(param.type), (param.type, "{}"))


@dataclass(frozen=True)
class TimedCall:
    """The harness's Sample (one representative call's arguments), make_sample(numel), requiring_grad(sample)
    and both paths' calls. Tensors become N-element float32 tensors."""

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
    tensors = [p.name for p in dispatcher if samples.is_tensor_value(call.arguments[p.name])]
    fields = "\n".join(f"  {_stored(p)[0]} {p.name};" for p in dispatcher)
    assigned = "\n".join(
        f"  s.{p.name} = " + ("at::randn({numel})" if p.name in tensors else _cpp_value(call.arguments[p.name])) + ";"
        for p in dispatcher
    )

    def passed(params: list[Parameter]) -> str:
        return ", ".join(_stored(p)[1].format(f"s.{p.name}") for p in params)

    dispatcher_call = f"at::{functional.split('.')[0]}({passed(dispatcher)})"
    bypass_call = (  # the plain bypass's at::native:: forward, or the guarded at::OP (same parameters as the dispatcher's)
        f"{ext_namespace(op)}::{capture.native_kernels[functional]}({passed(parameters(wrapper.text))})"
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
  s.{tensors[0]} = s.{tensors[0]}.detach().set_requires_grad(true);
  return s;
}}

at::Tensor dispatch_functional(const Sample& s) {{ return {dispatcher_call}; }}
at::Tensor bypass_functional(const Sample& s) {{
  return {bypass_call};
}}"""
    shown = ", ".join(
        f"{p.name}=float32[N]" if p.name in tensors else f"{p.name}={call.arguments[p.name]!r}" for p in dispatcher
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


def compile_harness(harness: Harness, name: str) -> Built:
    """HARNESS compiled, with whether it has C++ checks and the call it times."""
    built = compile_source(harness.source, name=name)
    return dataclasses.replace(built, cpp_checks=bool(harness.cpp_checked), timed_call=harness.timed.shown)


def build(tree: Tree, op: str, captured: Capture | None = None) -> Built:
    """Raises VerificationFailed naming, for each compiler error in the scaffolding, the file:line of the
    tree where `codemod bypass OP` splices that line. CAPTURED: the plan's capture, when there is one."""
    entries, capture = (op_entries(tree, op), captured) if captured else bypassed_or_current(tree, op)
    harness = render(capture, entries.groups)
    source = harness.source
    try:
        return compile_harness(harness, op)
    except CompileFailed as failed:
        spliced = spliced_errors(tree, capture, source, failed.errors)
        if not spliced:
            raise
        raise VerificationFailed(f"{failed}\nin the tree after `codemod bypass {op}`:\n" + "\n".join(spliced)) from None


def spliced_errors(tree: Tree, capture: Capture, source: str, errors: list[str]) -> list[str]:
    """Each compiler error on a line of SOURCE's scaffolding, at the file:line the bypass splices that line to."""
    scaffolding = plan_cpp.scaffolding(capture).splitlines()
    harness_start = source.splitlines().index(scaffolding[0]) + 1  # both count lines from 1
    edits = plan_cpp.native_source_edits(tree, capture)
    target = next(e.path for e in edits if scaffolding[0] in e.text)
    patched = apply_edits(tree.path(target).read_bytes(), [e for e in edits if e.path == target]).decode()
    tree_start = patched.splitlines().index(scaffolding[0]) + 1
    found = []
    for error in errors:
        match = _COMPILER_ERROR.match(error)
        if match and 0 <= int(match["line"]) - harness_start < len(scaffolding):
            found.append(f"  {target}:{tree_start + int(match['line']) - harness_start}: error: {match['message']}")
    return found


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
