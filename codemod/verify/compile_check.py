"""Compile what the bypass wrote, and every file that reached a removed function, with g++ -c, and link the objects (link_check.py).

What g++ reads is what is on disk: each file is compiled in place. The headers it includes are, in order:
what the tree's torchgen generates from the edited yaml and templates (`--generate headers`, no per-operator
headers: the lab's build), the tree's own (`aten/src`, the root), a checkout's own build (the flags
`compile_commands.json` gives the file, else the build directory's generated `ATen/Config.h`...), and last the
installed torch's, for what the tree has nothing of. A file that includes per-operator headers (`<ATen/ops/...>`:
the installed torch's would contradict the regenerated ones) is compiled again against the per-operator headers
torchgen generates from the same inputs (`--per-operator-headers`), with AT_PER_OPERATOR_HEADERS defined, as
PyTorch's per-operator build compiles it; torchgen runs in that layout only for such a file.

A file that does not compile is compiled again as it was before the bypass (the files the bypass wrote as they
were, the headers regenerated from the yaml and templates as they were, in the layout it compiled against after
the bypass): errors it had already are not the bypass's, and the file is named as not compiled, "did not compile
before the bypass"; only new errors fail the check, and one at a function the bypass removed is named as a caller
left behind. A header (an .inl, any file a source includes) counts as compiled when a compiled file read it (the
plan names a source of the tree including each header that reached a removed function), else it is compiled alone.
Lines the bypass wrote inside a preprocessor branch g++ did not take are named, never counted as compiled; so is an
edited template unless a compiled file included the header generated from it. A slim tree (a subset of the yaml), whose
regenerated headers cannot replace the installed torch's, takes its headers from a full tree's codegen
(overlay_compile.py). A tree with no ATen headers of its own whose torchgen is not the installed torch's (another
release's) is not compiled at all: the installed headers were made for another codegen (foreign_torchgen).

Every outcome is cached by the file's path and bytes, the headers' digest, the flags, the compiler and the torch
version, and holds only while every tree header g++ read (its -MD list) has the bytes it had. Generated headers
are read where the build cache keeps torchgen's run on the same inputs (codegen.py). Two files compile at a time.

A compile loads the regenerated headers' GENERATED_PCH when it is worth its cost: kept from an earlier run, or made
when GENERATED_PCH_USERS files of the run read its headers (g++ -M); and then only where pch.reads_the_same says it
changes nothing the file reads (the verdict is recorded as the outcome is). It is made first, beside the compiles of
the files that load none. No other PCH is loaded: PyTorch's ATen_pch.h saves about 2 s of a compile, less than the
check that would make it sound costs.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shlex
import shutil
import stat
import subprocess
import sysconfig
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codemod.apply import journal
from codemod.capture import codegen, fromtorch
from codemod.model import cache, cpp_syntax, exact_text, json_file, line_diff, native_yaml, paths, progress
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import NATIVE_FUNCTIONS, TAGS, TEMPLATES, Tree
from codemod.plan.callers import CPP_SUFFIXES, CUDA_SUFFIXES, SOURCE_SUFFIXES
from codemod.plan.plan import Plan, combined_changes
from codemod.verify import compiler, link_check, pch

JOBS = max(1, min(2, os.cpu_count() or 1))
_SUFFIXES_GXX_KNOWS = (*SOURCE_SUFFIXES, ".h", ".hh", ".hpp", ".hxx", ".tcc")  # it reads others as C++ only with -x c++
# What PyTorch compiles libtorch_cpu's sources with: C++20 (the installed headers need it), the
# library's own export macro; AT_PER_OPERATOR_HEADERS stays undefined (but for a file that includes per-operator
# headers), so files include the monolithic Functions.h / NativeFunctions.h that the regenerated headers hold.
LANGUAGE_FLAGS = ("-std=c++20", "-DCAFFE2_BUILD_MAIN_LIB")
# What PyTorch's CMake defines for every source of an x86-64 build, which compiles kernels for AVX2 and AVX512 too:
# DispatchStub then takes a function pointer per capability, as the installed libtorch's definitions do.
CAPABILITY_MACROS = ("-DHAVE_AVX512_CPU_DEFINITION", "-DHAVE_AVX2_CPU_DEFINITION") if platform.machine() in ("x86_64", "AMD64") else ()
# g++ collects its garbage once its heap has grown elevenfold since the last collection, not twofold (its default with
# 1 GB of memory or more): the large units' compiles collect less often, for about a third more memory at their peak
# (1.0 to 1.3 GB); the objects are the same bytes (benchmarks/gcc_collection.py, and its record for what it saves).
COLLECT_LESS = "--param=ggc-min-expand=1000"
# An object of each compile (position-independent, as libtorch's are), which link_check.py links
FLAGS = ("-c", "-fPIC", *LANGUAGE_FLAGS, *CAPABILITY_MACROS, "-w", "-fdiagnostics-color=never", COLLECT_LESS)
COMPILED_BY = f"g++ -c ({' '.join(LANGUAGE_FLAGS)})"  # how the verified line says the files were compiled
# PyTorch compiles each kernel source under native/cpu/ once per CPU capability (REGISTER_DISPATCH is only
# defined then); DEFAULT is the capability every build has. The flags follow from the path; the result key holds them.
KERNEL_DIR = "aten/src/ATen/native/cpu/"
KERNEL_FLAGS = ("-DCPU_CAPABILITY=DEFAULT", "-DCPU_CAPABILITY_DEFAULT")
UFUNC_KERNEL = "UfuncCPUKernel_"  # torchgen's ufunc kernels, which a build compiles as it compiles KERNEL_DIR's
SHOWN_ERROR_LINES = 25
_STOPPED = "not compiled: another check refused the bypass first"  # before writing; never said
LINK = "the link of the compiled objects"  # what the link check names as not judged, beside the files
# Of a checkout's compile_commands.json: what says where headers are and which macros are set. Per-operator
# headers stay off: the regenerated headers are the monolithic ones (PER_OPERATOR_FLAG says otherwise).
_KEPT_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "-D", "-U", "-include")
_PATH_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "-include")
_DROPPED_MACROS = ("AT_PER_OPERATOR_HEADERS",)
# A file that includes torchgen's per-operator headers is compiled against them, with the macro PyTorch's
# per-operator build defines (it picks the ATen/ops/ includes of the hand-written headers).
PER_OPERATOR_FLAG = "-DAT_PER_OPERATOR_HEADERS"
_STAMPED_WITHIN = 1024  # torchgen's "@generated by" line comes in a header's first lines
_COMPILE_FIELDS = ("output", "operator_headers_elsewhere", "precompiled", "object")  # what a compile's record holds besides what it read
_COMPILE_COMMANDS = ("build/compile_commands.json", "compile_commands.json")

_MISSING_HEADER = re.compile(r"^(?P<where>[^:\n]+):(?P<line>\d+):\d+: fatal error: (?P<header>[^:\n]+): No such file or directory$", re.M)
_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<column>\d+):)? (?P<kind>fatal error|error|warning|note): (?P<message>.*)$")
_CONTEXT = re.compile(r"^(?:In file included from |\s+from |[^\s:][^:]*: (?:In |At global scope|At namespace scope))")
# A call spelled into the namespaces whose functions a bypass removes: where the op's other overloads remain
# (at::redispatch::mul's Scalar one), g++ says the call matches none of them, at the call's line.
_REMOVABLE_CALL = re.compile(r"\b(?:cpu|redispatch)::(?P<name>\w+)\s*\(")
_NOT_DECLARED = re.compile(r"[‘'](?P<name>\w+)[’'] (?:is not a member of [‘'](?P<scope>[\w:]+)[’']|has not been declared in [‘'](?P<in>[\w:]+)[’']|was not declared in this scope)")
_CONDITIONALS = ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_elifdef", "preproc_else")
# What most of a compile's time goes to: the regenerated ATen/Functions.h (with Operators.h, 4 MB; 10 s of an 11 s
# compile of BinaryOps.cpp). Precompiled, it is shared by every file of a run that passes the check (RegisterCPU.cpp or
# TensorMethods.cpp, which read TensorBody.h only, would share a PCH of that, but it saves 3 s of the 10).
GENERATED_PCH = cache.REPO / "cpp_ext" / "generated_pch.h"
KEPT_GENERATED_PCHS = 3  # 300-400 MB each, one per state of the regenerated headers: the most recently used are kept
# Made for this many files or more: it costs about 25 s of CPU to make and saves about 9 s of each compile that loads
# it, less the 3 s of its check (two g++ -E); a kept one pays from one file on (measured on PyTorch's BinaryOps.cpp,
# the static runtime's ops.cpp and target_tree's BlasScale.cpp, docs/verification.md).
GENERATED_PCH_USERS = 5


@dataclass(frozen=True)
class Headers:
    root: Path  # holds ATen/...: the first include directory
    digest: str  # of the headers' bytes: a compile's record holds across edits that leave them as they were
    from_cache: bool = False  # generated from the same inputs before: torchgen did not run again
    per_operator: bool = False  # torchgen's per-operator layout: compiled with AT_PER_OPERATOR_HEADERS, as PyTorch's build does
    # the same inputs' headers in the per-operator layout, generated on the first call
    in_operator_layout: Callable[[], Headers] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CodegenInputs:
    """What `torchgen.gen --generate headers` reads: the yaml, the tags, the templates."""

    native_functions: bytes
    tags: bytes
    templates: tuple[tuple[str, bytes], ...]  # (path under the templates directory, bytes), sorted

    @classmethod
    def read(cls, root: Path, instead: Mapping[str, bytes | None] = {}) -> CodegenInputs:
        """The inputs under ROOT, with INSTEAD's bytes for the paths it has (tree-relative)."""

        def read(relative: str) -> bytes:
            given = instead.get(relative)
            return given if given is not None else (root / relative).read_bytes()

        templates = root / TEMPLATES
        names = sorted(p.relative_to(templates).as_posix() for p in templates.rglob("*") if paths.walked_file(p))
        return cls(read(NATIVE_FUNCTIONS), read(TAGS), tuple((name, read(f"{TEMPLATES}/{name}")) for name in names))

    def write(self, source_dir: Path) -> None:
        """As `torchgen.gen -s SOURCE_DIR` reads them."""
        (source_dir / "native").mkdir(parents=True)
        (source_dir / "native" / "native_functions.yaml").write_bytes(self.native_functions)
        (source_dir / "native" / "tags.yaml").write_bytes(self.tags)
        for name, text in self.templates:
            (source_dir / "templates" / name).parent.mkdir(parents=True, exist_ok=True)
            (source_dir / "templates" / name).write_bytes(text)


@dataclass(frozen=True)
class Target:
    """A file to compile after the bypass."""

    path: str  # relative to the tree
    before: bytes | None  # the file before the bypass; None: the bypass created it
    edited: bool = True  # the bypass wrote it; else it reached a removed function and is compiled to see it still compiles


@dataclass(frozen=True)
class Before:
    """The tree as it was before the bypass, for the files that do not compile after it."""

    files: Mapping[str, bytes | None]  # every file the bypass wrote, as it was (None: it did not exist)
    headers: Callable[[], Headers]  # regenerated from the yaml and templates as they were, when first needed

    @classmethod
    def of(cls, tree: Tree, plans: Sequence[Plan], inputs: CodegenInputs | None = None) -> Before:
        """What PLANS write in TREE, as it was, and the headers torchgen generates from INPUTS (a full tree's codegen
        inputs before PLANS; by default TREE's own, with those files as they were)."""
        files = {change.path: change.before for change in combined_changes(plans)}
        return cls(files, functools.partial(regenerate_headers, tree, inputs or CodegenInputs.read(tree.root, files)))


@dataclass(frozen=True)
class Unit:
    """A translation unit the check generates (never written to the tree), compiled as the tree's PATH would be."""

    path: str  # relative to the tree
    text: bytes
    what: str  # for the verified line
    template: str | None = None  # the edited template it was generated from: compiled with it
    companions: tuple[tuple[str, bytes], ...] = ()  # headers it includes that no other place has, by their tree path


@dataclass(frozen=True)
class NotCompiled:
    path: str
    why: str


@dataclass(frozen=True)
class CompileReport:
    compiled: tuple[str, ...]
    cached: tuple[str, ...]  # of compiled: the same inputs compiled clean before
    templates_compiled: tuple[str, ...]  # edited header templates whose generated header a compiled file included
    not_compiled: tuple[NotCompiled, ...]
    seconds: float
    against: str = "against the headers the tree's torchgen regenerated"  # where, and against what, they compiled
    through: tuple[tuple[str, str], ...] = ()  # of compiled: headers, and the compiled file that read them
    per_operator: tuple[str, ...] = ()  # of compiled: those that include per-operator headers, compiled against them
    units: tuple[tuple[str, str], ...] = ()  # of compiled: the generated units, and what each is
    linked: int = 0  # objects the link check linked

    def verified(self) -> list[str]:
        if not self.compiled:
            return []
        which = f"{len(self.cached)} of them " if len(self.compiled) > 1 else ""
        cached = f"; {which}compiled clean before from the same inputs, not recompiled" if self.cached else ""
        headers = [t for t in self.templates_compiled if not t.endswith(SOURCE_SUFFIXES)]  # a source's: its unit says so
        through = f", including the headers generated from the edited {', '.join(headers)}" if headers else ""
        per_operator = (
            f" ({', '.join(self.per_operator)}: in torchgen's per-operator layout, with {PER_OPERATOR_FLAG}, for files that "
            "include <ATen/ops/...>)" if self.per_operator else ""
        )
        described = {**{path: f"read by {source}" for path, source in self.through}, **dict(self.units)}
        named = [f"{path} ({described[path]})" if path in described else path for path in self.compiled]
        linked = [
            f"the {self.linked} objects link with no undefined symbol, as a build links them into libtorch: against the "
            f"installed {', '.join(link_check.LIBRARIES)} (every symbol their objects define, hidden ones too; not the "
            "functions the bypass removed)"
        ] if self.linked else []
        return [
            f"{COMPILED_BY} compiles {', '.join(named)} {self.against}"
            f"{per_operator}{through} ({len(self.compiled)} file{'s' if len(self.compiled) > 1 else ''}, {self.seconds:.1f} s{cached})",
            *linked,
        ]

    def unchecked(self) -> list[str]:
        by_reason: dict[str, list[str]] = {}
        for item in self.not_compiled:
            by_reason.setdefault(item.why, []).append(item.path)
        return [f"{', '.join(paths)}: {why}" for why, paths in by_reason.items()]


def targets_of(plans: Sequence[Plan]) -> tuple[list[Target], list[str]]:
    """The C++ files to compile (those PLANS write, then those that reached a function they remove), and the
    edited templates (compiled only through what they generate)."""
    targets, templates = [], []
    reached = {path for plan in plans for path in plan.reaching}
    for change in combined_changes(plans):
        if change.path.startswith(TEMPLATES + "/"):
            templates.append(change.path)
        elif change.path.endswith(CPP_SUFFIXES) or change.path in reached:  # reached: a file a C/C++ file includes, any name
            targets.append(Target(change.path, change.before))
    edited = {target.path for target in targets}
    reaching = dict.fromkeys(path for plan in plans for path in plan.reaching if path not in edited)
    return targets + [Target(path, None, edited=False) for path in reaching], templates


def removed_by(plans: Sequence[Plan]) -> frozenset[str]:
    """The names of the at::cpu:: and at::redispatch:: functions PLANS remove (a guarded bypass removes none)."""
    return frozenset(name for p in plans if not p.guarded for name in (*p.capture.cpu_functions, *p.capture.redispatch_functions))


def regenerate_headers(tree: Tree, inputs: CodegenInputs | None = None, per_operator: bool = False) -> Headers:
    """The tree's torchgen on INPUTS (the tree's own yaml, tags and templates by default), headers only (PER_OPERATOR:
    in its per-operator layout, ATen/ops/...), read where the build cache keeps torchgen's run: the same inputs never
    run torchgen twice."""
    inputs = inputs or CodegenInputs.read(tree.root)
    layout = ("--per-operator-headers",) if per_operator else ()
    with tempfile.TemporaryDirectory(prefix="codemod-headers-") as scratch:
        inputs.write(Path(scratch))
        kept, from_cache = codegen.kept_aten(tree, Path(scratch), "--generate", "headers", *layout)
    in_operator_layout = None if per_operator else functools.partial(regenerate_headers, tree, inputs, per_operator=True)
    return Headers(kept, codegen.outputs_digest(kept), from_cache, per_operator, in_operator_layout)


def slim_tree(tree: Tree) -> str | None:
    """Why the tree's regenerated headers cannot stand in for the installed torch's generated ones, or None.

    The installed torch's hand-written headers (ivalue.h, ...) use generated functions of every operator;
    a tree with its own ATen headers is compiled against those instead.
    """
    if tree.path("aten/src/ATen/core/Tensor.h").is_file():
        return None
    installed_yaml = fromtorch.installed_torchgen() / "packaged" / NATIVE_FUNCTIONS.removeprefix("aten/src/")
    installed = set(native_yaml.load(NATIVE_FUNCTIONS, installed_yaml.read_text()).by_name())
    missing = installed - set(native_yaml.load(NATIVE_FUNCTIONS, exact_text.read(tree, NATIVE_FUNCTIONS)).by_name())
    if not missing:
        return None
    return (
        f"the tree's native_functions.yaml lacks {len(missing)} of the installed torch's {len(installed)} operators "
        f"({', '.join(sorted(missing)[:3])}, ...), which the installed headers use, so its regenerated headers cannot "
        f"replace theirs (a slim tree: its edited sources are compiled against a full tree's headers)"
    )


def foreign_torchgen(tree: Tree) -> str | None:
    """Why no file of the tree can be compiled here, or None: a tree with no hand-written ATen headers of its own
    (aten/src/ATen/core/Tensor.h) compiles against the installed torch's, which the installed torchgen's code was
    generated for; a tree whose own torchgen is another (another release's) generates code for other headers."""
    if not tree.has_own_torchgen or tree.path("aten/src/ATen/core/Tensor.h").is_file():
        return None
    ours, theirs = _python_files(tree.path("torchgen")), _python_files(fromtorch.installed_torchgen())
    differing = sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))
    if not differing:
        return None
    return (
        f"the tree's torchgen is not the installed torch {importlib.metadata.version('torch')}'s (torchgen/{differing[0]} "
        f"and {len(differing) - 1} more files differ) and the tree has no ATen headers of its own (aten/src/ATen/core/"
        "Tensor.h), so the installed torch's headers, made for another codegen, cannot stand in for the tree's (build the "
        "tree to compile it, or write it from the installed torch with `codemod tree from-torch`)"
    )


def _python_files(torchgen: Path) -> dict[str, bytes]:
    """A torchgen package's code, by path under it (not the packaged inputs a wheel's carries)."""
    return {
        path.relative_to(torchgen).as_posix(): path.read_bytes()
        for path in torchgen.rglob("*.py") if not {"packaged", "__pycache__"} & set(path.relative_to(torchgen).parts)
    }


@functools.lru_cache(maxsize=1)
def _compiler_identity() -> str:
    if shutil.which(compiler.CXX) is None:
        raise BadInput(f"{compiler.CXX}: compiler not found (set CXX, or pass --no-compile); verification compiles the edited sources, so nothing was written")
    return subprocess.run([compiler.CXX, "--version"], capture_output=True, text=True).stdout


def result_key(*inputs: bytes | str) -> str:
    """The cache key of a compile result: INPUTS, the flags, the compiler and the installed torch."""
    return cache.digest(*inputs, "\0".join(FLAGS), _compiler_identity(), importlib.metadata.version("torch"))[:24]


def check(
    tree: Tree, headers: Headers, plans: Sequence[Plan], before: Before | None = None, against: str = CompileReport.against,
    units: Sequence[Unit] = (),
) -> CompileReport:
    """Compile what PLANS wrote and what reached a function they remove, as it is on disk, and UNITS; raise
    VerificationFailed with every error the bypass brought, at the tree's file:line (one at a removed function names a
    caller left behind). BEFORE: the tree before the bypass, to tell those errors from the ones a file had already.
    Edited templates count as compiled when a compiled file included a header of their name that the tree's torchgen
    generated. AGAINST says where they compiled, for the verified line."""
    started = time.monotonic()
    targets, templates = targets_of(plans)
    run = _Run(tree, headers, before, removed_by(plans))
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        unit_runs = _largest_first(pool, run, units)
        outcomes = run.targets(pool, targets)
        unit_outcomes = [unit_run.result() for unit_run in unit_runs]
        outcomes += unit_outcomes
    failures = [o for o in outcomes if o.errors]
    if failures:
        raise VerificationFailed(_failure_message(failures))
    generated_read = {Path(name).name for o in outcomes if o.compiled for name in o.generated_read}
    generated_from = {unit.template for unit, o in zip(units, unit_outcomes) if o.compiled}
    templates_compiled = [t for t in templates if Path(t).name in generated_read or t in generated_from]
    linked, not_linked = _link(run, outcomes, _bypassed_sources_not_built(tree, outcomes, generated_from))
    order = {path: i for i, path in enumerate([*(t.path for t in targets), *(u.path for u in units)])}
    compiled = sorted((o for o in outcomes if o.compiled), key=lambda o: order[o.target.path])
    not_compiled = [
        *(NotCompiled(t.path, "a CUDA source, which g++ does not compile") for t in targets if t.path.endswith(CUDA_SUFFIXES)),
        *not_linked,
        *(o.missing for o in outcomes if o.missing is not None),
        *(NotCompiled(t, template_not_compiled(t)) for t in templates if t not in templates_compiled),
    ]
    return CompileReport(
        compiled=tuple(o.target.path for o in compiled),
        cached=tuple(o.target.path for o in compiled if o.cached),
        templates_compiled=tuple(templates_compiled),
        not_compiled=tuple(not_compiled),
        seconds=time.monotonic() - started,
        against=against,
        through=tuple((o.target.path, o.read_by) for o in compiled if o.read_by),
        per_operator=tuple(o.target.path for o in compiled if o.headers is not None and o.headers.per_operator),
        units=tuple((u.path, u.what) for u in units),
        linked=linked,
    )


def _bypassed_sources_not_built(tree: Tree, outcomes: Sequence[_Outcome], generated_from: set[str | None]) -> list[str]:
    """What any bypass in TREE (its journals: this run's and earlier ones) wrote that a build compiles, a source or the
    template of a generated one (GENERATED_FROM: those whose unit compiled), and that this check did not compile: the
    hand-written API of an earlier op calls definitions in sources this run does not compile."""
    compiled = {o.target.path for o in outcomes if o.compiled} | generated_from
    written = dict.fromkeys(f.path for entry in journal.bypassed(tree) for f in entry.files)
    return [path for path in written if path.endswith(SOURCE_SUFFIXES) and path not in compiled]


def _link(run: _Run, outcomes: Sequence[_Outcome], unbuilt_sources: Sequence[str]) -> tuple[int, list[NotCompiled]]:
    """Link the objects of OUTCOMES (link_check.py): how many linked with no undefined symbol the bypass brought (0:
    not judged), and what the check names instead (a symbol a file's object referenced before the bypass too; the
    sources not compiled (of OUTCOMES, and UNBUILT_SOURCES: what the tree's bypasses wrote that a build compiles and
    this check did not), which define what nobody knows: the undefined symbols are then named, not judged). Raise
    VerificationFailed with the symbols the bypass left undefined when every such source was compiled."""
    missing = [o.target.path for o in outcomes if o.missing is not None and o.target.path.endswith(SOURCE_SUFFIXES)]
    unlinked = list(dict.fromkeys([*missing, *unbuilt_sources]))
    objects = {o.target.path: o.object for o in outcomes if o.compiled and o.object is not None}
    unresolved = link_check.unresolved(objects, run.removed) if objects else []
    if unlinked:
        unknown = f"{', '.join(unlinked)} not compiled, so what {'it defines' if len(unlinked) == 1 else 'they define'} is unknown"
        if not unresolved:
            return len(objects), [NotCompiled(LINK, f"{unknown}: not part of it")]
        named = ", ".join(f"`{row.symbol}`" for row in unresolved[:3]) + (", ..." if len(unresolved) > 3 else "")
        return 0, [NotCompiled(LINK, f"{unknown}: {len(unresolved)} symbols the objects reference and neither they nor libtorch define are not judged ({named})")]
    by_path = {o.target.path: o for o in outcomes}
    had = [row for row in unresolved if not row.removed and all(row.mangled in run.undefined_before(by_path[p]) for p in row.referenced_by)]
    if len(had) < len(unresolved):
        raise VerificationFailed(_link_failure([row for row in unresolved if row not in had]))
    return len(objects), [NotCompiled(path, _linked_before(row)) for row in had for path in row.referenced_by]


def compile_ahead(tree: Tree, headers: Headers, plans: Sequence[Plan], units: Sequence[Unit], stop: threading.Event, before: Before) -> None:
    """Compile what check compiles after writing, before writing: the files PLANS write and those that reach a function
    they remove, reading the bytes PLANS will write in place of the tree's, then UNITS, against HEADERS; raise
    VerificationFailed with g++'s errors when one brings an error (BEFORE: the tree as it is, to tell the errors a file
    had already) other than a call left behind at a removed function, which check names after writing as the place to
    rewrite by hand (a caller review left out, a spelling the plan does not rewrite). Check, after writing, finds the
    record of each compile (the same inputs: the tree then holds those bytes) and says it. Once STOP is set (another
    check refused the bypass), no further file is compiled: nothing will be written, so their verdict is not asked for."""
    planned = {change.path: change.after for change in combined_changes(plans)}
    run = _Run(tree, headers, before, removed_by(plans), planned=planned, stop=stop)
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        outcomes = run.targets(pool, targets_of(plans)[0])  # first: where a plan's own edit fails, it is said soonest
        if not any(_refused(outcome) for outcome in outcomes):
            outcomes += [unit_run.result() for unit_run in _largest_first(pool, run, units)]
    failures = [outcome for outcome in outcomes if _refused(outcome)]
    if failures:
        raise VerificationFailed(_failure_message(failures, "the code the bypass leaves does not compile"))


def _largest_first(pool: ThreadPoolExecutor, run: _Run, units: Sequence[Unit]) -> list[Future[_Outcome]]:
    """UNITS' compiles by RUN, submitted to POOL the largest text first, returned in UNITS' order. Headers take most of
    a unit's time, and the units that include the most of them (the autograd codegen's, the Python bindings) are also
    the largest; started last, the costliest ran alone at the end of a cold `bypass mul` (2026-12-07: its last 10 s on
    one core of two)."""
    runs = {unit: pool.submit(run.unit, unit) for unit in sorted(units, key=lambda unit: -len(unit.text))}
    return [runs[unit] for unit in units]


def _refused(outcome: _Outcome) -> bool:
    """Whether OUTCOME (of a compile before writing) refuses the bypass: an error it brought, but a call left behind."""
    return bool(outcome.errors) and len(outcome.leftovers) < outcome.new_errors


def template_not_compiled(template: str) -> str:
    if template.endswith(SOURCE_SUFFIXES):
        return "a template of a generated source, which this check does not build"
    return "no compiled file includes a header generated from it under its name"


@dataclass(frozen=True)
class _Outcome:
    target: Target
    cached: bool = False
    errors: str = ""  # the bypass's errors, as g++ wrote them
    leftovers: tuple[str, ...] = ()  # of those, the callers left behind (file:line: ...)
    new_errors: int = 0  # how many errors the bypass brought (the leftovers among them)
    missing: NotCompiled | None = None
    generated_read: tuple[str, ...] = ()  # regenerated headers it included, relative to their root
    tree_headers: tuple[str, ...] = ()  # the tree's headers it read
    read_by: str = ""  # a header: the compiled file that read it
    headers: Headers | None = None  # the regenerated headers it compiled against
    object: Path | None = None  # its compile's object, for the link check

    @property
    def compiled(self) -> bool:
        return not self.errors and self.missing is None


@dataclass(frozen=True)
class _Compiled:
    """One g++ run (or its record): what it said and what it read."""

    output: str  # g++'s messages, paths relative to the tree; "" for a clean compile
    dependencies: dict
    cached: bool
    object: Path | None = None  # a clean compile's object, kept beside its record

    @property
    def clean(self) -> bool:
        return not self.output


@dataclass
class _Run:
    tree: Tree
    headers: Headers
    before: Before | None
    removed: frozenset[str]
    planned: Mapping[str, bytes] = field(default_factory=dict)  # before writing: the bytes the plans write, by path
    wanted: set[str] = field(default_factory=set)  # keys of the GENERATED_PCHs the run may make (generated_pch_users)
    stop: threading.Event | None = None  # before writing: once set, no further file is compiled
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _before_headers: list[Headers] = field(default_factory=list)
    _operator_layouts: dict[str, Headers] = field(default_factory=dict)  # by the digest of the monolithic headers

    def read(self, relative: str) -> bytes | None:
        """RELATIVE as the compiles read it: the bytes the plans write (before writing), else the tree's."""
        return _read_in(self.tree, self.planned, relative)

    def targets(self, pool: ThreadPoolExecutor, targets: Sequence[Target]) -> list[_Outcome]:
        """TARGETS compiled in POOL: each source as its own translation unit, the largest first (a file's size stands
        for its compile time, so that the two jobs end close together); then each header as part of a compiled source
        that read it (after writing), or alone."""
        sources = [t for t in targets if t.path.endswith(SOURCE_SUFFIXES)]
        header_targets = [t for t in targets if not t.path.endswith((*SOURCE_SUFFIXES, *CUDA_SUFFIXES))]  # .h, .inl, ...
        largest_first = sorted(sources, key=lambda t: -len(self.read(t.path) or b""))
        loading = self.generated_pch_users(pool, largest_first)
        # the first to load it makes it (if need be), beside the files that load none; the others wait for it
        in_order = [*loading[:1], *(t for t in largest_first if t not in loading), *loading[1:]]
        by_target = dict(zip(in_order, pool.map(self.target, in_order)))
        outcomes = [by_target[t] for t in sources]
        read_by = {name: o for o in outcomes if o.compiled for name in o.tree_headers}
        alone = [t for t in header_targets if t.path not in read_by]
        if not self.planned:  # before writing, a header a source read compiled with it: its lines are judged after
            outcomes += [self.through(t, read_by[t.path]) for t in header_targets if t.path in read_by]
        return outcomes + list(pool.map(self.target, alone))

    def generated_pch_users(self, pool: ThreadPoolExecutor, sources: Sequence[Target]) -> list[Target]:
        """Of SOURCES (checked in POOL), those that will load a GENERATED_PCH: one kept from an earlier run, or one that
        GENERATED_PCH_USERS of them read the headers of and pass the check for, which the run then makes (added to
        WANTED). The check runs only where a PCH may be loaded. A file compiled clean before from the same inputs is not
        compiled again: it loads none."""
        reading = dict(zip(sources, pool.map(self._generated_pch_read, sources)))
        readers = Counter(reading.values())
        candidates = [t for t, pch_key in reading.items() if pch_key is not None and self._worth(pch_key, readers[pch_key])]
        passing = [t for t, passes in zip(candidates, pool.map(self._passes_check, candidates)) if passes]
        users = Counter(reading[t] for t in passing)
        self.wanted |= {pch_key for pch_key, count in users.items() if count >= GENERATED_PCH_USERS}
        return [t for t in passing if self._worth(reading[t], users[reading[t]])]

    def _worth(self, pch_key: str, users: int) -> bool:
        return users >= GENERATED_PCH_USERS or pch_key in self.wanted or pch.kept(GENERATED_PCH, pch_key)

    def _generated_pch_read(self, target: Target) -> str | None:
        if self.read(target.path) is None:
            return None
        with tempfile.TemporaryDirectory(prefix="codemod-compile-") as scratch:
            return _View(self.tree, self.headers, self.planned, Path(scratch)).generated_pch_read(target.path)

    def _passes_check(self, target: Target) -> bool:
        with tempfile.TemporaryDirectory(prefix="codemod-compile-") as scratch:
            return _View(self.tree, self.headers, self.planned, Path(scratch)).loads_generated_pch_alike(target.path)

    def target(self, target: Target) -> _Outcome:
        """Compile TARGET as its own translation unit; on errors, tell the bypass's from those it had."""
        if self.stop is not None and self.stop.is_set():
            return _Outcome(target, missing=NotCompiled(target.path, _STOPPED))
        if self.read(target.path) is None:
            return _Outcome(target, missing=NotCompiled(target.path, "not on disk after the bypass"))
        with tempfile.TemporaryDirectory(prefix="codemod-compile-") as scratch:
            after, compiled = self._compiled(target.path, Path(scratch) / "after")
            if not compiled.clean:
                return self._failed(target, after, compiled, Path(scratch))
            deps = compiled.dependencies
            # before writing, the lines in branches g++ did not take are named after writing, from the same compile
            skipped = None if self.planned else self._not_taken(target, after, target.path)
        if skipped is not None:
            return _Outcome(target, missing=skipped)
        return _Outcome(
            target, compiled.cached, generated_read=tuple(deps["generated_headers"]), tree_headers=tuple(deps["tree_headers"]),
            headers=after.headers, object=compiled.object,
        )

    def unit(self, unit: Unit) -> _Outcome:
        """Compile UNIT in the tree's place, against the regenerated headers; every error it meets is the bypass's."""
        target = Target(unit.path, None)
        if self.stop is not None and self.stop.is_set():
            return _Outcome(target, missing=NotCompiled(unit.path, _STOPPED))
        with tempfile.TemporaryDirectory(prefix="codemod-compile-") as scratch:
            view = _View(self.tree, self.headers, {**self.planned, unit.path: unit.text, **dict(unit.companions)}, Path(scratch))
            compiled = view.compile(unit.path)
            if not compiled.clean:
                failed = self._failed(target, view, compiled, Path(scratch))
                said = f"{unit.path} ({unit.what}):" + failed.errors.removeprefix(f"{unit.path}:")
                return dataclasses.replace(failed, errors=said) if failed.errors else failed
        deps = compiled.dependencies
        return _Outcome(
            target, compiled.cached, generated_read=tuple(deps["generated_headers"]), tree_headers=tuple(deps["tree_headers"]),
            headers=self.headers, object=compiled.object,
        )

    def undefined_before(self, outcome: _Outcome) -> set[str]:
        """The symbols the object of OUTCOME's file references as the file was before the bypass, compiled as it was
        compiled after (none: a generated unit, or the tree as it was cannot be compiled)."""
        target = outcome.target
        if self.before is None or outcome.headers is None or (target.before is None and target.edited):
            return set()
        with tempfile.TemporaryDirectory(prefix="codemod-compile-") as scratch:
            headers = self._headers_before()
            if outcome.headers.per_operator:
                headers = self._in_operator_layout(headers)
            compiled = _View(self.tree, headers, self.before.files, Path(scratch)).compile(target.path)
        return link_check.undefined(compiled.object) if compiled.object is not None else set()

    def through(self, target: Target, source: _Outcome) -> _Outcome:
        """A header a compiled source read: compiled as part of it, against the headers the source compiled against."""
        with tempfile.TemporaryDirectory(prefix="codemod-compile-") as scratch:
            skipped = self._not_taken(target, _View(self.tree, source.headers, {}, Path(scratch)), source.target.path)
        if skipped is not None:
            return _Outcome(target, missing=skipped)
        return _Outcome(target, read_by=source.target.path, headers=source.headers)

    def _compiled(self, relative: str, scratch: Path) -> tuple[_View, _Compiled]:
        """RELATIVE as it is on disk, against the regenerated headers; if it read per-operator headers torchgen
        generated elsewhere (the installed torch's ATen/ops/...), which contradict those, against the same inputs'
        per-operator headers instead, as PyTorch's per-operator build compiles it. Only such a file pays for them."""
        view = _View(self.tree, self.headers, self.planned, scratch, self.wanted)
        compiled = view.compile(relative)
        if compiled.dependencies.get("operator_headers_elsewhere") and self.headers.in_operator_layout is not None:
            view = _View(self.tree, self._in_operator_layout(self.headers), self.planned, scratch)
            compiled = view.compile(relative)
        return view, compiled

    def _in_operator_layout(self, headers: Headers) -> Headers:
        with self._lock:  # generated once for both compile jobs
            if headers.digest not in self._operator_layouts:
                self._operator_layouts[headers.digest] = headers.in_operator_layout()
            return self._operator_layouts[headers.digest]

    def _failed(self, target: Target, after: _View, compiled: _Compiled, scratch: Path) -> _Outcome:
        missing = _missing_header(target, compiled.output)
        if missing is not None:
            return _Outcome(target, missing=missing)
        errors = _errors(compiled.output, after)
        earlier: list[_Error] | None = None
        note = ""
        if self.before is not None and (target.before is not None or not target.edited):
            try:
                headers = self._headers_before()
                if after.headers.per_operator:  # as the file compiled after the bypass
                    headers = self._in_operator_layout(headers)
                view = _View(self.tree, headers, self.before.files, scratch / "before")
                earlier = _errors(view.compile(target.path).output, view)
            except VerificationFailed as error:  # the tree as it was cannot be compiled: every error counts
                note = f"\n  (the file as it was before the bypass could not be compiled: {str(error).splitlines()[0]})"
        new = [e for e in errors if earlier is None or not any(e.same_as(old, after, view) for old in earlier)]
        if not new:
            return _Outcome(target, missing=NotCompiled(target.path, f"did not compile before the bypass (first error {errors[0]})"))
        leftovers = tuple(f"{e.file}:{e.line}: {e.text(after).strip()} ({e.message})" for e in new if e.at_removed(self.removed, after))
        lines = [line for e in new for line in e.lines]
        shown = "\n".join(f"  {line}" for line in lines[:SHOWN_ERROR_LINES])
        return _Outcome(target, errors=f"{target.path}:\n{shown}{note}", leftovers=leftovers, new_errors=len(new))

    def _headers_before(self) -> Headers:
        with self._lock:
            if not self._before_headers:
                self._before_headers.append(self.before.headers())
            return self._before_headers[0]

    def _not_taken(self, target: Target, view: _View, unit: str) -> NotCompiled | None:
        """Lines the bypass wrote in TARGET inside a preprocessor branch that compiling UNIT did not take."""
        if not target.edited:
            return None  # the bypass wrote nothing in it
        after = self.tree.path(target.path).read_bytes()
        conditional = _conditional_lines(after, _written_lines(target.before or b"", after))
        if not conditional:
            return None
        live = view.live_lines(unit, target.path)
        skipped = sorted(line for line in conditional if line not in live)
        if not skipped:
            return None
        directive = conditional[skipped[0]]
        return NotCompiled(
            target.path,
            f"lines {_ranges(skipped)}, written by the bypass, are in a preprocessor branch g++ does not take with these flags "
            f"({directive}); they were not compiled",
        )


@dataclass
class _View:
    """The tree as g++ sees it: on disk, or with INSTEAD's bytes for some files (as they were before the bypass, or as
    a plan will write them), laid out under SCRATCH in front of the tree. WANTED: the keys of the GENERATED_PCHs it may
    make (else it loads one only when kept)."""

    tree: Tree
    headers: Headers
    instead: Mapping[str, bytes | None]
    scratch: Path
    wanted: set[str] = field(default_factory=set)

    def read(self, relative: str) -> bytes | None:
        return _read_in(self.tree, self.instead, relative)

    def _digest(self, relative: str) -> str | None:
        """The content hash of RELATIVE as g++ reads it in this view (None: no such file), without reading a file of
        the tree whose hash this process took while it stayed the same (cache.file_digest)."""
        if relative in self.instead:
            text = self.instead[relative]
            return None if text is None else hashlib.sha256(text).hexdigest()
        return _file_digest(os.path.join(self.tree.root, relative))

    def _has_any(self, relatives: Sequence[str]) -> bool:
        """Whether the view has a file at any of RELATIVES (hundreds: each directory of the tree is listed once)."""
        by_directory: dict[str, set[str]] = {}
        for relative in relatives:
            if relative in self.instead:
                if self.instead[relative] is not None:
                    return True
                continue
            by_directory.setdefault(os.path.dirname(relative), set()).add(os.path.basename(relative))
        for directory, names in by_directory.items():
            where = os.path.join(self.tree.root, directory)
            try:
                present = names.intersection(os.listdir(where))
            except OSError:  # no such directory in the tree
                continue
            if any(os.path.isfile(os.path.join(where, name)) for name in present):
                return True
        return False

    def compile(self, relative: str) -> _Compiled:
        """RELATIVE compiled, or the record of a compile of the same inputs; made under the record's lock, so another
        process compiling the same inputs meanwhile is waited for and its record taken."""
        record = self._record(relative)
        with cache.making(record):
            kept_object = record.with_suffix(".o")
            recorded = self._recorded(record, _COMPILE_FIELDS)
            if recorded is not None and (recorded["output"] or _holds(kept_object, recorded["object"])):
                return _Compiled(recorded["output"], recorded, cached=True, object=None if recorded["output"] else kept_object)
            return self._compiled_now(relative, self._main(relative), record, kept_object)

    def _compiled_now(self, relative: str, main: Path, record: Path, kept_object: Path) -> _Compiled:
        self.scratch.mkdir(parents=True, exist_ok=True)
        deps, made = self.scratch / "deps.d", self.scratch / "compiled.o"
        command = compile_command(self.tree, self.headers, relative, main, self._front())
        flags = command[1:-1]
        with self._precompiled(relative, main, flags) as loading:
            command[-1:-1] = [*loading, "-MD", "-MF", str(deps), "-o", str(made)]
            progress.command(command)
            result = subprocess.run(command, capture_output=True, text=True)
        output = self._relative(result.stderr) if result.returncode != 0 else ""
        if not output:  # the object first: a record names only an object that is there
            cache.publish_file(kept_object, made)
        # g++ (12) lists none of a loaded PCH's headers under -MD, -fpch-deps or not: they are what the PCH read
        held = pch.files_read(compiler.CXX, GENERATED_PCH, tuple(flags), as_header=True)[1:] if loading else ()
        object_digest = "" if output else cache.file_digest(kept_object)
        dependencies = {**self._dependencies(deps, held), "output": output, "precompiled": bool(loading), "object": object_digest}
        if "fatal error" not in output:  # a missing header is not in the -MD list: its record could not tell it appeared
            cache.publish_text(record, json.dumps(dependencies))
        return _Compiled(output, dependencies, cached=False, object=None if output else kept_object)

    def generated_pch_read(self, relative: str) -> str | None:
        """The key of the GENERATED_PCH whose headers compiling RELATIVE reads (g++ -M: cheap beside the check); None
        when it reads not all of them, g++ cannot read its includes (its compile says why), or it is not compiled again
        (a record of its compile holds)."""
        if not relative.endswith(_SUFFIXES_GXX_KNOWS):  # g++ -M reads a file by its suffix: an .inl it takes for a linker input
            return None
        if self._recorded(self._record(relative), _COMPILE_FIELDS) is not None:
            return None
        main = self._main(relative)
        flags = compile_command(self.tree, self.headers, relative, main, self._front())[1:-1]
        if any(flag.startswith("-include") for flag in flags):  # a PCH is loaded only as the first file read
            return None
        try:
            read = pch.files_read(compiler.CXX, main, tuple(flags))
        except VerificationFailed:
            return None
        wrapper = GENERATED_PCH.read_text()
        reads_it = pch.unread_includes_removed(wrapper, [path.as_posix() for path in read]) == wrapper
        return pch.key(compiler.CXX, GENERATED_PCH, flags) if reads_it else None

    def loads_generated_pch_alike(self, relative: str) -> bool:
        """Whether RELATIVE reads every file alike with GENERATED_PCH force-included as without it (pch.reads_the_same),
        recorded with its compile's inputs."""
        main = self._main(relative)
        flags = compile_command(self.tree, self.headers, relative, main, self._front())[1:-1]
        record = self._record(relative, GENERATED_PCH.read_text())
        recorded = self._recorded(record, ("shared",))
        if recorded is not None:
            return recorded["shared"]
        self.scratch.mkdir(parents=True, exist_ok=True)
        deps = self.scratch / "preprocessed.d"
        alone = self._preprocessed(main, flags, deps=deps)
        shared = alone is not None and pch.reads_the_same(alone, self._preprocessed(main, flags, GENERATED_PCH))
        cache.publish_text(record, json.dumps({**self._dependencies(deps), "shared": shared}))
        return shared

    @contextlib.contextmanager
    def _precompiled(self, relative: str, main: Path, flags: list[str]) -> Iterator[list[str]]:
        """What to add to the compile of RELATIVE with FLAGS to load GENERATED_PCH, held while the block compiles: when
        this run makes it (WANTED) or it is kept, and the check passes; else nothing."""
        if not self.wanted and not pch.any_kept(GENERATED_PCH):  # none to load: spare the two g++ -M that find its key
            yield []
            return
        shared_key = self.generated_pch_read(relative)
        if shared_key is not None and (shared_key in self.wanted or pch.kept(GENERATED_PCH, shared_key)) and self.loads_generated_pch_alike(relative):
            with pch.loaded(compiler.CXX, GENERATED_PCH, flags, shared_key, KEPT_GENERATED_PCHS) as loading:
                yield loading
        else:
            yield []

    def _preprocessed(self, main: Path, flags: list[str], header: Path | None = None, deps: Path | None = None) -> dict[str, str] | None:
        """pch.preprocessed, with the files named as in the tree (a view's copies as the tree's files)."""
        return pch.preprocessed(compiler.CXX, main, flags, header, deps, paths=self._relative)

    def _record(self, relative: str, *more: str) -> Path:
        """Where the outcome of compiling RELATIVE (as this view reads it: the bytes g++ compiles) is recorded; with MORE,
        what else its key holds. Named without laying the view's files out: a record that holds needs none."""
        checkout = [flag.replace(str(self.tree.root), "<tree>") for flag in _checkout_flags(self.tree, relative)]  # copies share results
        flags = [*_kernel_flags(relative), *checkout]
        key = result_key(relative, self.read(relative) or b"", self.headers.digest, *flags, *more)
        return cache.cache_dir() / "syntax" / f"{key}.json"

    def live_lines(self, unit: str, relative: str) -> set[int]:
        """The lines of RELATIVE that g++'s preprocessor keeps when compiling UNIT."""
        command = compile_command(self.tree, self.headers, unit, self._main(unit), self._front(), preprocess=True)
        progress.command(command)
        result = subprocess.run(command, capture_output=True, text=True)
        return {line for line, _ in pch.parse(result.stdout).lines.get(str(self.tree.path(relative)), [])}

    def _main(self, relative: str) -> Path:
        """The file g++ compiles: the tree's, or (a view before the bypass) a copy beside the earlier files, so its
        quoted includes find those first."""
        if not self.instead:
            return self.tree.path(relative)
        front = self._front()
        if not front.is_dir():
            for path, text in self.instead.items():
                if text is not None:
                    (front / path).parent.mkdir(parents=True, exist_ok=True)
                    (front / path).write_bytes(text)
        main = front / relative
        if not main.is_file():
            main.parent.mkdir(parents=True, exist_ok=True)
            main.write_bytes(self.tree.path(relative).read_bytes())
        return main

    def _front(self) -> Path | None:
        return self.scratch / "front" if self.instead else None

    def _relative(self, output: str) -> str:
        """g++'s messages naming the tree's files (and the earlier copies) by their paths in the tree."""
        front = self._front()
        if front is not None:
            output = output.replace(f"{front}/", "")
        return output.replace(f"{self.tree.root}/", "")

    def _dependencies(self, deps_file: Path, held: Sequence[Path] = ()) -> dict:
        """What a compile read (g++ -MD; HELD: the headers of the PCH it loaded) besides the compiled file: the regenerated headers by name, the tree's
        headers by content hash, the installed torch's by path (a tree header of that path would shadow it), and of
        the last two, the per-operator headers torchgen generated (a checkout's build, the installed torch's); every
        file outside the tree (the regenerated and installed headers, the system's, one compile_commands.json
        force-includes) by its path and content hash."""
        text = deps_file.read_text().replace("\\\n", " ") if deps_file.is_file() else ":"
        read = list(dict.fromkeys([*(Path(name) for name in text.split(":", 1)[1].split()[1:]), *held]))
        front = self._front()
        generated, tree_headers, installed, operator_headers, outside = [], {}, [], [], {}
        for path in read:
            if front is not None and path.is_relative_to(front):
                name = path.relative_to(front).as_posix()
                tree_headers[name] = cache.file_digest(path)
            elif path.is_relative_to(self.tree.root) and not path.is_relative_to(self.headers.root):
                name = self.tree.rel(path)
                tree_headers[name] = cache.file_digest(path)
            else:
                outside[str(path)] = cache.file_digest(path)
                if path.is_relative_to(self.headers.root):
                    generated.append(path.relative_to(self.headers.root).as_posix())
                    continue
                # the deepest include directory holding it: the name it was included by
                name = next((path.relative_to(d).as_posix() for d in reversed(_installed_include_dirs()) if path.is_relative_to(d)), "")
                installed += [name] if name else []
            if _generated_operator_header(name, path):
                operator_headers.append(name)
        return {
            "generated_headers": generated, "tree_headers": tree_headers, "installed_headers": installed,
            "operator_headers_elsewhere": operator_headers, "outside_tree": outside,
        }

    def _recorded(self, record: Path, fields: tuple[str, ...]) -> dict | None:
        """The outcome of a compile (or preprocessing) of the same inputs, holding FIELDS, if the record is whole (else
        it is dropped: compiled again, recorded anew), every file it read, in the tree or outside it, still has the same
        bytes, and no tree header now shadows an installed header it read; else None."""
        deps = cache.kept_json(record, dict[str, object])  # None: none, or truncated or corrupt
        if deps is None or not all(json_file.matches(deps.get(f), _RECORD_FIELDS[f]) for f in (*_DEPENDENCY_FIELDS, *fields)):
            return None  # not of this shape, or written before some field was recorded
        # thousands of files per record, each looked at by its path as a string: pathlib's objects cost more than the stat
        if any(self._digest(name) != digest for name, digest in deps["tree_headers"].items()):
            return None
        if any(_file_digest(name) != digest for name, digest in deps["outside_tree"].items()):
            return None
        own_dirs = ("aten/src", "")
        return None if self._has_any([os.path.join(d, name) for name in deps["installed_headers"] for d in own_dirs]) else deps


def _read_in(tree: Tree, instead: Mapping[str, bytes | None], relative: str) -> bytes | None:
    """RELATIVE's bytes: INSTEAD's for a path it has (None: no such file), else the tree's."""
    if relative in instead:
        return instead[relative]
    path = tree.path(relative)
    return path.read_bytes() if path.is_file() else None


def _file_digest(path: str) -> str | None:
    """cache.file_digest of the regular file at PATH; None where there is none."""
    try:
        info = os.stat(path)
    except OSError:  # missing, or a directory on its way
        return None
    return cache.stat_digest(path, info) if stat.S_ISREG(info.st_mode) else None


def _holds(kept_object: Path, digest: str) -> bool:
    """Whether KEPT_OBJECT is the object a clean compile recorded (by its content hash): else it is compiled again."""
    return kept_object.is_file() and cache.file_digest(kept_object) == digest


# A record's fields and their shapes: what every record holds (_DEPENDENCY_FIELDS), and what a compile's or a check's adds.
_RECORD_FIELDS = {
    "generated_headers": list[str], "tree_headers": dict[str, str], "installed_headers": list[str],
    "operator_headers_elsewhere": list[str], "outside_tree": dict[str, str], "output": str, "shared": bool,
    "precompiled": bool, "object": str,
}
_DEPENDENCY_FIELDS = ("generated_headers", "tree_headers", "installed_headers", "operator_headers_elsewhere", "outside_tree")


def compile_command(tree: Tree, headers: Headers, relative: str, main: Path, front: Path | None = None, preprocess: bool = False) -> list[str]:
    """g++ on MAIN, the tree's RELATIVE (a header is compiled as C++), with FRONT's files (the tree as it was
    before the bypass) in front of the tree's; PREPROCESS: only the preprocessor, its output on stdout."""
    kernel_flags = _kernel_flags(relative)
    flags = ["-E", *FLAGS[1:]] if preprocess else list(FLAGS)
    flags += [PER_OPERATOR_FLAG] if headers.per_operator else []
    fronts = [front] if front is not None else []
    here = os.path.dirname(relative)
    quoted = [f"-iquote{root / here}" for root in (*fronts, tree.root)]
    api = tree.path("torch/csrc/api/include")  # a checkout's C++ frontend headers, as the installed torch has its own
    dirs = [headers.root, *(d for root in (*fronts, tree.root) for d in (root / "aten/src", root)), *([api] if api.is_dir() else [])]
    language = [] if relative.endswith(SOURCE_SUFFIXES) else ["-x", "c++"]
    return [
        compiler.CXX, *flags, *kernel_flags, *quoted, *(f"-I{d}" for d in dirs), *_checkout_flags(tree, relative),
        *(f"-I{d}" for d in _installed_include_dirs()), *language, str(main),
    ]


def _kernel_flags(relative: str) -> tuple[str, ...]:
    return KERNEL_FLAGS if relative.startswith(KERNEL_DIR) or Path(relative).name.startswith(UFUNC_KERNEL) else ()


def _checkout_flags(tree: Tree, relative: str) -> tuple[str, ...]:
    """A checkout's own build, for what the tree's sources need and the installed torch lacks or has otherwise:
    the include directories and macros compile_commands.json gives RELATIVE (or the nearest file it has), else
    the build directory's generated headers (`build/aten/src/ATen/Config.h`, ...)."""
    entries = _compile_commands(tree.root)
    if entries:
        return entries[max(entries, key=lambda path: (path == relative, len(os.path.commonpath([path, relative]))))]
    build = tree.path("build")
    return tuple(f"-I{d}" for d in (build / "aten/src", build) if d.is_dir())


@functools.lru_cache(maxsize=4)
def _compile_commands_of(root: Path, path: Path, mtime: float) -> dict[str, tuple[str, ...]]:
    """compile_commands.json at PATH: the kept flags of each file under ROOT, paths made absolute; a database that is
    not a list of entries, each a `directory`, a `file` and its `arguments` (or a `command` a shell splits), is refused
    in one line naming the entry."""
    entries = json_file.read(path, "compilation database", "fix or remove it")
    if not isinstance(entries, list):
        raise BadInput(f"{path}: not a compilation database (a JSON list of entries); fix or remove it")
    found = {}
    for index, entry in enumerate(entries):
        where = f"{path}: entry {index}"
        if not _an_entry(entry):
            raise BadInput(f"{where}: not an object of `directory` and `file` strings with `arguments` (strings) or `command`; fix or remove it")
        try:
            arguments = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
        except ValueError as error:  # an unclosed quote
            raise BadInput(f"{where}: its command cannot be split as a shell would ({error}); fix or remove it") from None
        directory = Path(root, entry["directory"])
        source = (directory / entry["file"]).resolve()
        if source.is_relative_to(root):
            found[source.relative_to(root).as_posix()] = _kept_flags(arguments, directory)
    return found


def _an_entry(entry: object) -> bool:
    """Whether ENTRY has the shape of a compilation database's entry (the fields read here; others are allowed)."""
    if not (isinstance(entry, dict) and isinstance(entry.get("directory"), str) and isinstance(entry.get("file"), str)):
        return False
    if "arguments" in entry:
        return json_file.matches(entry["arguments"], list[str])
    return isinstance(entry.get("command"), str)


def _compile_commands(root: Path) -> dict[str, tuple[str, ...]]:
    path = _compile_commands_file(root)
    return {} if path is None else _compile_commands_of(root, path, paths.regular_file(path, "a compilation database").stat().st_mtime)


def _compile_commands_file(root: Path) -> Path | None:
    return next((root / name for name in _COMPILE_COMMANDS if os.path.lexists(root / name)), None)


def preflight(tree: Tree, plans: Sequence[Plan]) -> None:
    """What the compile after writing reads besides the tree's files, read and checked before the first write (a
    refusal then writes nothing): the compiler, compile_commands.json, and every path the flags it gives a file to
    compile name (a force-included header a regular file, an include directory a directory)."""
    _compiler_identity()
    for target in targets_of(plans)[0]:
        for flag in _checkout_flags(tree, target.path):
            prefix = next((prefix for prefix in _PATH_FLAGS if flag.startswith(prefix)), None)
            if prefix is None:
                continue
            named, database = Path(flag[len(prefix):]), _compile_commands_file(tree.root)
            what = f"the header {database} gives {target.path} with {prefix}"
            if prefix == "-include":
                paths.regular_file(named, what)
            elif not paths.name_checked(named, what).is_dir():
                raise BadInput(
                    f"{named}: not a directory, but {database} gives {target.path} {prefix} {named}; "
                    f"nothing was written: fix or remove {database}"
                )


def _kept_flags(arguments: list[str], directory: Path) -> tuple[str, ...]:
    kept, pending = [], None
    for argument in arguments:
        if pending is not None:
            kept.append(pending + (str(directory / argument) if pending in _PATH_FLAGS else argument))
            pending = None
            continue
        flag = next((f for f in _KEPT_FLAGS if argument.startswith(f)), None)
        if flag is None:
            continue
        value = argument[len(flag):]
        if not value:
            pending = flag
        elif not (flag == "-D" and value.split("=")[0] in _DROPPED_MACROS):
            kept.append(flag + (str(directory / value) if flag in _PATH_FLAGS else value))
    return tuple(kept)


# The interpreter's C headers (Python.h), which the Python bindings generated_units.py compiles include.
PYTHON_INCLUDE = Path(sysconfig.get_paths()["include"])


def _installed_include_dirs() -> list[Path]:
    """The installed torch's headers, and the interpreter's."""
    torch = compiler.torch_dir()
    return [torch / "include", torch / "include/torch/csrc/api/include", PYTHON_INCLUDE]


def _generated_operator_header(name: str, path: Path) -> bool:
    """Is PATH, included as NAME, one of torchgen's per-operator headers (ATen/ops/..., with its @generated stamp)
    rather than a hand-written one kept there (from_blob.h, tensor.h)?"""
    if not f"/{Path(name).parent.as_posix()}".endswith("/ATen/ops"):
        return False
    with path.open("rb") as header:
        return b"@generated" in header.read(_STAMPED_WITHIN)


def _missing_header(target: Target, output: str) -> NotCompiled | None:
    """A header nobody has, included by the tree's own code (an include the bypass added is its error)."""
    found = _MISSING_HEADER.search(output)
    if found is None:
        return None
    header, where = found["header"], found["where"]
    added_by_bypass = where == target.path and target.edited and header.encode() not in (target.before or b"")
    if added_by_bypass:
        return None
    why = f"includes <{header}> ({where}:{found['line']}), which neither the tree nor the installed torch has"
    return NotCompiled(target.path, why)


@dataclass
class _Error:
    """One error in g++'s output: where, the message, and its lines as g++ wrote them (the include context before
    it, the notes after)."""

    file: str  # the tree's path, or a regenerated header by its name (ATen/...), or an installed header's path
    line: int
    column: int
    message: str
    lines: list[str]

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"

    def text(self, view: _View) -> str:
        lines = (_read(view, self.file) or b"").decode(errors="replace").splitlines()
        return lines[self.line - 1] if 0 < self.line <= len(lines) else ""

    def same_as(self, earlier: _Error, view: _View, earlier_view: _View) -> bool:
        """The same error as EARLIER (from the tree before the bypass), wherever the bypass moved its line: on a line
        it did not write, the line it was; on lines it wrote, one of the lines there were, at the same code."""
        if (self.file, _without_hint(self.message)) != (earlier.file, _without_hint(earlier.message)):
            return False
        now, then = _read(view, self.file), _read(earlier_view, self.file)
        if now is None or then is None:  # not the tree's: by message alone
            return True
        for tag, i1, i2, j1, j2 in _line_edits(then, now):
            if j1 < self.line <= j2:
                if tag == "equal":
                    return earlier.line == i1 + self.line - j1
                at = self.text(view)[self.column - 1 :].strip()
                return i1 < earlier.line <= i2 and earlier.text(earlier_view)[earlier.column - 1 :].strip() == at
        return False

    def at_removed(self, removed: frozenset[str], view: _View) -> bool:
        """Is it a caller reaching a removed function (at::cpu::, at::redispatch::, an alias, a using-declaration): a name
        g++ finds undeclared, or a call on its line (VIEW's text) to a removed function whose other overloads remain?
        Not a missing at:: function: that one is the bypass's own."""
        found = _NOT_DECLARED.search(self.message)
        if found is not None:
            return found["name"] in removed and (found["scope"] or found["in"]) != "at"
        return any(call["name"] in removed for call in _REMOVABLE_CALL.finditer(self.text(view)))


@functools.lru_cache(maxsize=16)
def _line_edits(then: bytes, now: bytes) -> tuple[line_diff.Opcode, ...]:
    """The opcodes from THEN's lines to NOW's (line_diff), once per pair of texts: a file that failed before and after the
    bypass asks it for each pair of its errors, hundreds for a file of another age (a matcher each took seconds)."""
    return tuple(line_diff.opcodes(then.splitlines(), now.splitlines()))


def _errors(output: str, view: _View) -> list[_Error]:
    """The errors of g++'s OUTPUT, each with the notes after it and the include context before each."""
    chunks: list[tuple[re.Match[str], list[str]]] = []  # a diagnostic, its context before it and its excerpt after
    pending: list[str] = []
    for line in output.splitlines():
        diagnostic = _DIAGNOSTIC.match(line)
        if diagnostic is not None:
            chunks.append((diagnostic, [*pending, line]))
            pending = []
        elif chunks and not pending and not _CONTEXT.match(line):
            chunks[-1][1].append(line)
        else:
            pending.append(line)
    found: list[_Error] = []
    for diagnostic, lines in chunks:
        if diagnostic["kind"] in ("error", "fatal error"):
            # a regenerated header by its name: its directory differs before and after the bypass
            file = diagnostic["file"].removeprefix(f"{view.headers.root}/")
            found.append(_Error(file, int(diagnostic["line"]), int(diagnostic["column"] or 1), diagnostic["message"], lines))
        elif found:
            found[-1].lines.extend(lines)
    return found


def _read(view: _View, file: str) -> bytes | None:
    """FILE of VIEW when it is the tree's (relative), else None."""
    return None if os.path.isabs(file) or file.startswith("ATen/") else view.read(file)


def _without_hint(message: str) -> str:
    return message.split("; did you mean", 1)[0]


def _failure_message(failures: list[_Outcome], what: str = "the edited sources do not compile") -> str:
    leftovers = [leftover for o in failures for leftover in o.leftovers]
    head = ""
    if leftovers:
        head = "callers still reach a function the bypass removed (rewrite each by hand):\n" + "".join(f"  {x}\n" for x in leftovers)
    return head + f"{what} ({COMPILED_BY}):\n" + "\n".join(o.errors for o in failures)


def _linked_before(row: link_check.Unresolved) -> str:
    return (
        f"compiled; its object references `{row.symbol}`, which neither the other objects nor the installed libtorch define, "
        "as it did before the bypass: not the bypass's, so the link check does not count it"
    )


def _link_failure(unresolved: list[link_check.Unresolved]) -> str:
    lines = []
    for row in unresolved:
        why = (
            "removed by the bypass (the installed libtorch still defines it; a build of the bypassed tree does not)" if row.removed
            else "defined by none of them nor libtorch: a definition whose parameters differ from its declaration?"
        )
        lines.append(f"  `{row.symbol}`, referenced by {', '.join(row.referenced_by) or 'the objects'}: {why}")
    return "the compiled objects do not link (undefined symbols, as a build of the bypassed tree would meet them):\n" + "\n".join(lines)


def _written_lines(before: bytes, after: bytes) -> list[int]:
    """The 1-based lines of AFTER the bypass wrote."""
    return [line + 1 for tag, _, _, j1, j2 in line_diff.changes(before.splitlines(), after.splitlines()) if tag != "delete" for line in range(j1, j2)]


def _conditional_lines(text: bytes, lines: list[int]) -> dict[int, str]:
    """Of LINES, those holding code inside a preprocessor conditional, each with the conditional's first line."""
    if not lines:
        return {}
    src = cpp_syntax.parse(text)
    source_lines = text.decode(errors="replace").splitlines()
    found = {}
    for node in cpp_syntax.walk(src.root):
        if node.type not in _CONDITIONALS:
            continue
        first, last = node.start_point[0] + 1, node.end_point[0] + 1
        for line in lines:
            code = source_lines[line - 1].strip()
            if first < line < last and code and not code.startswith(("//", "/*", "*")):
                found[line] = source_lines[first - 1].strip()  # the innermost: walk visits outer conditionals first
    return found


def _ranges(lines: list[int]) -> str:
    spans: list[list[int]] = []
    for line in lines:
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
