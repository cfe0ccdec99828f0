"""Where the time goes on the full real tree (built from the installed torch wheel).

Prints each pipeline step's time for one op, then the three commands end to end:
`bypass --dry-run`, `bypass` (with the tree's own codegen as verification), `revert`.
Figures for a person; nothing here asserts a time.

    python benchmarks/real_tree_steps.py [OP]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codemod.capture import capture, codegen
from codemod.capture.fromtorch import write_tree_from_torch
from codemod.model import native_yaml
from codemod.model.edits import apply_edits
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, locate
from codemod.plan import callers as plan_callers
from codemod.plan import cpp as plan_cpp
from codemod.plan import foreach
from codemod.plan import yaml_edits as plan_yaml
from codemod.plan.plan import op_entries

REPO = Path(__file__).resolve().parent.parent


def timed(label: str, action):
    started = time.perf_counter()
    result = action()
    print(f"{time.perf_counter() - started:8.2f} s  {label}", flush=True)
    return result


def main(op: str) -> None:
    with tempfile.TemporaryDirectory(prefix="codemod-bench-") as scratch:
        root = Path(scratch) / "tree"
        timed("build the real tree from the wheel", lambda: write_tree_from_torch(root, REPO / "target_tree"))
        tree = locate(root)
        print(f"steps of `codemod bypass {op}`:")
        timed("parse and validate native_functions.yaml", lambda: native_yaml.load(NATIVE_FUNCTIONS, tree.path(NATIVE_FUNCTIONS).read_text()))
        entries = timed("find the op's groups and plan the yaml edit (checked by re-parsing)", lambda: op_entries(tree, op))
        captured = timed("capture: torchgen on the op's entries, before and after", lambda: capture.capture(tree, op, *entries.capture_inputs(), entries.overloads))
        text = tree.path(DERIVATIVES).read_text()
        edits, _ = timed("plan the derivatives.yaml edit", lambda: plan_yaml.derivatives_edits(text, entries.overloads))
        edited = apply_edits(text.encode(), edits).decode()
        timed("foreach cascade: the tree's autograd loader on the entries named like the op", lambda: foreach.foreach_ops_losing_autograd(tree, edited))
        timed("plan the template and native source edits", lambda: (plan_cpp.template_edits(tree, captured), plan_cpp.native_source_edits(tree, captured)))
        timed("scan the tree for callers and plan their rewrites", lambda: plan_callers.caller_edits(tree, captured))
        print("steps of its verification (on the untouched tree; the two torchgen runs go beside the autograd codegen):")
        out = Path(scratch) / "out"
        timed("torchgen on the whole yaml, generating nothing (parse, validate, group)", lambda: codegen.aten(tree, tree.aten_source_dir, out / "parsed", "--generate"))
        timed("torchgen on the op's entries, every file", lambda: codegen.aten_on_entries(tree, entries.capture_inputs()[1], out / "entries"))
        timed("autograd codegen, whole", lambda: codegen.autograd(tree, out / "autograd"))
        print("commands end to end (bypass: its own steps from --json below it):")
        for args in (["bypass", op, "--dry-run"], ["bypass", op], ["revert", op]):
            run = timed("codemod " + " ".join(args), lambda: subprocess.run([sys.executable, "-m", "codemod", *args, "--tree", str(root), "--json"], capture_output=True, text=True))
            if run.returncode != 0:
                sys.exit(f"codemod {' '.join(args)} failed:\n{run.stderr}")
            for step, seconds in json.loads(run.stdout).get("seconds", {}).items():
                print(f"{seconds:14.2f} s  {step}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "mul")
