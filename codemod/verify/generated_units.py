"""The sources the codegen generates for the bypassed op that a CPU build compiles, as units compile_check compiles.

A build regenerates every source from the edited yaml and templates: the registrations (`Register<key>_N.cpp`),
`Operators_N.cpp`, `Functions.cpp` and `core/TensorMethods.cpp` (from the templates the bypass writes the hand-written
API into), the AOTInductor C shims (`c_shim_cpu.cpp`, ...); the autograd codegen's kernels (`VariableType_N.cpp`,
`ADInplaceOrViewType_N.cpp`, `TraceType_N.cpp`), its autograd nodes (`Functions.cpp`) and the Python bindings
(`python_torch_functions_N.cpp`, `python_variable_methods.cpp`, ..., which call the hand-written API). What each
codegen generates for a function depends only on its entry, its group and its formulas, so the op's code in them is
what it generates from the op's entries alone: the runs verify makes on the tree's entries (codegen.aten_on_entries,
codegen.autograd_on_entries, kept in the build cache). Of their sources, those holding the op's code are compiled in
the places a build writes them, against the headers regenerated from the whole edited yaml, as the lab's CPU build
compiles them (USE_CUDA=0, no per-operator headers); the autograd sources with the headers of their own run, which
number the op's autograd nodes as its sources do. They are never written to the tree. Sources for the backends such a
build leaves out are not. Where the op's code falls in several shards of one template (`VariableType_0.cpp`,
`VariableType_6.cpp`), the unsharded copy torchgen writes beside them (`VariableTypeEverything.cpp`, which a build does
not compile) is compiled in their stead: the same code in one unit, whose headers are parsed once instead of per shard.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from codemod.capture.codegen import AOTI_SHIMS, AUTOGRAD_OUT
from codemod.model.tree import TEMPLATES
from codemod.plan.plan import Plan
from codemod.verify.compile_check import PYTHON_INCLUDE, NotCompiled, Unit

# Where a build writes each directory of the runs' outputs, relative to the tree.
_PLACES = {"ATen": "build/aten/src/ATen", AOTI_SHIMS: "torch/csrc/inductor/aoti_torch/generated", AUTOGRAD_OUT: AUTOGRAD_OUT}
# What names an op without being its code: torchgen's boilerplate comments ("e.g. 'add'") and the preprocessor lines
# of its templates (every shard includes ATen/ops/OP.h for each op of the run; python_torch_functions.cpp has
# `#undef copysign`).
_NOT_CODE = re.compile(rb"//[^\n]*|/\*.*?\*/|^[ \t]*#[^\n]*", re.DOTALL | re.MULTILINE)
# Dispatch keys (and shim devices) whose generated sources a CPU build (USE_CUDA=0) does not compile.
_OTHER_BACKENDS = re.compile(r"CUDA|HIP|MPS|XPU|HPU|MTIA|XLA|Lazy|Vulkan|Metal", re.IGNORECASE)


@dataclass(frozen=True)
class GeneratedSources:
    units: list[Unit]  # the op's code a CPU build compiles
    not_compiled: list[NotCompiled]


def units(entries_run: Path, autograd_run: Path | None, headers_run: Path, plans: Sequence[Plan]) -> GeneratedSources:
    """The sources in ENTRIES_RUN and AUTOGRAD_RUN (the kept runs of torchgen and of the autograd codegen on PLANS'
    entries as the tree holds them; None: no autograd run) that hold the ops' code, as units in the places a build writes them; the sources
    for other backends, and the Python bindings where Python's headers are missing, named as not compiled.
    HEADERS_RUN: torchgen's `--generate headers` run the units compile against; the headers torchgen writes only with
    the sources (ATen/ViewMetaClasses.h, ...) come with each unit that includes them, from ENTRIES_RUN."""
    ops = " ".join(plan.op for plan in plans)
    op_code = re.compile("|".join(rf"\b{re.escape(plan.op)}(?:_\w*)?\b" for plan in plans).encode())
    autograd_headers = _autograd_headers(autograd_run) if autograd_run is not None else ()
    found, other_backends, no_python = [], [], []
    for directory, place in _PLACES.items():
        run = autograd_run if directory == AUTOGRAD_OUT else entries_run
        if run is None:
            continue
        out = run / directory
        texts = {path: path.read_bytes() for path in sorted(out.rglob("*.cpp")) if not path.stem.endswith("Everything")}
        holding = [path for path, text in texts.items() if op_code.search(_NOT_CODE.sub(b"", text))]
        for path, shards in _one_unit_per_family(holding):
            relative = f"{place}/{path.relative_to(out).as_posix()}"
            text = texts[path] if path in texts else path.read_bytes()  # an unsharded copy is not read above
            standing_for = f": the op's code of {_shards_named(shards)} in one unit" if shards else ""
            named = [f"{place}/{shard.relative_to(out).as_posix()}" for shard in shards] or [relative]
            if _OTHER_BACKENDS.search(path.stem):
                other_backends += named
            elif b"<Python.h>" in text and not _PYTHON_H.is_file():
                no_python += named
            elif directory == AUTOGRAD_OUT:
                companions = (*autograd_headers, *_companions(text, entries_run, headers_run))
                found.append(Unit(relative, text, f"generated by the autograd codegen{standing_for}", None, companions))
            else:
                template = f"{TEMPLATES}/{path.name}"
                edited = any(change.path == template for plan in plans for change in plan.changes)
                what = f"generated from the edited {template}" if edited else "generated"
                companions = _companions(text, entries_run, headers_run)
                found.append(Unit(relative, text, f"{what}{standing_for}", template if edited else None, companions))
    why = f"torchgen's code for {ops} on a backend a CPU build (USE_CUDA=0) does not compile"
    without_python = f"the Python bindings of {ops}: Python's headers are not installed ({_PYTHON_H} is missing: python3-dev)"
    not_compiled = [*(NotCompiled(path, why) for path in other_backends), *(NotCompiled(path, without_python) for path in no_python)]
    return GeneratedSources(found, not_compiled)


_PYTHON_H = PYTHON_INCLUDE / "Python.h"  # on compile_check's include path
_SHARD = re.compile(r"(?P<family>.+)_(?P<shard>\d+)")  # Operators_2, VariableType_6: torchgen's shards of one template's output


def _one_unit_per_family(holding: list[Path]) -> list[tuple[Path, list[Path]]]:
    """HOLDING (the sources that hold the op's code), each with the shards it stands for (none: itself): where two
    or more shards of one template hold it, the family's unsharded copy instead (torchgen's `FamilyEverything.cpp`,
    written beside them: the same template, the union of their code). The op's code then compiles in one unit, its
    headers (nearly all of each compile's time) parsed once; the copy differs from a shard only in the names its
    template derives from the shard (`gatherTorchFunctions_2` for shard 2), which no other unit calls."""
    by_family: dict[Path, list[Path]] = {}
    for path in holding:
        shard = _SHARD.fullmatch(path.stem)
        unsharded = path.with_stem(f"{shard['family']}Everything") if shard else path
        by_family.setdefault(unsharded if unsharded.is_file() else path, []).append(path)
    return [(unit, shards) if len(shards) > 1 else (shards[0], []) for unit, shards in by_family.items()]


def _shards_named(shards: list[Path]) -> str:
    """SHARDS of one template as a shell names them: `VariableType_{0,6,7}.cpp` (no ", ", which separates the files of
    the verified line)."""
    numbers = [_SHARD.fullmatch(shard.stem) for shard in shards]
    return f"{numbers[0]['family']}_{{{','.join(number['shard'] for number in numbers)}}}{shards[0].suffix}"


def _autograd_headers(autograd_run: Path) -> tuple[tuple[str, bytes], ...]:
    """The headers of the autograd codegen's run on the entries, in their place: its sources are compiled with them
    (its Functions.h numbers the op's autograd nodes as its VariableType_N.cpp uses them), and so is every installed
    header that includes one."""
    out = autograd_run / AUTOGRAD_OUT
    return tuple((f"{AUTOGRAD_OUT}/{path.name}", path.read_bytes()) for path in sorted(out.glob("*.h")))


def _companions(text: bytes, entries_run: Path, headers_run: Path) -> tuple[tuple[str, bytes], ...]:
    """The headers TEXT includes that only ENTRIES_RUN (a run with the sources) wrote, by their place beside the tree's
    ATen headers: what a build includes from its generated directory."""
    only_with_sources = sorted(
        path for path in (entries_run / "ATen").glob("*.h") if not (headers_run / "ATen" / path.name).is_file()
    )
    return tuple(
        (f"aten/src/ATen/{path.name}", path.read_bytes()) for path in only_with_sources if f"<ATen/{path.name}>".encode() in text
    )
