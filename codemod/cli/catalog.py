"""`codemod ops`: every op of a tree, whether `bypass` can take it, and why not.

The yaml checks are the ones `bypass` runs (`native_yaml.find_groups`); on top,
the kernel definitions the bypass moves must be in the tree's native sources.
Their names follow torchgen's rule (meta: the functional overload,
`TORCH_META_FUNC2(mul, Tensor)`; impl: the CPU kernel, `TORCH_IMPL_FUNC(mul_out)`),
found with a textual scan: fast on a real checkout's thousand sources.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

from codemod.apply import journal

from codemod.model import exact_text, native_yaml
from codemod.model.native_yaml import GroupIndex, NativeYaml
from codemod.model.tree import NATIVE_FUNCTIONS, NATIVE_SOURCES, Tree

_KERNEL_MACRO = re.compile(r"\bTORCH_(?:PRECOMPUTE_)?(?:META|IMPL)_FUNC2?\s*\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)")


@dataclass(frozen=True)
class OpStatus:
    op: str
    overloads: tuple[str, ...]  # the structured groups' entries, or every entry named op/op_
    bypassable: bool
    reason: str  # why not, in a few words ("not structured"); "" when bypassable
    detail: str = ""  # what exactly (the kernel definitions missing from the tree)

    def to_dict(self) -> dict:
        return asdict(self)


def catalog(tree: Tree) -> list[OpStatus]:
    doc = native_yaml.load(NATIVE_FUNCTIONS, exact_text.read(tree, NATIVE_FUNCTIONS))
    defined = kernel_definitions(tree)
    bypassed = {entry.op for entry in journal.bypassed(tree)}
    statuses = []
    for op in sorted({native_yaml.op_name(e.base) for e in doc.entries}):
        named = tuple(doc.entries[i].name for i in (*doc.indices_by_base.get(op, []), *doc.indices_by_base.get(op + "_", [])))
        if op in bypassed:
            statuses.append(OpStatus(op, named, False, "bypassed", f"`codemod revert {op}` undoes it"))
            continue
        try:
            groups = native_yaml.find_groups(doc, op)
        except native_yaml.NotBypassable as error:
            statuses.append(OpStatus(op, named, False, error.reason))
            continue
        overloads = tuple(doc.entries[i].name for g in groups for i in (*g.delegates, g.out))
        missing = sorted(_kernel_names(doc, op, groups) - defined)
        detail = f"no definition of structured_{', structured_'.join(missing)} under {NATIVE_SOURCES}" if missing else ""
        statuses.append(OpStatus(op, overloads, not missing, "kernel source not in the tree" if missing else "", detail))
    return statuses


def kernel_definitions(tree: Tree) -> set[str]:
    """Suffixes of the structured structs the native sources define: "mul_Tensor", "mul_out"."""
    found = set()
    for path in tree.path(NATIVE_SOURCES).rglob("*.cpp"):
        for name, overload in _KERNEL_MACRO.findall(path.read_text(errors="replace")):
            found.add(f"{name}_{overload}" if overload else name)
    return found


def _kernel_names(doc: NativeYaml, op: str, groups: list[GroupIndex]) -> set[str]:
    """The meta function of each group's functional entry, and its CPU impl unless the ufunc codegen writes it."""
    names = set()
    for group in groups:
        functional = next(i for i in group.delegates if doc.entries[i].base == op)
        names.add(doc.entries[functional].name.replace(".", "_"))
        kernel = native_yaml.cpu_kernel(doc.values[group.out])
        if kernel is not None:  # None: a ufunc, whose CPU impl torchgen writes
            names.add(kernel)
    return names


def summary(statuses: list[OpStatus]) -> str:
    """One line per reason with its count, bypassable first."""
    counts = Counter("bypassable" if s.bypassable else s.reason for s in statuses)
    return "\n".join(f"{count:6d}  {reason}" for reason, count in sorted(counts.items(), key=lambda rc: (rc[0] != "bypassable", -rc[1])))
