"""C++ edits: write by hand what torchgen generated for the op before the bypass.

- Functions.h / Functions.cpp: `at::mul`, `at::mul_out`, `at::mul_outf`;
- TensorBody.h / TensorMethods.cpp: `Tensor::mul`, `Tensor::mul_`;
- the native source holding `TORCH_IMPL_FUNC(mul_out)`: the meta and native
  structs, the CPU structured classes and `at::native::mul`, `mul_`, `mul_out`.
Each function API body calls the kernel where the generated one called the
dispatcher. Each inserted block is fenced by markers naming the op.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

from codemod.capture.capture import ApiFunction, Capture, Snippet, as_native_api
from codemod.model import cpp_syntax
from codemod.model.cpp_syntax import Source
from codemod.model.edits import Edit
from codemod.model.errors import BadInput
from codemod.model.tree import NATIVE_SOURCES, TEMPLATES, Tree
from codemod.plan import cpp_format, structured_kernels
from codemod.plan.structured_kernels import IMPL, META, KernelDefinition

FUNCTIONS_H = f"{TEMPLATES}/Functions.h"
FUNCTIONS_CPP = f"{TEMPLATES}/Functions.cpp"
TENSOR_BODY_H = f"{TEMPLATES}/TensorBody.h"
TENSOR_METHODS_CPP = f"{TEMPLATES}/TensorMethods.cpp"
REDISPATCH_FUNCTIONS_H = f"{TEMPLATES}/RedispatchFunctions.h"
NATIVE_FUNCTIONS_INCLUDE = "#include <ATen/NativeFunctions.h>"
# The dispatcher runs a CPU kernel below the autograd and ADInplaceOrView keys (VariableType's kernel enters this guard
# before it redispatches); the bypass enters it too, so the at:: calls the kernel makes inside (a meta function's views
# and reshapes) skip those layers as they did, rather than run through autograd with the inputs' keys.
BELOW_AUTOGRAD = "at::AutoDispatchBelowADInplaceOrView below_autograd;"
BELOW_AUTOGRAD_INCLUDE = "#include <ATen/core/LegacyTypeDispatch.h>"

FUNCTION_PLACEHOLDERS = ("${Functions_declarations}", "${function_definitions}")
REDISPATCH_PLACEHOLDERS = ("${function_redispatch_definitions}",)
_METHOD_PLACEHOLDERS = ("${tensor_method_declarations}",)
_META_BASE = re.compile(r"public at::meta::(structured_\w+)")


def marker_begin(op: str, what: str) -> str:
    return f"// @codemod-bypass {op} begin: {what}"


def marker_end(op: str) -> str:
    return f"// @codemod-bypass {op} end"


def block(op: str, what: str, body: str, indent: str = "") -> str:
    """BODY fenced by OP's markers, laid out as PyTorch lays out its code (cpp_format), indented by INDENT."""
    return f"{indent}{marker_begin(op, what)}\n{cpp_format.format_block(body, indent)}\n{indent}{marker_end(op)}\n"


def namespace_name(op: str) -> str:
    """Where the carried-over CPU scaffolding lives, so two bypassed ops never collide."""
    return f"codemod_bypass_{op}"


@dataclass(frozen=True)
class SourceFile:
    rel: str
    src: Source

    @classmethod
    def read(cls, tree: Tree, rel: str) -> SourceFile:
        return cls(rel, cpp_syntax.parse(tree.path(rel).read_bytes()))

    def line_start(self, offset: int) -> int:
        return self.src.data.rfind(b"\n", 0, offset) + 1

    def line_end(self, offset: int) -> int:
        end = self.src.data.find(b"\n", offset)
        return len(self.src.data) if end == -1 else end + 1

    def separated(self, at: int, text: str) -> str:
        """TEXT inserted at the start of a line AT, after one empty line: the file's own, or one of ours."""
        return text if self.src.data[:at].endswith(b"\n\n") or at == 0 else "\n" + text

    def edit(self, at: int, text: str, why: str) -> Edit:
        return Edit(self.rel, at, at, text, why)

    def has_own_line(self, line: str) -> bool:
        """LINE is in the file outside what any bypass added (another op's revert must not take it away)."""
        return line.encode() in _BYPASS_LINE.sub(b"", _BYPASS_BLOCK.sub(b"", self.src.data))

    def include_edits(self, op: str, includes: tuple[str, ...], why: str) -> list[Edit]:
        """INCLUDES the file does not have of its own, each marked as OP's, after the last include."""
        return [
            self.edit(_after_last_include(self), f"{include} // @codemod-bypass {op}\n", why)
            for include in includes
            if not self.has_own_line(include)
        ]


_BYPASS_BLOCK = re.compile(rb"^[ \t]*// @codemod-bypass (\w+) begin:.*?^[ \t]*// @codemod-bypass \1 end\n", re.M | re.S)
_BYPASS_LINE = re.compile(rb"^.*// @codemod-bypass \w+\n", re.M)
MARKED_OP = re.compile(rb"// @codemod-bypass (\w+)")  # any marker above: which op wrote the line


def template_edits(tree: Tree, capture: Capture) -> list[Edit]:
    kernels = capture.native_kernels
    what = "calls the CPU kernel directly, no dispatcher"

    def calling_native(api: ApiFunction) -> str:
        return api.definition_calling(kernels[api.overload], capture.native_conversions.get(api.overload, {}))

    return [
        *declaration_edits(tree, capture),
        *definition_edits(tree, FUNCTIONS_CPP, capture.op, capture.functions, calling_native, what, "at::", (NATIVE_FUNCTIONS_INCLUDE,)),
        *definition_edits(tree, TENSOR_METHODS_CPP, capture.op, capture.methods, calling_native, what, "Tensor::", (NATIVE_FUNCTIONS_INCLUDE,)),
    ]


def declaration_edits(tree: Tree, capture: Capture, functions_h_extra: str = "") -> list[Edit]:
    """Declare the function API in Functions.h (followed by FUNCTIONS_H_EXTRA) and the methods in class Tensor."""
    op = capture.op
    origin = "torchgen generated it before the bypass"
    functions_h = SourceFile.read(tree, FUNCTIONS_H)
    tensor_body = SourceFile.read(tree, TENSOR_BODY_H)
    method_at, method_indent, _ = after_placeholder(tensor_body, _METHOD_PLACEHOLDERS)
    declarations = "\n".join(f"TORCH_API {f.declaration};" for f in capture.functions)
    return [
        functions_h.edit(
            after_placeholder(functions_h, FUNCTION_PLACEHOLDERS)[0],
            block(op, f"function API written by hand ({origin})", declarations + functions_h_extra),
            f"declare {', '.join('at::' + f.name for f in capture.functions)}",
        ),
        *([tensor_body.edit(
            method_at,
            block(op, f"method API written by hand ({origin})", "\n".join(f"{method_indent}{m.declaration};" for m in capture.methods), method_indent),
            f"declare {', '.join('Tensor::' + m.name for m in capture.methods)}",
        )] if capture.methods else []),
    ]


def after_placeholder(source: SourceFile, placeholders: tuple[str, ...]) -> tuple[int, str, tuple[str, ...]]:
    """Start of the line after the codegen placeholder, the placeholder's indentation and its namespaces."""
    for placeholder in placeholders:
        offset = source.src.data.find(placeholder.encode())
        if offset == -1:
            continue
        node = source.src.root.descendant_for_byte_range(offset, offset)
        scope = cpp_syntax.namespaces(node)
        if scope[:1] != ("at",):
            raise BadInput(f"{source.rel}: {placeholder} is not inside `namespace at`; the tool does not know where to declare the op")
        start = source.line_start(offset)
        return source.line_end(offset), source.src.span(start, offset), scope
    raise BadInput(f"{source.rel}: none of {', '.join(placeholders)} found; is this a torchgen template?")


def definition_edits(
    tree: Tree,
    rel: str,
    op: str,
    apis: tuple[ApiFunction, ...],
    define: Callable[[ApiFunction], str],
    what: str,
    prefix: str,
    includes: tuple[str, ...],
) -> list[Edit]:
    """Define APIS (each as DEFINE writes it) at the end of `namespace at` in REL, after INCLUDES; nothing where there
    are none (an op without methods leaves TensorMethods.cpp as it is)."""
    if not apis:
        return []
    source = SourceFile.read(tree, rel)
    body = "\n\n".join(define(api) for api in apis)
    at = _end_of_namespace(source, ("at",))
    return [
        *source.include_edits(op, includes, "include what the definitions call"),
        source.edit(
            at,
            source.separated(at, block(op, what, body)),
            f"define {', '.join(prefix + api.name for api in apis)}",
        ),
    ]


def _after_last_include(source: SourceFile) -> int:
    """After the last include; after another op's block when that include is in it, so blocks never nest."""
    includes = [n for n in source.src.root.named_children if n.type == "preproc_include"]
    at = source.line_end(includes[-1].end_byte - 1) if includes else 0
    for found in _BYPASS_BLOCK.finditer(source.src.data):
        if found.start() < at <= found.end():
            return found.end()
    return at


def native_source_edits(tree: Tree, capture: Capture) -> list[Edit]:
    """Each struct before the definition (or macro invocation) of its kernel; scaffolding after the last CPU impl.

    Structs are matched to definitions by kind (meta or native) and name, as torchgen
    declared them. A native source defining an impl whose meta struct lives in another
    file gets a copy of that struct's definition too (the same tokens: one definition
    by the ODR). A ufunc op has no TORCH_IMPL_FUNC in the tree: its kernel files become
    hand-written sources and its scaffolding goes at the end of `at::native`.
    """
    op = capture.op
    wanted = {(META, s.name): s for s in capture.meta_structs}
    wanted |= {(IMPL, s.name): s for s in capture.native_structs if s.name not in capture.ufunc_structs}
    ufunc = [s for s in capture.native_structs if s.name in capture.ufunc_structs]
    found = structured_kernels.locate(structured_kernels.find_definitions(tree), op, list(wanted))
    impls = [d for (kind, _), defs in found.items() if kind == IMPL for d in defs]
    kernel_files = {d.path for d in impls} or {d.path for defs in found.values() for d in defs}
    sources = {rel: SourceFile.read(tree, rel) for rel in {d.path for defs in found.values() for d in defs}}
    at_definition: dict[tuple[str, int], list[str]] = defaultdict(list)
    for definition in sorted((d for defs in found.values() for d in defs), key=lambda d: (d.path, d.start, d.kind != META)):
        where = "meta" if definition.kind == META else "native"
        at_definition[definition.path, sources[definition.path].line_start(definition.start)].append(
            _struct_block(op, where, wanted[definition.key])
        )
    edits = [
        sources[rel].edit(at, "".join(blocks), f"define the structs of {op}'s kernels before their definition")
        for (rel, at), blocks in sorted(at_definition.items())
    ]
    edits += _meta_struct_copies(op, sources, impls, capture, found)
    carried = "\n".join([*(_struct_block(op, "native", snippet) for snippet in ufunc), scaffolding(capture)])
    if impls:  # right after the op's last TORCH_IMPL_FUNC
        last = max(impls, key=lambda d: d.end)
        source = sources[last.path]
        edits.append(source.edit(source.line_end(last.end - 1), "\n" + carried, "add the CPU structured wrappers and at::native kernels"))
    else:  # a ufunc op's impl was generated: at the end of `at::native` in the file of its meta function
        source = sources[min(kernel_files)]
        edits.append(source.edit(_end_of_namespace(source, ("at", "native")), carried + "\n", "add the ufunc native struct, CPU structured wrappers and at::native kernels"))
    includes = [i for i in (*capture.cpu_includes, BELOW_AUTOGRAD_INCLUDE) if not source.has_own_line(i)]
    if includes:
        edits.append(
            source.edit(
                _after_last_include(source),
                block(op, "headers the CPU wrappers need", "\n".join(includes)),
                "include what the CPU wrappers need",
            )
        )
    return [*edits, *_ufunc_source_edits(tree, capture)]


def _meta_struct_copies(
    op: str, sources: dict[str, SourceFile], impls: list[KernelDefinition], capture: Capture, found: dict[tuple[str, str], list[KernelDefinition]],
) -> list[Edit]:
    """Where an impl's native struct derives from a meta struct defined in another file, that file's
    definition of the meta struct, before the namespace holding the impl (torchgen's header declared it for both)."""
    if not impls:
        return []
    first = min(impls, key=lambda d: d.start)
    meta = {s.name: s for s in capture.meta_structs}
    bases = {base for s in capture.native_structs for base in _META_BASE.findall(s.text)}
    elsewhere = sorted(name for name in bases if name in meta and all(d.path != first.path for d in found.get((META, name), [])))
    if not elsewhere:
        return []
    source = sources[first.path]
    outermost = _outermost_namespace(source, first)
    where = ", ".join(sorted({found[META, name][0].path for name in elsewhere if (META, name) in found}))
    body = "namespace at::meta {\n" + "\n".join(meta[name].text for name in elsewhere) + "\n} // namespace at::meta"
    return [
        source.edit(
            source.line_start(outermost.start_byte),
            block(op, f"meta struct written by hand (was {meta[elsewhere[0]].source}); its meta() is defined in {where}", body) + "\n",
            f"define the meta struct {', '.join(elsewhere)} where the impl's native struct derives from it",
        )
    ]


def _outermost_namespace(source: SourceFile, definition: KernelDefinition) -> Node:
    node = source.src.root.descendant_for_byte_range(definition.start, definition.start)
    outermost = None
    while node is not None:
        if node.type == "namespace_definition":
            outermost = node
        node = node.parent
    if outermost is None:
        raise BadInput(f"{definition.where()}: {definition.struct} is not inside a namespace; the tool does not know where its meta struct goes")
    return outermost


def _struct_block(op: str, where: str, snippet: Snippet) -> str:
    return block(op, f"{where} struct written by hand (was {snippet.source})", snippet.text) + "\n"


def _end_of_namespace(source: SourceFile, name: tuple[str, ...]) -> int:
    """Start of the line closing the last `namespace a::b {` (or nested a { b {) body in the file."""
    bodies = [
        node for node in cpp_syntax.walk(source.src.root)
        if node.type == "declaration_list" and node.parent.type == "namespace_definition"
        and cpp_syntax.namespaces(node) == name
    ]
    if not bodies:
        raise BadInput(f"{source.rel}: no `namespace {'::'.join(name)} {{ ... }}` to add the op's definitions to")
    return source.line_start(max(bodies, key=lambda n: n.end_byte).end_byte - 1)


def _ufunc_source_path(generated_name: str) -> str:
    """Per-CPU-capability kernels live in native/cpu/ (the build compiles those once per ISA)."""
    per_capability = generated_name.startswith("UfuncCPUKernel_")
    return f"{NATIVE_SOURCES}/cpu/{generated_name}" if per_capability else f"{NATIVE_SOURCES}/{generated_name}"


def _ufunc_source_edits(tree: Tree, capture: Capture) -> list[Edit]:
    """The ufunc codegen's CPU files, now hand-written sources of the tree (new files)."""
    edits = []
    for snippet in capture.ufunc_sources:
        rel = _ufunc_source_path(snippet.name)
        if tree.path(rel).exists():
            raise BadInput(f"{rel} exists; the bypass of {capture.op!r} would write its ufunc kernel there; move it away first")
        header = f"// @codemod-bypass {capture.op}: written by hand from torchgen's {snippet.name}; revert deletes this file\n"
        edits.append(Edit(rel, 0, 0, header + snippet.text, f"carry over the ufunc CPU kernel {snippet.name}"))
    return edits


def scaffolding(capture: Capture) -> str:
    op = capture.op
    namespace = namespace_name(op)
    carried = "\n\n".join(s.text for s in (*capture.cpu_helpers, *capture.cpu_scaffolding))
    forwards = "\n\n".join(
        _forward(namespace, wrapper, capture.native_kernels[overload], capture)
        for overload, wrapper in capture.cpu_wrappers.items()
    )
    body = (
        f"namespace {{\nnamespace {namespace} {{\n{carried}\n}} // namespace {namespace}\n}} // namespace\n\n{forwards}"
    )
    return block(op, "CPU structured wrappers written by hand (were RegisterCPU.cpp); the native API calls them", body)


def _forward(namespace: str, wrapper: str, native_name: str, capture: Capture) -> str:
    snippet = next(s for s in capture.cpu_scaffolding if s.name == wrapper)
    src = cpp_syntax.parse(snippet.text.encode())
    node = next(n for n in src.root.named_children if n.type == "function_definition")
    head, start = cpp_syntax.function_head(src, node)
    name = cpp_syntax.function_declarator(node).child_by_field_name("declarator")
    head = head[: name.start_byte - start] + native_name + as_native_api(head[name.end_byte - start :])
    args = ", ".join(cpp_syntax.parameter_names(node))
    return f"{head} {{\n    {BELOW_AUTOGRAD}\n    return {namespace}::{wrapper}({args});\n}}"
