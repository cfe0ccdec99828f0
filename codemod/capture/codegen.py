"""Run the tree's codegen: torchgen for ATen, the autograd codegen for autograd.

Capture runs torchgen on a yaml holding only the op's entries (what torchgen
generates for a function depends on that function alone), which takes about
a second instead of a minute for the full file.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from codemod.model import progress
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, TAGS, TEMPLATES, Tree


def run(tree: Tree, args: list[str], what: str) -> None:
    """Run `python ARGS` with the tree's packages first; raise with the codegen's own words."""
    # torchgen writes some outputs (the AOTI shims) relative to its working directory:
    # run it in a scratch directory so that nothing lands in the tree.
    progress.command([tree.python, *args])
    with tempfile.TemporaryDirectory(prefix="codemod-cwd-") as cwd:
        result = subprocess.run([tree.python, *args], env=tree.python_env(), cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise VerificationFailed(f"{what} failed (exit {result.returncode}):\n{tail}")


# Runs in the tree's Python environment: torchgen's own loader on the whole yaml; prints its refusal as JSON.
_LOAD_NATIVE_YAML = r"""
import json, sys
from torchgen.gen import parse_native_yaml
try:
    parse_native_yaml(sys.argv[1], sys.argv[2])
except Exception as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
"""
_LOCATION = re.compile(r"^\s*in .*:(?P<line>\d+):$", re.MULTILINE)  # the context torchgen adds to its errors


def check_native_yaml(tree: Tree) -> None:
    """What torchgen's loader refuses in the whole native_functions.yaml (a bad schema in any entry, a dangling
    structured_delegate, ...) is refused before planning, with its line and torchgen's reason, not after writing."""
    args = [tree.python, "-c", _LOAD_NATIVE_YAML, str(tree.path(NATIVE_FUNCTIONS)), str(tree.path(TAGS))]
    progress.command(args)
    result = subprocess.run(args, env=tree.python_env(), capture_output=True, text=True)
    if result.returncode != 0:
        raise VerificationFailed(f"torchgen's loader could not run on {NATIVE_FUNCTIONS}:\n{result.stderr.strip()}")
    if result.stdout.strip():
        refusal = json.loads(result.stdout)
        found = _LOCATION.search(refusal["message"])
        where = f"{NATIVE_FUNCTIONS}:{found.group('line')}" if found else NATIVE_FUNCTIONS
        reason = refusal["message"].splitlines()[0] if refusal["message"] else ""
        raise BadInput(f"{where}: torchgen refuses the file ({refusal['error']}: {reason}); fix it and run again")


def aten(tree: Tree, source_dir: Path, out_dir: Path, *extra: str) -> None:
    """`torchgen.gen` on SOURCE_DIR (holding native/ and templates/) into OUT_DIR."""
    run(tree, ["-m", "torchgen.gen", "-s", str(source_dir), "-d", str(out_dir), *extra], "torchgen (ATen codegen)")


def aten_on_entries(tree: Tree, native_yaml_text: str, out_dir: Path) -> None:
    """torchgen on a yaml of just these entries, with the tree's tags and templates."""
    with tempfile.TemporaryDirectory(prefix="codemod-src-") as scratch:
        source = Path(scratch)
        (source / "native").mkdir()
        (source / "native" / "native_functions.yaml").write_text(native_yaml_text)
        shutil.copyfile(tree.path(TAGS), source / "native" / "tags.yaml")
        (source / "templates").symlink_to(tree.path(TEMPLATES), target_is_directory=True)
        aten(tree, source, out_dir)


def autograd(tree: Tree, out_dir: Path) -> None:
    """The tree's own autograd codegen; a slim tree borrows the installed one's code and templates."""
    args = [str(tree.path(NATIVE_FUNCTIONS)), str(tree.path(TAGS)), str(out_dir)]
    if tree.has_own_autograd:
        run(tree, ["-m", "tools.autograd.gen_autograd", *args, str(tree.path("tools/autograd"))], "autograd codegen")
        return
    import torchgen.packaged.autograd as packaged

    with tempfile.TemporaryDirectory(prefix="codemod-autograd-") as scratch:
        autograd_dir = Path(scratch)
        for item in Path(packaged.__path__[0]).iterdir():
            if item.name not in ("derivatives.yaml", "__pycache__"):
                (autograd_dir / item.name).symlink_to(item)
        shutil.copyfile(tree.path(DERIVATIVES), autograd_dir / "derivatives.yaml")
        tree_deprecated = tree.path("tools/autograd/deprecated.yaml")
        if tree_deprecated.exists():
            (autograd_dir / "deprecated.yaml").unlink()
            shutil.copyfile(tree_deprecated, autograd_dir / "deprecated.yaml")
        run(tree, ["-m", "torchgen.packaged.autograd.gen_autograd", *args, str(autograd_dir)], "autograd codegen")
