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
"""
from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from codemod.model import native_yaml, progress
from codemod.model.errors import BadInput, VerificationFailed
from codemod.model.tree import DERIVATIVES, NATIVE_FUNCTIONS, TAGS, TEMPLATES, Tree

# Rounds of "add the entries the error names" before taking the whole file.
_SUPPORT_ROUNDS = 4
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*\w|[A-Za-z_]")
# tree root -> ops (as `native_yaml.op_name` names them) its torchgen's whole-file checks need.
_support_ops: dict[Path, set[str]] = {}
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
    writing."""
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
    """The tree's own autograd codegen on the tree as it is: what it refuses (an empty derivatives.yaml, ...) is
    refused before planning, not found by the verification after writing."""
    with tempfile.TemporaryDirectory(prefix="codemod-autograd-check-") as out:
        try:
            autograd(tree, Path(out))
        except CodegenFailed as failure:
            reason = failure.exception.splitlines()[0] if failure.exception else "no message"
            raise BadInput(
                f"{DERIVATIVES}: the tree's autograd codegen refuses the tree as it is, before any edit ({reason}); "
                "fix the tree's autograd inputs and run again"
            ) from None


def aten(tree: Tree, source_dir: Path, out_dir: Path, *extra: str, scratch_paths: dict[Path, Path] | None = None) -> None:
    """`torchgen.gen` on SOURCE_DIR (holding native/ and templates/) into OUT_DIR."""
    run(tree, ["-m", "torchgen.gen", "-s", str(source_dir), "-d", str(out_dir), *extra], "torchgen (ATen codegen)", scratch_paths)


def aten_on_entries(tree: Tree, native_yaml_text: str, out_dir: Path) -> None:
    """torchgen on these entries, plus those the tree's torchgen checks across the whole file."""
    own = {entry.name for entry in native_yaml.load("entries", native_yaml_text).entries}
    tree_yaml = functools.cache(lambda: native_yaml.load(NATIVE_FUNCTIONS, tree.path(NATIVE_FUNCTIONS).read_text()))
    for _ in range(_SUPPORT_ROUNDS):
        with _support_lock:
            ops = set(_support_ops.get(tree.root, ()))
        support = [e for e in tree_yaml().entries if e.name not in own and native_yaml.op_name(e.base) in ops] if ops else []
        try:
            aten_on_yaml(tree, _joined(native_yaml_text, tree_yaml(), support), out_dir)
            return
        except CodegenFailed as failure:
            named = _ops_named_in(tree_yaml(), failure.exception, own) - ops
            if not named:
                break
            with _support_lock:
                _support_ops.setdefault(tree.root, set()).update(named)
    with progress.step("torchgen checks the whole native_functions.yaml: running it on every entry"):
        everything_else = [e for e in tree_yaml().entries if e.name not in own]
        aten_on_yaml(tree, _joined(native_yaml_text, tree_yaml(), everything_else), out_dir)


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


def aten_on_yaml(tree: Tree, native_yaml_text: str, out_dir: Path) -> None:
    """torchgen on exactly this yaml, with the tree's tags and templates."""
    with tempfile.TemporaryDirectory(prefix="codemod-src-") as scratch:
        source = Path(scratch)
        (source / "native").mkdir()
        (source / "native" / "native_functions.yaml").write_text(native_yaml_text)
        shutil.copyfile(tree.path(TAGS), source / "native" / "tags.yaml")
        (source / "templates").symlink_to(tree.path(TEMPLATES), target_is_directory=True)
        in_tree = {source / "templates": tree.path(TEMPLATES), source / "native" / "tags.yaml": tree.path(TAGS)}
        aten(tree, source, out_dir, scratch_paths=in_tree)


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
