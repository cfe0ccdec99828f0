"""Run the tree's codegen: torchgen for ATen, the autograd codegen for autograd.

Capture runs torchgen on a yaml holding only the op's entries (what torchgen
generates for a function depends on that function alone), which takes about
a second instead of a minute for the full file.

Newer torchgen also checks the whole file in ways a few entries fail (2.15
asserts that each kernel of a list in its own code is still in the yaml). Which
entries such a check needs is read from torchgen's own error, whatever the
release: the entries its message names, with the rest of their op, join the
run, and every later run of this process on that torchgen. Where the message
names none that helps, the run takes the whole file (slow, always right).
Callers keep only the code of their own entries from the outputs.

A run whose inputs (the yaml files, the templates, the codegen's own code, the arguments) ran clean before is not
run again: torchgen's outputs, kept in the build cache under the key of those inputs, are copied out (or, for the
compile check's headers, read where they are kept), and the caller is told so (the compile check's cache works the same way). Failures are never kept.
The key names files by their place in the tree, never by where the tree is: a run on a scratch tree holding the bytes a
bypass plans to write (planned_tree) is the run of the tree once it holds them.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from codemod.capture.fromtorch import AUTOGRAD_DIR, installed_torchgen
from codemod.model import cache, native_yaml, paths, progress
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, TAGS, TEMPLATES, Tree

# Rounds of "add the entries the error names" before taking the whole file.
_SUPPORT_ROUNDS = 4
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*\w|[A-Za-z_]")
DEPRECATED = "tools/autograd/deprecated.yaml"
# torchgen's directory -> ops (as `native_yaml.op_name` names them) its whole-file checks need.
_support_ops: dict[Path | None, set[str]] = {}
_support_lock = threading.Lock()


class CodegenFailed(VerificationFailed):
    """The codegen exited non-zero: the message is its exception (the traceback above it left out)."""

    def __init__(self, what: str, exit_code: int, exception: str) -> None:
        super().__init__(f"{what} failed (exit {exit_code}): {exception}")
        self.exception = exception


# An OSError as Python prints it: "FileNotFoundError: [Errno 2] No such file or directory: '/path'".
_OS_ERROR = re.compile(r"^\w+: \[Errno \d+\] (?P<why>[^:\n]+): '(?P<path>[^'\n]+)'", re.MULTILINE)


def run(tree: Tree, args: list[str], what: str, scratch_paths: dict[Path, Path] | None = None) -> None:
    """Run `python ARGS` with the tree's packages first; raise with the codegen's own words.

    SCRATCH_PATHS: scratch paths the codegen reads in place of the tree's (the tree path for each), so that a
    file of the tree it cannot read (a missing template) is named by its place in the tree: bad input, exit 2."""
    # torchgen writes some outputs (the AOTI shims) relative to its working directory:
    # run it in a scratch directory so that nothing lands in the tree.
    progress.command([tree.python, *args])
    with tempfile.TemporaryDirectory(prefix="codemod-cwd-") as cwd:
        result = subprocess.run([tree.python, *args], env=tree.python_env(), cwd=cwd, capture_output=True, text=True)
    if result.returncode == 0:
        return
    exception = _exception(result.stderr or result.stdout)
    for scratch, in_tree in (scratch_paths or {}).items():
        exception = exception.replace(str(scratch), str(in_tree))
    unreadable = _OS_ERROR.search(exception)
    if unreadable and Path(unreadable["path"]).is_relative_to(tree.root):
        raise BadInput(f"{unreadable['path']}: {unreadable['why']}, and {what} reads it; restore it and run again")
    raise CodegenFailed(what, result.returncode, exception)


def _exception(output: str) -> str:
    """What a Python traceback in OUTPUT ends with: the exception and its message, without the frames above."""
    lines = output.strip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if not frames:
        return "\n".join(lines[-15:])
    rest = lines[frames[-1] + 1 :]
    while rest and rest[0].startswith("    "):  # the frame's source line and its ^^^ marks
        rest = rest[1:]
    return "\n".join(rest)


# Runs in the tree's Python environment: torchgen's own loaders on tags.yaml, then on the whole native yaml; prints
# the first refusal as JSON, with the file it refused.
_LOAD_NATIVE_YAML = r"""
import json, sys
from torchgen import gen
native, tags = sys.argv[1:3]
for which, load in (("tags", lambda: gen.parse_tags_yaml(tags)), ("native", lambda: gen.parse_native_yaml(native, tags))):
    try:
        load()
    except Exception as error:
        print(json.dumps({"file": which, "error": type(error).__name__, "message": str(error)}))
        break
"""
_LOCATION = re.compile(r"^\s*in .*:(?P<line>\d+):$", re.MULTILINE)  # the context torchgen adds to its errors


def check_native_yaml(tree: Tree) -> None:
    """What torchgen's loaders refuse in tags.yaml or the whole native_functions.yaml (a bad schema in any entry, a
    dangling structured_delegate, ...) is refused before planning, with its line and torchgen's reason, not after
    writing. A pair it accepted before (the same yaml, tags and torchgen) is not loaded again."""
    inputs = [_LOAD_NATIVE_YAML, *files(tree.path(NATIVE_FUNCTIONS), tree.path(TAGS)), *torchgen_code(tree)]
    _once("native-yaml", inputs, lambda _: _load_native_yaml(tree))


def _load_native_yaml(tree: Tree) -> None:
    args = [tree.python, "-c", _LOAD_NATIVE_YAML, str(tree.path(NATIVE_FUNCTIONS)), str(tree.path(TAGS))]
    progress.command(args)
    result = subprocess.run(args, env=tree.python_env(), capture_output=True, text=True)
    if result.returncode != 0:
        raise CodegenFailed(f"torchgen's loader on {NATIVE_FUNCTIONS}", result.returncode, _exception(result.stderr))
    if result.stdout.strip():
        refusal = json.loads(result.stdout)
        found = _LOCATION.search(refusal["message"])
        where = TAGS if refusal["file"] == "tags" else f"{NATIVE_FUNCTIONS}:{found.group('line')}" if found else NATIVE_FUNCTIONS
        reason = refusal["message"].splitlines()[0] if refusal["message"] else ""
        raise BadInput(f"{where}: torchgen refuses the file ({refusal['error']}: {reason}); fix it and run again")


def check_autograd(tree: Tree) -> None:
    """The tree's own autograd codegen on the tree as it is: what it refuses (an empty derivatives.yaml, ...) is bad
    input, the cause of whatever failed on the way to writing it (the bypass's result refused, ...)."""
    with tempfile.TemporaryDirectory(prefix="codemod-autograd-check-") as out:
        try:
            autograd(tree, Path(out))
        except CodegenFailed as failure:
            reason = failure.exception.splitlines()[0] if failure.exception else "no message"
            raise BadInput(
                f"{DERIVATIVES}: the tree's autograd codegen refuses the tree as it is, before any edit ({reason}); "
                "fix the tree's autograd inputs and run again"
            ) from None


def aten(
    tree: Tree, source_dir: Path, out_dir: Path, *extra: str, scratch_paths: dict[Path, Path] | None = None,
) -> tuple[Path, bool]:
    """`torchgen.gen` on SOURCE_DIR (holding native/ and templates/) into OUT_DIR; the build cache's entry of the run
    (named by its inputs) and whether the outputs came from it (the same inputs ran clean before)."""
    kept, cached = kept_aten(tree, source_dir, *extra, scratch_paths=scratch_paths)
    shutil.copytree(kept / "ATen", out_dir, dirs_exist_ok=True)
    return kept, cached


# Where a kept torchgen run holds the AOTInductor C shims' sources it generates (c_shim_cpu.cpp, ...): a build writes
# them to torch/csrc/inductor/aoti_torch/generated/, beside the checked-in headers.
AOTI_SHIMS = "aoti_shims"


def kept_aten(tree: Tree, source_dir: Path, *extra: str, scratch_paths: dict[Path, Path] | None = None) -> tuple[Path, bool]:
    """`torchgen.gen` on SOURCE_DIR as the build cache keeps it: a directory holding the outputs under ATen/ (an
    include directory as it is; read it, never write into it), and whether the same inputs ran clean before."""
    native = source_dir / "native"
    inputs = files(native / "native_functions.yaml", native / "tags.yaml", (source_dir / "templates").resolve())

    def generate(kept: Path) -> None:
        out = kept / "ATen"
        shims = ("--aoti-install-dir", str(kept / AOTI_SHIMS))  # else torchgen writes them in its working directory
        run(tree, ["-m", "torchgen.gen", "-s", str(source_dir), "-d", str(out), *shims, *extra], "torchgen (ATen codegen)", scratch_paths)

    # "-d ATen": the outputs' place in the entry, part of the key (entries of other layouts are not read as this one)
    return _once("torchgen", ["torchgen.gen", "-d ATen", f"--aoti-install-dir {AOTI_SHIMS}", *extra, *inputs, *torchgen_code(tree)], generate)


# What cache.cached_build finds in an entry, written once the run ended clean: the content hash of each of its outputs.
_RAN_CLEAN = ".ran-clean.json"


def outputs_digest(kept: Path) -> str:
    """The digest of what the kept run KEPT generated (its outputs' names and bytes), whatever inputs made it: runs on
    inputs that differ only where the outputs do not (a source template, for a run of headers) count as one."""
    return cache.digest((kept / _RAN_CLEAN).read_bytes())


def _once(kind: str, inputs: list[bytes | str], generate: Callable[[Path], None]) -> tuple[Path, bool]:
    """The build cache's entry of a run on INPUTS, made by GENERATE(its directory) unless a clean run of the same
    inputs made it before (a failing run keeps nothing), and whether one had. A kept entry is trusted only when every
    output has the bytes the run left: else it is dropped and the run made again."""

    def make(scratch: Path) -> None:
        generate(scratch)
        (scratch / _RAN_CLEAN).write_text(json.dumps(cache.manifest(scratch, _RAN_CLEAN)))

    entry = f"{kind}-{cache.digest(_RAN_CLEAN, *inputs)[:20]}"
    kept, cached = cache.cached_build(entry, _RAN_CLEAN, make)
    if cached and cache.kept_json(kept / _RAN_CLEAN, dict[str, str]) != cache.manifest(kept, _RAN_CLEAN):
        cache.drop(entry)  # an output truncated, changed or gone
        kept, cached = cache.cached_build(entry, _RAN_CLEAN, make)
    return kept, cached


def torchgen_code(tree: Tree) -> list[bytes | str]:
    """The code of the torchgen the tree's codegen runs (its own, else the installed one), and the Python it runs in:
    the interpreter itself, not the name it was started by (`codemod` runs as a venv's python3, the tests as python)."""
    torchgen = _torchgen_dir(tree)
    code = [p for p in sorted(torchgen.rglob("*.py")) if "packaged" not in p.relative_to(torchgen).parts] if torchgen else []
    return [os.path.realpath(tree.python), sys.version, cache.installed_version("PyYAML"), *files(*code)]


def _torchgen_dir(tree: Tree) -> Path | None:
    """The torchgen the tree's codegen runs: its own, else the installed one."""
    if tree.has_own_torchgen:
        return (tree.root / "torchgen").resolve()
    spec = importlib.util.find_spec("torchgen")
    return Path(spec.origin).parent if spec and spec.origin else None


def files(*paths: Path) -> list[bytes | str]:
    """Each file's name and bytes, a directory's files (but caches) in sorted order."""
    parts: list[bytes | str] = []
    for path in paths:
        for file in _listed(path):
            parts += [file.name if file == path else str(file.relative_to(path)), file.read_bytes()]
    return parts


def _listed(path: Path) -> list[Path]:
    """The files `files` names for PATH: PATH itself, or a directory's files (but caches) in sorted order."""
    candidates = sorted(path.rglob("*")) if os.path.isdir(path) else [path] if os.path.lexists(path) else []  # one optional
    return [file for file in candidates if "__pycache__" not in file.parts and paths.walked_file(file)]


@contextlib.contextmanager
def planned_tree(tree: Tree, planned: Mapping[str, bytes]) -> Iterator[Tree]:
    """A scratch tree of what the tree's codegen reads (the yaml, the tags, the templates, the autograd formulas and, in
    a checkout, its autograd codegen; its torchgen is linked), with PLANNED's bytes (by tree-relative path) in place of
    the tree's: each codegen run there has the build-cache key of the same run on the tree once it holds those bytes.
    Nothing else of the tree is there: a checkout's other files are not copied."""
    read = [NATIVE_FUNCTIONS, TAGS, TEMPLATES, DERIVATIVES, DEPRECATED]
    if tree.has_own_autograd:  # run as `python -m tools.autograd.gen_autograd` from the root
        read += ["tools/__init__.py", AUTOGRAD_DIR]
    paths = set()
    for relative in read:
        paths |= {tree.rel(file) for file in _listed(tree.path(relative))}
        paths |= {path for path in planned if path == relative or path.startswith(f"{relative}/")}
    with tempfile.TemporaryDirectory(prefix="codemod-planned-") as scratch:
        root = Path(scratch)
        for path in sorted(paths):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            if path in planned:
                (root / path).write_bytes(planned[path])
            else:  # left alone by the plan: read where it is
                (root / path).symlink_to(tree.path(path))
        if tree.has_own_torchgen:
            (root / "torchgen").symlink_to(tree.path("torchgen"), target_is_directory=True)
        yield Tree(root, has_own_torchgen=tree.has_own_torchgen, has_own_autograd=tree.has_own_autograd)


def aten_on_entries(tree: Tree, native_yaml_text: str, out_dir: Path) -> tuple[Path, bool]:
    """torchgen on these entries, plus those the tree's torchgen checks across the whole file; the build cache's entry
    of the run and whether its outputs came from it."""
    own = {entry.name for entry in native_yaml.load("entries", native_yaml_text).entries}
    tree_yaml = functools.cache(lambda: native_yaml.load(NATIVE_FUNCTIONS, tree.path(NATIVE_FUNCTIONS).read_text()))
    for _ in range(_SUPPORT_ROUNDS):
        with _support_lock:
            ops = set(_support_ops.get(_torchgen_dir(tree), ()))
        support = [e for e in tree_yaml().entries if e.name not in own and native_yaml.op_name(e.base) in ops] if ops else []
        try:
            return aten_on_yaml(tree, _joined(native_yaml_text, tree_yaml(), support), out_dir)
        except CodegenFailed as failure:
            named = _ops_named_in(tree_yaml(), failure.exception, own) - ops
            if not named:
                break
            with _support_lock:
                _support_ops.setdefault(_torchgen_dir(tree), set()).update(named)
    with progress.step("torchgen checks the whole native_functions.yaml: running it on every entry"):
        everything_else = [e for e in tree_yaml().entries if e.name not in own]
        return aten_on_yaml(tree, _joined(native_yaml_text, tree_yaml(), everything_else), out_dir)


def _joined(native_yaml_text: str, doc: native_yaml.NativeYaml, support: list[native_yaml.Entry]) -> str:
    return "\n".join([native_yaml_text, *(doc.entry_text(entry) for entry in support)])


def _ops_named_in(doc: native_yaml.NativeYaml, message: str, own: set[str]) -> set[str]:
    """Ops of the entries MESSAGE names by overload or kernel name, other than the run's own."""
    words = set(_IDENTIFIER.findall(message))
    named = set()
    for entry, values in zip(doc.entries, doc.values):
        kernels = {str(kernel) for kernel in (values.get("dispatch") or {}).values()}
        if entry.name not in own and (entry.name in words or kernels & words):
            named.add(native_yaml.op_name(entry.base))
    return named


def aten_on_yaml(tree: Tree, native_yaml_text: str, out_dir: Path) -> tuple[Path, bool]:
    """torchgen on exactly this yaml, with the tree's tags and templates; the build cache's entry of the run and
    whether its outputs came from it."""
    with tempfile.TemporaryDirectory(prefix="codemod-src-") as scratch:
        source = Path(scratch)
        (source / "native").mkdir()
        (source / "native" / "native_functions.yaml").write_text(native_yaml_text)
        shutil.copyfile(tree.path(TAGS), source / "native" / "tags.yaml")
        (source / "templates").symlink_to(tree.path(TEMPLATES), target_is_directory=True)
        in_tree = {source / "templates": tree.path(TEMPLATES), source / "native" / "tags.yaml": tree.path(TAGS)}
        return aten(tree, source, out_dir, scratch_paths=in_tree)


def autograd(tree: Tree, out_dir: Path) -> tuple[Path, bool]:
    """The tree's own autograd codegen into OUT_DIR (a slim tree borrows the installed one's code and templates); the
    build cache's entry of the run (named by its inputs), and whether the same inputs ran clean before, in which case
    it is not run again and OUT_DIR is not written."""
    args = [str(tree.path(NATIVE_FUNCTIONS)), str(tree.path(TAGS)), str(out_dir)]
    module, code = autograd_code(tree)
    inputs = files(tree.path(NATIVE_FUNCTIONS), tree.path(TAGS), tree.path(DERIVATIVES), tree.path(DEPRECATED), code)

    def generate(_: Path) -> None:  # its outputs go to OUT_DIR, not into the cache: nothing reads them
        with tempfile.TemporaryDirectory(prefix="codemod-autograd-") as scratch:
            # a checkout's own directory holds the tree's formulas; the installed codegen's is given the tree's
            own = contextlib.nullcontext(code) if tree.has_own_autograd else _autograd_dir(tree, code, {}, Path(scratch, "autograd"))
            with own as autograd_dir:
                run(tree, ["-m", module, *args, str(autograd_dir)], "autograd codegen")

    return _once("autograd", [module, *inputs, *torchgen_code(tree)], generate)


# The autograd codegen's template of the Tensor methods, whose operator table names generated bindings by function.
_METHODS_TEMPLATE = "templates/python_variable_methods.cpp"
_METHOD_BINDING = re.compile(r"\bTHPVariable_(\w+)")
# Where a kept run of the autograd codegen on entries holds its outputs: a build writes them to this place in the tree.
AUTOGRAD_OUT = "torch/csrc/autograd/generated"
# Runs in the tree's Python environment: the autograd codegen as a build runs it, its C++ (gen_autograd, every
# operator selected) and its Python bindings (gen_autograd_python). argv: module, yaml, tags, out, autograd dir.
_AUTOGRAD_AND_BINDINGS = r"""
import importlib, sys
module, native, tags, out, autograd_dir = sys.argv[1:6]
codegen = importlib.import_module(module)
from torchgen.selective_build.selector import SelectiveBuilder
codegen.gen_autograd(native, tags, out, autograd_dir, SelectiveBuilder.get_nop_selector())
codegen.gen_autograd_python(native, tags, out, autograd_dir)
"""


def autograd_on_entries(tree: Tree, native_yaml_text: str) -> tuple[Path, bool]:
    """The tree's autograd codegen, C++ and Python bindings, on these entries, those of the functions whose bindings
    its template of the Tensor methods names (`THPVariable_add` for `__add__`: the tree's, else, in a slim tree, the
    installed torch's, with its tags), and the entries of derivatives.yaml and deprecated.yaml that name their
    functions (what it generates for a function depends on those alone): the build cache's entry of the run, its
    outputs under AUTOGRAD_OUT, and whether it was kept."""
    module, code = autograd_code(tree)
    names = {entry.name for entry in native_yaml.load("entries", native_yaml_text).entries}
    bound = set(_METHOD_BINDING.findall((code / _METHODS_TEMPLATE).read_text())) if (code / _METHODS_TEMPLATE).is_file() else set()
    yaml_texts, tags = [native_yaml_text], native_yaml.parse(TAGS, tree.path(TAGS).read_text()) or []
    installed = installed_torchgen() / "packaged" / "ATen" / "native"
    for native, more_tags in ((tree.path(NATIVE_FUNCTIONS), None), (installed / "native_functions.yaml", installed / "tags.yaml")):
        if not bound:  # the tree has them all: the installed yaml is not read
            break
        doc = native_yaml.load(NATIVE_FUNCTIONS, native.read_text())
        found = [entry for entry in doc.entries if entry.base in bound and entry.name not in names]
        if found and more_tags is not None:
            known = {tag.get("tag") for tag in tags}
            tags += [tag for tag in native_yaml.parse(TAGS, more_tags.read_text()) if tag.get("tag") not in known]
        yaml_texts += [doc.entry_text(entry) for entry in found]
        names |= {entry.name for entry in found}
        bound -= {entry.base for entry in found}
    native_yaml_text, tags_text = "\n".join(yaml_texts), json.dumps(tags)
    bases = {name.split(".")[0] for name in names}
    derivatives = _entries_of(tree, DERIVATIVES, lambda name: name in names)
    deprecated = _entries_of(tree, DEPRECATED, lambda name: name.split(".")[0] in bases)
    replaced = {"derivatives.yaml": derivatives, "deprecated.yaml": deprecated}
    inputs = [_AUTOGRAD_AND_BINDINGS, native_yaml_text, tags_text, derivatives, deprecated, *files(code)]

    def generate(kept: Path) -> None:
        # The codegen names each output's template by its path from torchgen's own directory: laid out at a path named
        # by the run's inputs, a run made again (its entry dropped or evicted, in another build cache) writes the same
        # bytes, and the compiles of its outputs stay cached. Locked: another build cache may make the same run meanwhile.
        stable = Path(tempfile.gettempdir(), f"codemod-autograd-{cache.digest(module, *inputs)[:20]}")
        lock_file = paths.regular_file(Path(f"{stable}.lock"), "the autograd codegen's lock", missing_ok=True)
        with cache.held_then_removed(lock_file), tempfile.TemporaryDirectory(prefix="codemod-entries-") as scratch:
            shutil.rmtree(stable, ignore_errors=True)  # left by a killed run
            with _autograd_dir(tree, code, replaced, stable) as autograd_dir:
                native, tags_file = Path(scratch, "native_functions.yaml"), Path(scratch, "tags.yaml")
                native.write_text(native_yaml_text)
                tags_file.write_text(tags_text)
                out = kept / AUTOGRAD_OUT
                out.mkdir(parents=True)
                args = [module, str(native), str(tags_file), str(out), str(autograd_dir)]
                run(tree, ["-c", _AUTOGRAD_AND_BINDINGS, *args], "autograd codegen on the op's entries")

    return _once("autograd-entries", [module, *inputs, *torchgen_code(tree)], generate)


def _entries_of(tree: Tree, relative: str, wanted: Callable[[str], bool]) -> str:
    """The entries of the tree's RELATIVE (derivatives.yaml, deprecated.yaml: `- name: SCHEMA`) whose function name
    WANTED takes, as YAML (JSON is YAML); none if the file is not there."""
    path = tree.path(relative)
    listed = native_yaml.parse(relative, path.read_text()) if path.is_file() else []
    kept = [item for item in listed or [] if isinstance(item, dict) and wanted(str(item.get("name", "")).split("(")[0])]
    return json.dumps(kept)


def autograd_code(tree: Tree) -> tuple[str, Path]:
    """The module of the tree's autograd codegen (its own, else the installed one's) and its code's directory."""
    if tree.has_own_autograd:
        return "tools.autograd.gen_autograd", tree.path(AUTOGRAD_DIR)
    import torchgen.packaged.autograd as packaged

    return "torchgen.packaged.autograd.gen_autograd", Path(packaged.__path__[0])


@contextlib.contextmanager
def _autograd_dir(tree: Tree, code: Path, replaced: Mapping[str, str], at: Path) -> Iterator[Path]:
    """CODE's directory (an autograd codegen's) laid out at AT, removed after, with the tree's derivatives.yaml and
    deprecated.yaml in it, or REPLACED's text for those it names."""
    at.mkdir(parents=True)
    try:
        for item in code.iterdir():
            if item.name not in ("derivatives.yaml", "deprecated.yaml", "__pycache__"):
                (at / item.name).symlink_to(item)
        for name, relative in (("derivatives.yaml", DERIVATIVES), ("deprecated.yaml", DEPRECATED)):
            if name in replaced:
                (at / name).write_text(replaced[name])
            elif tree.path(relative).exists():
                shutil.copyfile(tree.path(relative), at / name)
            elif (code / name).exists():
                (at / name).symlink_to(code / name)
        yield at
    finally:
        shutil.rmtree(at, ignore_errors=True)
