"""Assemble a PyTorch-layout tree from the installed torch wheel.

The wheel ships the codegen inputs (schema yaml, templates, autograd codegen,
torchgen) but no native .cpp sources; those come from `native_sources`, a slim
tree such as our `target_tree/`. The result looks like a checkout to `locate`:
it has its own `torchgen/` and `tools/autograd/`.
"""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from codemod.model.errors import BadInput
from codemod.model.tree import NATIVE_FUNCTIONS, TAGS, TEMPLATES

AUTOGRAD_DIR = "tools/autograd"
REPO_TARGET_TREE = Path(__file__).resolve().parents[2] / "target_tree"  # our slim tree, in a source checkout of codemod
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")


def installed_torchgen() -> Path:
    """Directory of the installed torchgen package, checked for the packaged inputs."""
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        raise BadInput("torchgen is not importable; install torch==2.13.0 (pip install torch==2.13.0)")
    root = Path(next(iter(spec.submodule_search_locations)))
    packaged = root / "packaged"
    for needed in ("ATen/native/native_functions.yaml", "ATen/native/tags.yaml",
                   "ATen/templates", "autograd/gen_autograd.py", "autograd/derivatives.yaml"):
        if not (packaged / needed).exists():
            raise BadInput(
                f"{packaged / needed}: missing; the installed torch does not have the "
                "torch 2.13.0 wheel layout (torchgen/packaged/...); reinstall torch==2.13.0"
            )
    return root


def _is_wheel_provided(relative: str) -> bool:
    """Paths the wheel supplies; the native sources tree must not override them."""
    return (
        relative in (NATIVE_FUNCTIONS, TAGS)
        or relative.startswith(TEMPLATES + "/")
        or relative.startswith(AUTOGRAD_DIR + "/")
        or relative.startswith("torchgen/")
    )


def write_tree_from_torch(dest: Path, native_sources: Path) -> None:
    dest = Path(dest)
    native_sources = Path(native_sources)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BadInput(f"{dest}: exists and is not an empty directory; pass a new or empty path")
    if not native_sources.is_dir():
        raise BadInput(f"{native_sources}: no such directory (the native .cpp sources to add)")
    torchgen = installed_torchgen()
    packaged = torchgen / "packaged"

    dest.mkdir(parents=True, exist_ok=True)
    (dest / NATIVE_FUNCTIONS).parent.mkdir(parents=True)
    shutil.copy2(packaged / "ATen/native/native_functions.yaml", dest / NATIVE_FUNCTIONS)
    shutil.copy2(packaged / "ATen/native/tags.yaml", dest / TAGS)
    shutil.copytree(packaged / "ATen/templates", dest / TEMPLATES, ignore=_SKIP)
    shutil.copytree(packaged / "autograd", dest / AUTOGRAD_DIR, ignore=_SKIP)
    # `python -m tools.autograd.gen_autograd` needs both levels to be packages.
    for package in ("tools", AUTOGRAD_DIR):
        (dest / package / "__init__.py").touch()
    # A checkout's torchgen has no packaged/ copy of the inputs; they live above.
    shutil.copytree(torchgen, dest / "torchgen",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "packaged"))

    for source in sorted(native_sources.rglob("*")):
        relative = source.relative_to(native_sources).as_posix()
        if not source.is_file() or "__pycache__" in source.parts or _is_wheel_provided(relative):
            continue
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
