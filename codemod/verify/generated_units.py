"""The sources torchgen generates for the bypassed op that a CPU build compiles, as units compile_check compiles.

A build regenerates every source from the edited yaml and templates: the registrations (`Register<key>_N.cpp`),
`Operators_N.cpp`, `Functions.cpp` and `core/TensorMethods.cpp` (from the templates the bypass writes the hand-written
API into), the AOTInductor C shims (`c_shim_cpu.cpp`, ...). torchgen's output for a function depends only on its entry
and its group, so the op's code in them is what torchgen generates from the op's entries alone: the run verify makes
on the tree's entries (codegen.aten_on_entries, kept in the build cache with the shims it writes). Of that run's
sources, those holding the op's code are compiled in the places a build writes them, against the headers regenerated
from the whole edited yaml, as the lab's CPU build compiles them (USE_CUDA=0, no per-operator headers); they are never
written to the tree. Sources for the backends such a build leaves out, and the unsharded copies of the shards
(`*Everything.cpp`, which a build does not compile), are not. Neither is the autograd codegen's output: its shards hold
every op's kernels (1-5 MB each), and the bypass's change there is the removal of the op's own.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from codemod.capture.codegen import AOTI_SHIMS
from codemod.model.tree import TEMPLATES
from codemod.plan.plan import Plan
from codemod.verify.compile_check import NotCompiled, Unit

# Where a build writes each directory of the run's outputs, relative to the tree.
_PLACES = {"ATen": "build/aten/src/ATen", AOTI_SHIMS: "torch/csrc/inductor/aoti_torch/generated"}
_COMMENT = re.compile(rb"//[^\n]*|/\*.*?\*/", re.DOTALL)  # torchgen's boilerplate names ops in comments ("e.g. 'add'")
# Dispatch keys (and shim devices) whose generated sources a CPU build (USE_CUDA=0) does not compile.
_OTHER_BACKENDS = re.compile(r"CUDA|HIP|MPS|XPU|HPU|MTIA|XLA|Lazy|Vulkan|Metal", re.IGNORECASE)
AUTOGRAD_NOT_COMPILED = NotCompiled(
    "torch/csrc/autograd/generated/",
    "the autograd codegen's sources (VariableType_N.cpp, ...) hold every op's kernels in shards of 1-5 MB; its run on "
    "the edited yaml is checked, its output is not compiled",
)


@dataclass(frozen=True)
class GeneratedSources:
    units: list[Unit]  # the op's code a CPU build compiles
    not_compiled: list[NotCompiled]


def units(entries_run: Path, headers_run: Path, plans: Sequence[Plan]) -> GeneratedSources:
    """The sources in ENTRIES_RUN (torchgen's kept run on PLANS' entries as the tree holds them) that hold the ops' code,
    as units in the places a build writes them; the sources for other backends, named as not compiled. HEADERS_RUN:
    torchgen's `--generate headers` run the units compile against; the headers torchgen writes only with the sources
    (ATen/ViewMetaClasses.h, ...) come with each unit that includes them, from ENTRIES_RUN."""
    ops = " ".join(plan.op for plan in plans)
    op_code = re.compile("|".join(rf"\b{re.escape(plan.op)}(?:_\w*)?\b" for plan in plans).encode())
    found, other_backends = [], []
    for directory, place in _PLACES.items():
        for path in sorted((entries_run / directory).rglob("*.cpp")):
            text = path.read_bytes()
            if path.stem.endswith("Everything") or not op_code.search(_COMMENT.sub(b"", text)):
                continue
            relative = f"{place}/{path.relative_to(entries_run / directory).as_posix()}"
            if _OTHER_BACKENDS.search(path.stem):
                other_backends.append(relative)
                continue
            template = f"{TEMPLATES}/{path.name}"
            edited = any(change.path == template for plan in plans for change in plan.changes)
            what = f"generated from the edited {template}" if edited else "generated"
            found.append(Unit(relative, text, what, template if edited else None, _companions(text, entries_run, headers_run)))
    why = f"torchgen's code for {ops} on a backend a CPU build (USE_CUDA=0) does not compile"
    return GeneratedSources(found, [*(NotCompiled(path, why) for path in other_backends), AUTOGRAD_NOT_COMPILED])


def _companions(text: bytes, entries_run: Path, headers_run: Path) -> tuple[tuple[str, bytes], ...]:
    """The headers TEXT includes that only ENTRIES_RUN (a run with the sources) wrote, by their place beside the tree's
    ATen headers: what a build includes from its generated directory."""
    only_with_sources = sorted(
        path for path in (entries_run / "ATen").glob("*.h") if not (headers_run / "ATen" / path.name).is_file()
    )
    return tuple(
        (f"aten/src/ATen/{path.name}", path.read_bytes()) for path in only_with_sources if f"<ATen/{path.name}>".encode() in text
    )
