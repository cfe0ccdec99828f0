"""`codemod build OP`: the harness, and from the same compile the check's Python extension, built against the
installed libtorch, its errors placed in the tree.

A compiler error on a line of the scaffolding is reported at the file:line where `codemod bypass OP` splices
that line, so the user reads it where the bypass would write it."""
from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable

from codemod.capture import codegen
from codemod.capture.capture import Capture, group_yaml
from codemod.model import cache
from codemod.model.edits import apply_edits
from codemod.model.errors import VerificationFailed
from codemod.model.tree import Tree
from codemod.plan import cpp as plan_cpp
from codemod.plan import cpp_format
from codemod.plan.plan import op_entries
from codemod.verify import bypass_ext, compiler, extension
from codemod.verify.captured import bypassed_or_current
from codemod.verify.compiler import LIBTORCH_PCH, Built, CompileFailed, compile_source
from codemod.verify.harness import HARNESS_TEMPLATE, Harness, render

_COMPILER_ERROR = re.compile(r"^[^:\s]+\.cpp:(?P<line>\d+):\d+: (?:fatal )?error: (?P<message>.*)$")


def compile_harness(harness: Harness, name: str, bound: Capture | None = None) -> Built:
    """HARNESS compiled, with whether it has C++ checks and the call it times. With BOUND (the capture whose
    scaffolding the harness holds), the same object is also linked into the Python extension binding it
    (bypass_ext): one compile for both."""
    if bound is None:
        built = compile_source(harness.source, name=name)
    else:
        def source(module: str) -> str:
            return f"{harness.source}\n{bypass_ext.bindings([bound], module)}"

        module = extension.module_name(bypass_ext.STEM.format(bound.op), source)
        built = compile_source(source(module), name=name, module=module)
    return dataclasses.replace(built, cpp_checks=bool(harness.cpp_checked), timed_call=harness.timed.shown)


def build(tree: Tree, op: str, captured: Capture | None = None, compiling: Callable[[], None] = lambda: None) -> Built:
    """The harness and, where the check can bind every overload from Python (bypass_ext.unbindable), in the same
    compile, the extension (Built.module). Raises VerificationFailed naming, for each compiler error in the
    scaffolding, the file:line of the tree where `codemod bypass OP` splices that line. CAPTURED: the plan's
    capture, when there is one. Recorded by what it is rendered from (recorded_build); COMPILING is called first when
    nothing was (what a caller starts beside the compiler)."""
    entries, capture = (op_entries(tree, op), captured) if captured else bypassed_or_current(tree, op)

    def make() -> Built:
        compiling()
        harness = render(capture, entries.groups)
        try:
            return compile_harness(harness, op, None if bypass_ext.unbindable(capture) else capture)
        except CompileFailed as failed:
            spliced = spliced_errors(tree, capture, harness.source, failed.errors)
            if not spliced:
                raise
            raise VerificationFailed(f"{failed}\nin the tree after `codemod bypass {op}`:\n" + "\n".join(spliced)) from None

    return recorded_build(f"harness-{op}", [capture.to_json(), group_yaml(entries.doc, list(entries.groups))], make)


def recorded_build(name: str, inputs: list[bytes | str], make: Callable[[], Built]) -> Built:
    """What MAKE builds, recorded under NAME and the key of INPUTS (what its harness is rendered from: captures, the
    groups' entries) and of everything else the harness's bytes depend on: our code, the harness template and the
    precompiled header; clang-format, which lays out the scaffolding; the toolchain, torch included (its OpInfo
    samples pick the timed call). A harness built before from the same inputs is found by that key, without
    rendering it again (which imports torch: seconds) or hashing its source."""
    started = time.perf_counter()
    key = cache.digest(*inputs, cache.own_code(), *codegen.files(HARNESS_TEMPLATE, LIBTORCH_PCH), cpp_format.version(), *compiler.toolchain())
    record = f"{name}-{key[:20]}.json"
    built = compiler.recorded(record)
    if built is None:
        built = make()
        compiler.record(record, built)
    return dataclasses.replace(built, seconds=time.perf_counter() - started)


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
