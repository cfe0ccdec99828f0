"""`codemod ops`: every op of a tree, whether `bypass` can take it, and why not.

The yaml checks are the ones `bypass` runs (`native_yaml.find_groups`); on top,
the kernel definitions the bypass moves must be in the tree's native sources,
found by the finder `bypass` uses (`plan.structured_kernels`, macros expanded).
Their names and kinds follow torchgen's rule (the meta struct: the functional
overload, `TORCH_META_FUNC2(mul, Tensor)`; the native struct: the CPU kernel,
`TORCH_IMPL_FUNC(mul_out)`); other backends' kernels are not required.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

from codemod.apply import journal
from codemod.model import exact_text, native_yaml
from codemod.model.native_yaml import GroupIndex, NativeYaml
from codemod.model.tree import NATIVE_FUNCTIONS, Tree
from codemod.plan import structured_kernels
from codemod.plan.structured_kernels import IMPL, META


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
    defined = structured_kernels.find_definitions(tree)
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
        try:
            structured_kernels.locate(defined, op, _kernel_structs(doc, op, groups))
        except native_yaml.NotBypassable as error:
            statuses.append(OpStatus(op, overloads, False, error.reason, str(error)))
            continue
        statuses.append(OpStatus(op, overloads, True, ""))
    return statuses


def _kernel_structs(doc: NativeYaml, op: str, groups: list[GroupIndex]) -> list[tuple[str, str]]:
    """Each group's meta struct (its functional entry's name), and its CPU kernel's native struct
    unless the ufunc codegen writes that one."""
    structs = []
    for group in groups:
        functional = next(i for i in group.delegates if doc.entries[i].base == op)
        structs.append((META, "structured_" + doc.entries[functional].name.replace(".", "_")))
        kernel = native_yaml.cpu_kernel(doc.values[group.out])
        if kernel is not None:  # None: a ufunc, whose CPU impl torchgen writes
            structs.append((IMPL, f"structured_{kernel}"))
    return list(dict.fromkeys(structs))


def summary(statuses: list[OpStatus]) -> str:
    """One line per reason with its count, bypassable first."""
    counts = Counter("bypassable" if s.bypassable else s.reason for s in statuses)
    return "\n".join(f"{count:6d}  {reason}" for reason, count in sorted(counts.items(), key=lambda rc: (rc[0] != "bypassable", -rc[1])))
