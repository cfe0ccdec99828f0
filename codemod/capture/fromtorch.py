"""Assemble a PyTorch-layout tree from a torch wheel's torchgen.

The wheel ships the codegen inputs (schema yaml, templates, autograd codegen,
torchgen) but no native .cpp sources; those come from `native_sources`, a slim
tree such as our `target_tree/`, as it was before any bypass. The result looks
like a checkout to `locate`: it has its own `torchgen/` and `tools/autograd/`.
The torchgen is the installed one, or another release's, taken from its wheel
file or an extracted `torchgen/`.
"""
from __future__ import annotations

import importlib.util
import shutil
import tempfile
import zipfile
from pathlib import Path

from codemod.model.errors import BadInput
from codemod.model.tree import LOCK_FILE, NATIVE_FUNCTIONS, STATE_DIR, TAGS, TEMPLATES

AUTOGRAD_DIR = "tools/autograd"
REPO_TARGET_TREE = Path(__file__).resolve().parents[2] / "target_tree"  # our slim tree, in a source checkout of codemod
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")


def installed_torchgen() -> Path:
    """Directory of the installed torchgen package, checked for the packaged inputs."""
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        raise BadInput("torchgen is not importable; install torch==2.13.0 (pip install torch==2.13.0)")
    root = Path(next(iter(spec.submodule_search_locations)))
    return _checked(root, "the installed torch", "reinstall torch==2.13.0")


def _checked(root: Path, where: str, fix: str) -> Path:
    """ROOT, a torchgen package directory, if it holds the packaged codegen inputs of a 2.x wheel."""
    packaged = root / "packaged"
    for needed in ("ATen/native/native_functions.yaml", "ATen/native/tags.yaml",
                   "ATen/templates", "autograd/gen_autograd.py", "autograd/derivatives.yaml"):
        if not (packaged / needed).exists():
            raise BadInput(
                f"{packaged / needed}: missing; {where} does not have the torch 2.x wheel layout "
                f"(torchgen/packaged/...); {fix}"
            )
    return root


def extract_torchgen(wheel: Path, scratch: Path) -> Path:
    """Unpack only the wheel's torchgen/ members (the rest of a wheel is hundreds of MB)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [name for name in archive.namelist() if name.startswith("torchgen/")]
            if not members:
                raise BadInput(f"{wheel}: holds no torchgen/; pass a torch wheel (pip download --no-deps torch==X)")
            archive.extractall(scratch, members)
    except zipfile.BadZipFile as error:
        raise BadInput(f"{wheel}: not a wheel ({error}); pass a torch .whl file or a torchgen directory") from error
    return _checked(scratch / "torchgen", str(wheel), "pass a torch wheel of release 2.13 or later")


def is_wheel_provided(relative: str) -> bool:
    """Paths the wheel supplies; the native sources tree must not override them."""
    return (
        relative in (NATIVE_FUNCTIONS, TAGS)
        or relative.startswith(TEMPLATES + "/")
        or relative.startswith(AUTOGRAD_DIR + "/")
        or relative.startswith("torchgen/")
    )


def write_tree_from_torch(dest: Path, native_sources: Path, torchgen_from: Path | None = None) -> None:
    """DEST as a checkout: TORCHGEN_FROM's torchgen (a torch .whl, or a torchgen package directory
    holding packaged/; default the installed one) and its packaged inputs, plus NATIVE_SOURCES."""
    dest = Path(dest)
    native_sources = Path(native_sources)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BadInput(f"{dest}: exists and is not an empty directory; pass a new or empty path")
    if not native_sources.is_dir():
        raise BadInput(f"{native_sources}: no such directory (the native .cpp sources to add)")
    if torchgen_from is None:
        _write(dest, native_sources, installed_torchgen())
    elif Path(torchgen_from).is_dir():
        fix = "pass the torchgen/ directory of an unpacked torch wheel (it holds packaged/)"
        _write(dest, native_sources, _checked(Path(torchgen_from), str(torchgen_from), fix))
    elif Path(torchgen_from).is_file():
        with tempfile.TemporaryDirectory(prefix="codemod-wheel-") as scratch:
            _write(dest, native_sources, extract_torchgen(Path(torchgen_from), Path(scratch)))
    else:
        raise BadInput(f"{torchgen_from}: no such file or directory; pass a torch .whl or a torchgen directory")


def _write(dest: Path, native_sources: Path, torchgen: Path) -> None:
    """No journal, lock or transaction log of codemod's is ever copied (the command hands over sources with every
    bypass reverted: cli/commands/tree.py)."""
    write_codegen_inputs(dest, torchgen)
    for source in sorted(native_sources.rglob("*")):
        relative = source.relative_to(native_sources).as_posix()
        if (not source.is_file() or "__pycache__" in source.parts or is_wheel_provided(relative) or relative == LOCK_FILE
                or relative.split("/")[0] == STATE_DIR):
            continue
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def write_codegen_inputs(dest: Path, torchgen: Path) -> None:
    """What the wheel provides, laid out as a checkout in DEST: TORCHGEN's packaged inputs and TORCHGEN itself."""
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
