"""The package reads as the pipeline: every import points down the steps, and no module reaches itself.

Imports inside functions count: a lazy import is still a dependency a reader has to follow."""
from __future__ import annotations

import ast

from tests.conftest import REPO

STEPS = ("model", "capture", "plan", "apply", "verify", "measure", "cli")  # bottom to top
PACKAGE = REPO / "codemod"


def _imports() -> dict[str, set[str]]:
    """codemod module -> the codemod modules it imports (a `from codemod.X import Y` of a module Y counts as Y)."""
    modules = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__") for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("codemod"):
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules
                found |= submodules or {node.module}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name.startswith("codemod")}
        graph[module] = found & modules
    return graph


def _step(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in STEPS else None


def test_every_import_points_down_the_pipeline():
    upward = [
        f"{module} -> {imported}"
        for module, imports in _imports().items()
        for imported in imports
        if _step(module) and _step(imported) and STEPS.index(_step(imported)) > STEPS.index(_step(module))
    ]
    assert not upward, f"imports from a lower step to a higher one ({' < '.join(STEPS)}): {upward}"


def test_no_module_imports_itself_through_others():
    graph = _imports()
    assert len(graph) > 40, "the scan found too few modules to be reading the package"
    cycles, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for imported in sorted(graph[module]):
            if imported in path:
                cycles.append(" -> ".join(path[path.index(imported):] + [imported]))
            elif imported not in done:
                visit(imported, path + [imported])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert not cycles, f"import cycles: {cycles}"


def test_no_module_binds_a_name_twice_at_its_top_level():
    """A second binding of a module's name silently replaces the first for every use above it too: harness.py once held
    two tables named _SCALAR_TYPES, and the one written for C++ values lost to the one for tensors (`norm`'s dtype
    became `at::ScalarType::at::kDouble`, which the real-sources sweep found)."""
    twice = []
    for path in sorted(PACKAGE.rglob("*.py")):
        bound: list[str] = []
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.append(node.name)
            elif isinstance(node, ast.Assign):
                bound += [target.id for target in node.targets if isinstance(target, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                bound.append(node.target.id)
        twice += [f"{path.relative_to(REPO)}: {name}" for name in sorted(set(bound)) if bound.count(name) > 1]
    assert not twice, twice
