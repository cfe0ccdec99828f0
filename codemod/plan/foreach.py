"""The derivatives.yaml cascade onto foreach ops.

Foreach ops without an entry of their own borrow the formula of a reference op
(`_foreach_mul.List` and `_foreach_mul_.List` use `mul.Tensor`'s). Removing the
reference op's entry silently takes their autograd away, and the autograd
codegen then refuses to emit the in-place ones unless their
`(base name, overload name)` is listed in `_foreach_ops_without_differentiability_info`
in `tools/autograd/gen_variable_type.py`.

Which foreach ops are affected is found by running the tree's own loader and
matcher on the old and the new derivatives.yaml, never from a fixed list; only
on the entries named like the changed formulas, which is all the matcher looks at
(about a second instead of nine on the real tree).
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codemod.capture import codegen
from codemod.model import cache, progress
from codemod.model.edits import Edit, line_starts
from codemod.model.errors import BadInput
from codemod.model.tree import DERIVATIVES, GEN_VARIABLE_TYPE, NATIVE_FUNCTIONS, TAGS, Tree

if TYPE_CHECKING:  # libcst takes half a second to import: only a plan whose exemption edit is not kept loads it
    import libcst as cst
    from libcst.metadata import MetadataWrapper

EXEMPT_SET = "_foreach_ops_without_differentiability_info"

# Runs inside the tree's Python environment. argv: autograd package, native yaml,
# tags yaml, original derivatives, edited derivatives, scratch dir, "reduced" or
# "whole". Prints JSON.
#
# torchgen pairs a foreach op with its reference formula by name only
# (`is_reference_for_foreach`: `_foreach_mul` -> `mul`), so "reduced" runs the loader
# and matcher on the entries that share a reference name with a changed derivatives
# entry: the same answer as on the whole files, in a fraction of the time.
_ANALYSIS = r"""
import importlib, json, os, re, sys
import yaml
pkg, native, tags, before, after, scratch, scope = sys.argv[1:8]
from torchgen.api import autograd as api
from torchgen.gen import parse_native_yaml
from torchgen.model import OperatorName

def reference_name(name):  # what is_reference_for_foreach compares: _foreach_mul_.List -> mul
    return OperatorName.parse(name).name.base.split("_foreach_")[-1]

def items(path, key):
    # The file's top-level `- KEY: name(...)` items, split lexically (comments and blank
    # lines go with the item above) and paired with their reference name.
    with open(path) as f:
        chunks = re.split(r"^(?=- )", f.read(), flags=re.M)
    head = re.compile("- " + key + r":\s*([\w.]+)")
    return [(reference_name(m.group(1)) if (m := head.match(c)) else None, c) for c in chunks]

def write_native(names):
    # The entries with these reference names, parsed (so any layout torchgen accepts is read).
    with open(native) as f:
        entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    path = os.path.join(scratch, "native_functions.yaml")
    with open(path, "w") as f:
        kept = [e for e in entries if reference_name(e["func"].split("(")[0].strip()) in names]
        yaml.dump(kept, f, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    return path

def write(name, items, names):
    path = os.path.join(scratch, name)
    with open(path, "w") as f:
        f.write("".join(text for ref, text in items if ref in names) or "[]")
    return path

if scope == "reduced":
    formulas_before, formulas_after = items(before, "name"), items(after, "name")
    # A comment that moves to the item above counts that item as changed: more entries, same answer.
    names = {ref for ref, _ in set(formulas_before) ^ set(formulas_after)} - {None}
    if not names:
        print("[]")
        sys.exit()
    native = write_native(names)
    before = write("before.yaml", formulas_before, names)
    after = write("after.yaml", formulas_after, names)

load = importlib.import_module(pkg + ".load_derivatives").load_derivatives
try:
    exempt = set(getattr(importlib.import_module(pkg + ".gen_variable_type"), "%s", ()))
except Exception:
    exempt = set()
fns = parse_native_yaml(native, tags).native_functions

def with_info(path):
    infos, _ = load(path, native, tags)
    # torchgen takes references from functional entries, and in-place ones for the
    # few foreach ops it allows; is_reference_for_foreach (below) tells which.
    references = [s for s in infos if s.kind().name != "out"]
    matched = api.match_differentiability_info(fns, infos)
    return {str(m.func.func.name): m for m in matched
            if api.is_foreach_func(m.func) and m.info}, references

had, refs_before = with_info(before)
has, refs_after = with_info(after)
kept = {str(s.name) for s in refs_after}
out = []
for name in sorted(set(had) - set(has)):
    f = had[name].func
    key = (f.func.name.name.base, f.func.name.overload_name)
    if key in exempt:
        continue
    refs = [str(s.name) for s in refs_before
            if str(s.name) not in kept and api.is_reference_for_foreach(f, s)]
    out.append({"overload": name, "references": refs,
                "inplace": f.func.kind().name == "inplace"})
print(json.dumps(out))
""" % EXEMPT_SET


@dataclass(frozen=True)
class ForeachLoss:
    overload: str  # e.g. "_foreach_mul_.List"
    references: tuple[str, ...]  # removed entries it borrowed from, e.g. ("mul.Tensor",)
    inplace: bool  # the codegen asserts in-place foreach ops have info: needs the exemption

    @property
    def why(self) -> str:
        source = ", ".join(self.references) or "a removed entry"
        effect = ("the autograd codegen requires an exemption in gen_variable_type.py"
                  if self.inplace else "it now has no autograd formula")
        return f"{self.overload} reused the derivatives.yaml formula of {source}; {effect}"


def _autograd_package(tree: Tree) -> str:
    return "tools.autograd" if tree.has_own_autograd else "torchgen.packaged.autograd"


def foreach_autograd_losses(tree: Tree, edited_derivatives: str, whole_files: bool = False) -> list[ForeachLoss]:
    """Foreach ops with differentiability info now that lose it with the edited yaml.

    WHOLE_FILES runs the loader on the full native_functions.yaml and derivatives.yaml
    (seconds more): the reference the default, reduced input is checked against.
    """
    if b"_foreach_" not in tree.path(NATIVE_FUNCTIONS).read_bytes():
        return []  # a tree with no foreach op (ours): none can lose a formula, and the loader's start-up is saved
    with tempfile.TemporaryDirectory(prefix="codemod-foreach-") as scratch:
        edited = Path(scratch) / "derivatives.yaml"
        edited.write_text(edited_derivatives)
        argv = [tree.python, "-c", _ANALYSIS, _autograd_package(tree),
                str(tree.path(NATIVE_FUNCTIONS)), str(tree.path(TAGS)),
                str(tree.path(DERIVATIVES)), str(edited), scratch,
                "whole" if whole_files else "reduced"]
        progress.command(argv)
        run = subprocess.run(argv, env=tree.python_env(), cwd=scratch,
                             capture_output=True, text=True)
    if run.returncode != 0:
        tail = "\n".join(run.stderr.strip().splitlines()[-5:])
        raise BadInput(
            f"{tree.root}: the tree's autograd loader ({_autograd_package(tree)}) failed on "
            f"the original or edited {DERIVATIVES}:\n{tail}"
        )
    return [ForeachLoss(d["overload"], tuple(d["references"]), d["inplace"])
            for d in json.loads(run.stdout)]


def foreach_ops_losing_autograd(tree: Tree, edited_derivatives: str) -> list[str]:
    return [loss.overload for loss in foreach_autograd_losses(tree, edited_derivatives)]


def exemption_key(overload: str) -> tuple[str, str]:
    """`_foreach_mul_.List` -> ("_foreach_mul", "List"): how gen_variable_type checks."""
    name, _, overload_name = overload.partition(".")
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]  # the in-place marker is not part of the base name
    return name, overload_name


def _find_exempt_set(module: cst.Module) -> tuple[MetadataWrapper, cst.Set]:
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (isinstance(small, (cst.Assign, cst.AnnAssign))
                    and any(isinstance(t, cst.Name) and t.value == EXEMPT_SET
                            for t in ([t.target for t in small.targets]
                                      if isinstance(small, cst.Assign) else [small.target]))):
                if not isinstance(small.value, cst.Set):
                    raise BadInput(f"{GEN_VARIABLE_TYPE}: {EXEMPT_SET} is not a set literal "
                                   "({...}); cannot add the foreach exemptions automatically")
                return wrapper, small.value
    raise BadInput(f"{GEN_VARIABLE_TYPE}: no module-level `{EXEMPT_SET} = {{...}}`; this "
                   "autograd codegen is not the torch 2.13.0 layout the tool knows")


def _existing_keys(node: cst.Set) -> set[tuple[str, ...]]:
    import libcst as cst

    keys = set()
    for element in node.elements:
        value = element.value
        if isinstance(value, cst.Tuple) and all(
                isinstance(e.value, cst.SimpleString) for e in value.elements):
            keys.add(tuple(e.value.evaluated_value for e in value.elements))
    return keys


def exempt_foreach_ops(tree: Tree, overloads: list[str], op: str | None = None) -> list[Edit]:
    """Insertions into gen_variable_type.py's exemption set; none if already present."""
    keys = list(dict.fromkeys(exemption_key(o) for o in overloads))
    if not keys:
        return []
    path = tree.path(GEN_VARIABLE_TYPE)
    if not path.is_file():
        raise BadInput(
            f"{tree.root} has no {GEN_VARIABLE_TYPE} (it uses the installed autograd codegen), "
            f"so it cannot exempt {', '.join(sorted(set(overloads)))} which lose their "
            "derivatives.yaml formula; run on a full checkout that has tools/autograd/"
        )
    import libcst as cst
    from libcst.metadata import PositionProvider

    data = path.read_bytes()
    text = data.decode()
    wrapper, node = _find_exempt_set(cst.parse_module(text))
    missing = [k for k in keys if k not in _existing_keys(node)]
    if not missing:
        return []
    positions = wrapper.resolve(PositionProvider)

    lines_of = text.split("\n")  # libcst numbers lines by "\n"; str.splitlines splits more
    line_bytes = line_starts(data)

    def offset(line: int, column: int) -> int:  # libcst counts characters, edits bytes
        return line_bytes[line - 1] + len(lines_of[line - 1][:column].encode())

    tag = f"codemod bypass {op}" if op else "codemod bypass"
    why = (f"exempt {', '.join('.'.join(k) if k[1] else k[0] for k in missing)} in "
           f"{EXEMPT_SET}: their reused derivatives.yaml formula was removed")
    rendered = [f"({json.dumps(name)}, {json.dumps(overload)})" for name, overload in missing]
    brace = positions[node.rbrace].end  # its start includes the whitespace before `}`
    brace = type(brace)(brace.line, brace.column - 1)
    brace_line = lines_of[brace.line - 1]
    edits = []
    if node.elements and not brace_line[: brace.column].strip():
        # One element per line: add lines before the closing brace, same indentation.
        last = node.elements[-1]
        if isinstance(last.comma, cst.MaybeSentinel):
            end = positions[last.value].end
            edits.append(Edit(GEN_VARIABLE_TYPE, offset(end.line, end.column),
                              offset(end.line, end.column), ",", why))
        indent = " " * positions[last].start.column
        lines = [f"{indent}# Added by `{tag}`: the formula they reused was removed.\n"]
        lines += [f"{indent}{element},\n" for element in rendered]
        at = line_bytes[brace.line - 1]
        edits.append(Edit(GEN_VARIABLE_TYPE, at, at, "".join(lines), why))
    else:
        # Single-line set: append inline, no room for a comment.
        at = offset(brace.line, brace.column)
        lead = "" if not node.elements else (
            " " if not isinstance(node.elements[-1].comma, cst.MaybeSentinel) else ", ")
        edits.append(Edit(GEN_VARIABLE_TYPE, at, at, lead + ", ".join(rendered), why))
    return edits


@dataclass(frozen=True)
class _Cascade:
    ops: list[str]
    edits: list[Edit]


def cascade(tree: Tree, op: str, edited_derivatives: str) -> tuple[list[str], list[Edit]]:
    """The foreach ops that lose a formula with EDITED_DERIVATIVES, and the edit that exempts them: kept in the build
    cache by every input (the yaml, the tags, both derivatives files, the autograd codegen and torchgen it runs, our
    code), so a second plan of the same op runs neither the tree's loader nor libcst."""
    what = f"foreach cascade of {op}: the tree's autograd loader on the foreach entries"
    _, code = codegen.autograd_code(tree)
    inputs = [op, tree.path(NATIVE_FUNCTIONS).read_bytes(), tree.path(TAGS).read_bytes(), tree.path(DERIVATIVES).read_bytes(), edited_derivatives,
              *codegen.files(code), *codegen.torchgen_code(tree), cache.own_code()]
    kept = cache.cache_dir() / "foreach" / f"{cache.digest(*inputs)[:24]}.json"
    found = cache.kept_json(kept, _Cascade)  # None: none, truncated or corrupt, found again
    if found is not None:
        progress.kept(what)
        return found["ops"], [Edit(**edit) for edit in found["edits"]]
    with progress.step(what):
        ops = foreach_ops_losing_autograd(tree, edited_derivatives)
    edits = exempt_foreach_ops(tree, ops, op) if ops else []
    cache.publish_text(kept, json.dumps({"ops": ops, "edits": [asdict(edit) for edit in edits]}))
    return ops, edits
