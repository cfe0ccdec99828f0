"""Verify a bypassed tree with its own codegen: both codegens run clean, and
torchgen no longer generates the op's dispatcher entry under its public name."""
from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codemod import codegen
from codemod.capture import generated_functions
from codemod.errors import VerificationFailed
from codemod.plan import Plan
from codemod.tree import Tree


def verify(tree: Tree, plan: Plan) -> list[str]:
    """Run ATen and autograd codegen side by side (two cores); return what was checked."""
    with tempfile.TemporaryDirectory(prefix="codemod-verify-") as scratch:
        aten_out, autograd_out = Path(scratch, "aten"), Path(scratch, "autograd")
        with ThreadPoolExecutor(max_workers=2) as pool:
            aten_run = pool.submit(codegen.aten, tree, tree.aten_source_dir, aten_out)
            autograd_run = pool.submit(codegen.autograd, tree, autograd_out)
            aten_run.result()
            autograd_run.result()
        ops_names = {name.replace(".", "_"): name for name in plan.overloads}
        generated = generated_functions(aten_out / "Functions.h", ops_names)
    public = sorted(f.name for f in generated if not f.name.startswith("__dispatch_"))
    if public:
        raise VerificationFailed(f"torchgen still generates {', '.join('at::' + n for n in public)} through the dispatcher")
    renamed = sorted(f.name for f in generated)
    return [
        "torchgen (ATen codegen) ran clean",
        "autograd codegen ran clean",
        f"torchgen now generates {', '.join('at::' + n for n in renamed)} (the dispatcher entries, renamed)",
    ]
