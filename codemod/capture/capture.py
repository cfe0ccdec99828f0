"""Capture what torchgen generates for an op's structured groups.

torchgen runs twice on a yaml holding the groups' entries: once as they
are (the code to carry over: function and method APIs, meta and native
structs, the CPU scaffolding) and once as the bypass leaves them (the names
torchgen will then expect: the `at::native::` kernels it registers). Nothing
here is a hard-coded copy: another op or torchgen version captures its own.

The yaml may hold other ops' entries too (those a torchgen release checks
across the whole file, see `codegen`), so everything taken from the outputs is
the op's own: its overloads' registrations, and what those reach by name.
"""
from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from codemod.model import cache, cpp_syntax, progress
from codemod.model.cpp_syntax import Source, text
from codemod.model.edits import Edit, apply_edits
from codemod.model.errors import BadInput
from codemod.model.tree import NATIVE_FUNCTIONS, TAGS, TEMPLATES, Tree

if TYPE_CHECKING:
    from codemod.model.native_yaml import NativeYaml, OpGroup

_OPS_CALL = re.compile(r"at::_ops::(\w+)::call")
_OPS_ENTRY = re.compile(r"at::_ops::(\w+)::(?:call|redispatch)\b")
# Generated headers whose definitions in a namespace inside `at` (at::redispatch::, at::symint::) torchgen renames
# `__dispatch_` for a manual_cpp_binding entry, as it renames at::mul and Tensor::mul
_RENAMED_INSIDE_AT = ("Functions.h", "RedispatchFunctions.h")
_M_IMPL = re.compile(r'm\.impl\("([\w.]+)",\s*TORCH_FN\((\w+)\)\)')
_NATIVE_BASE = re.compile(r"public at::native::(structured_\w+)")
# Headers declaring every op; a native source may not include them (TORCH_ASSERT_ONLY_METHOD_OPERATORS).
_ALL_OPS_HEADER = re.compile(r"<ATen/\w*Functions\.h>")
# torchgen spells a `Tensor[]` parameter ITensorListRef only in a structured group (its context's
# use_ilistref_for_tensor_lists): after the bypass the op's native API takes a TensorList. The function and method API
# written by hand keep the structured spelling and pass the kernel a copy (an ITensorListRef may hold a boxed list,
# which converts to no TensorList); the structured wrappers they reach take a TensorList as it is.
_STRUCTURED_TENSOR_LIST, _UNSTRUCTURED_TENSOR_LIST = "const at::ITensorListRef &", "at::TensorList"
_STRUCTURED_TENSOR_LIST_WRITTEN = re.compile(r"const\s*at::ITensorListRef\s*&\s*")  # however torchgen spaces it


@dataclass(frozen=True)
class ApiFunction:
    """A generated dispatcher-calling function (`at::mul`) or method (`Tensor::mul`)."""

    overload: str  # "mul.out"
    name: str  # "mul_outf", or "mul_" for a method
    declaration: str  # return type and declarator, default arguments kept
    definition_head: str  # the same without default arguments (and `Tensor::` for methods)
    body: str  # "{ return at::_ops::mul_out::call(self, other, out); }" as generated

    def definition_calling(self, native_name: str, conversions: dict[str, str]) -> str:
        """This function with the dispatcher call replaced by a direct call of the kernel.

        CONVERSIONS (`parameter_key` -> expression): how the kernel's CompositeImplicitAutograd wrapper, which takes
        the dispatcher's types, passes a parameter to the kernel (a SymInt `k` as `k.guard_int(__FILE__, __LINE__)`
        to a kernel taking int64_t). Each argument of the dispatcher call that reads one parameter is rebuilt: a
        parameter of the dispatcher's type (the `_symint` variants) is passed as the wrapper passes it; one the
        wrapper converts but this function takes in another type is already of the kernel's type (an IntArrayRef the
        dispatcher call made a SymIntArrayRef of) and is passed as it is; the rest as the dispatcher call passed it."""
        src = cpp_syntax.parse(f"{self.definition_head} {self.body}".encode())
        node = next(n for n in src.root.named_children if n.type == "function_definition")
        types = {name: type_ for type_, name in cpp_syntax.parameters(node)}
        converted = {key.rsplit(" ", 1)[1] for key in conversions}
        call = next(n for n in cpp_syntax.walk(node.child_by_field_name("body"))
                    if n.type == "call_expression" and _OPS_CALL.fullmatch(src.text(n.child_by_field_name("function"))))
        function = call.child_by_field_name("function")
        edits = [Edit("", function.start_byte, function.end_byte, f"at::native::{native_name}", "the kernel, not the dispatcher")]
        for argument in call.child_by_field_name("arguments").named_children:
            used = _words(src.text(argument)) & types.keys()
            if len(used) == 1:
                name = used.pop()
                expression = conversions.get(parameter_key(types[name], name), name if name in converted else None)
                if expression is not None:
                    edits.append(Edit("", argument.start_byte, argument.end_byte, expression, f"{name} as the kernel takes it"))
        return apply_edits(src.data, edits).decode()


def as_native_api(code: str) -> str:
    """CODE (a structured CPU wrapper, its head or its parameters) with each tensor list spelled as the op's native API
    takes it after the bypass."""
    return _STRUCTURED_TENSOR_LIST_WRITTEN.sub(f"{_UNSTRUCTURED_TENSOR_LIST} ", code)


def parameter_key(type_: str, name: str) -> str:
    """A parameter as `TYPE NAME` with the type's spaces dropped (`const at::Tensor & self` is `constat::Tensor& self`)."""
    return f"{_squeezed(type_)} {name}"


@dataclass(frozen=True)
class Snippet:
    """A generated definition carried over verbatim."""

    name: str
    text: str
    source: str  # the generated file it came from


@dataclass(frozen=True)
class Capture:
    op: str
    overloads: tuple[str, ...]
    functions: tuple[ApiFunction, ...]  # Functions.h
    methods: tuple[ApiFunction, ...]  # core/TensorBody.h
    meta_structs: tuple[Snippet, ...]  # NativeMetaFunctions.h
    native_structs: tuple[Snippet, ...]  # NativeFunctions.h: the structs the CPU kernel's registration derives from
    other_native_structs: tuple[str, ...]  # NativeFunctions.h: other backends' kernels (CUDA, ...), lost with the bypass
    cpu_helpers: tuple[Snippet, ...]  # RegisterCPU helpers the scaffolding calls
    cpu_scaffolding: tuple[Snippet, ...]  # RegisterCPU structured classes and wrappers
    cpu_wrappers: dict[str, str]  # overload -> wrapper registered for CPU
    cpu_functions: tuple[str, ...]  # at::cpu:: names that disappear
    redispatch_functions: tuple[str, ...]  # at::redispatch:: names that disappear
    native_kernels: dict[str, str]  # overload -> at::native:: name torchgen registers after the bypass
    cpu_includes: tuple[str, ...]  # what the CPU registration includes, less the all-op headers
    ufunc_sources: tuple[Snippet, ...]  # whole UfuncCPU*_OP.cpp files: the CPU kernel the ufunc codegen wrote
    ufunc_structs: tuple[str, ...]  # native structs whose impl is in those files, not in a native source
    # overload -> {parameter_key: expression}: the parameters torchgen converts when it calls the kernel after the
    # bypass (SymInt to int64_t), and how; a journal written before this was captured reads as none
    native_conversions: dict[str, dict[str, str]] = field(default_factory=dict)
    # the op's definitions in a namespace inside `at` that torchgen renames once the entries are manual_cpp_binding
    # (at::redispatch::mul becomes at::redispatch::__dispatch_mul; generated code, VariableType's kernels, still calls
    # at::redispatch::mul): each named `at::redispatch::mul`, as generated; a guarded bypass writes them again
    renamed_inside_at: tuple[Snippet, ...] = ()

    def to_json(self) -> str:
        # in capture order: the dicts (wrappers by overload) are in the order torchgen registered them, which is
        # the order the scaffolding is rendered in; sorted keys gave a cached capture another rendering
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_json(cls, data: str) -> Capture:
        return cls.from_raw(json.loads(data))

    @classmethod
    def from_raw(cls, raw: dict) -> Capture:
        """The Capture of a JSON document of to_json's shape."""
        for key in ("functions", "methods"):
            raw[key] = tuple(ApiFunction(**item) for item in raw[key])
        for key in ("meta_structs", "native_structs", "cpu_helpers", "cpu_scaffolding", "ufunc_sources", "renamed_inside_at"):
            raw[key] = tuple(Snippet(**item) for item in raw.get(key, ()))
        for key in ("overloads", "other_native_structs", "cpu_functions", "redispatch_functions", "cpu_includes", "ufunc_structs"):
            raw[key] = tuple(raw[key])
        return cls(**raw)


def group_yaml(doc: NativeYaml, groups: list[OpGroup]) -> str:
    return "\n".join(doc.entry_text(member.entry) for group in groups for member in group.members)


def capture(tree: Tree, op: str, before_yaml: str, after_yaml: str, overloads: tuple[str, ...]) -> Capture:
    """What torchgen generates for the op's entries; torchgen's loaders check the whole yaml meanwhile, and what they
    refuse there is the cause of anything else (bad input, exit 2). Kept in the build cache by the key of everything
    it reads (only a capture whose check passed is kept): the same inputs are not captured twice."""
    kept = cache.cache_dir() / f"capture-{op}-{cache.digest(*_inputs(tree, op, before_yaml, after_yaml, overloads))[:20]}.json"
    step = f"capture: torchgen on the entries of {op}, as they are and as the bypass leaves them"
    raw = cache.kept_json(kept, Capture)  # None: none, truncated or corrupt, captured again
    if raw is not None:
        progress.kept(step)
        return Capture.from_raw(raw)
    captured = _captured(tree, op, before_yaml, after_yaml, overloads, step)
    cache.publish_text(kept, captured.to_json())
    return captured


def _inputs(tree: Tree, op: str, before_yaml: str, after_yaml: str, overloads: tuple[str, ...]) -> list[bytes | str]:
    """What a capture reads: the entries as they are and as the bypass leaves them, the whole yaml (the entries
    torchgen checks beside them, and its loaders' check), the tags and templates, the torchgen that runs, the
    parser of its outputs and our own code."""
    from codemod.capture import codegen  # with the yaml model, ~50 ms: the commands that only read a journal skip it

    return [
        op, before_yaml, after_yaml, "\0".join(overloads), *codegen.files(tree.path(NATIVE_FUNCTIONS), tree.path(TAGS), tree.path(TEMPLATES)),
        *codegen.torchgen_code(tree), *cpp_syntax.parser_versions(), cache.own_code(),
    ]


def _captured(tree: Tree, op: str, before_yaml: str, after_yaml: str, overloads: tuple[str, ...], step: str) -> Capture:
    from concurrent.futures import ThreadPoolExecutor  # with logging, ~10 ms: only a capture that runs pays for it

    from codemod.capture import codegen

    with tempfile.TemporaryDirectory(prefix="codemod-capture-") as scratch:
        before, after = Path(scratch, "before"), Path(scratch, "after")
        with progress.step(step):
            with ThreadPoolExecutor(max_workers=3) as pool:  # three subprocesses
                whole_file_check = pool.submit(codegen.check_native_yaml, tree)
                runs = [pool.submit(codegen.aten_on_entries, tree, text, out) for text, out in ((before_yaml, before), (after_yaml, after))]
                try:
                    for run in runs:
                        run.result()
                finally:
                    whole_file_check.result()
        ops_names = {name.replace(".", "_"): name for name in overloads}
        register_cpu = _register_file(before, "CPU")
        cpu_wrappers = _registrations(register_cpu, overloads)
        scaffolding, helpers = _cpu_scaffolding(register_cpu, set(cpu_wrappers.values()))
        native_structs, other_native_structs, ufunc_structs, meta_structs = _op_structs(before, scaffolding)
        native_calls = _native_calls(_register_file(after, "CompositeImplicitAutograd"), overloads)
        return Capture(
            op=op,
            overloads=overloads,
            functions=generated_functions(before / "Functions.h", ops_names),
            methods=_methods(before / "core" / "TensorBody.h", ops_names),
            meta_structs=meta_structs,
            native_structs=native_structs,
            other_native_structs=other_native_structs,
            cpu_helpers=helpers,
            cpu_scaffolding=scaffolding,
            cpu_wrappers=cpu_wrappers,
            cpu_functions=_names_in_namespace(register_cpu, ("at", "cpu"), set(cpu_wrappers.values())),
            redispatch_functions=_names_in_namespace(before / "RedispatchFunctions.h", ("at", "redispatch"), set(ops_names)),
            native_kernels={overload: kernel for overload, (kernel, _) in native_calls.items()},
            cpu_includes=_includes(register_cpu),
            ufunc_sources=tuple(Snippet(p.name, p.read_text(), p.name) for p in _ufunc_files(before, "CPU", native_structs)),
            ufunc_structs=ufunc_structs,
            native_conversions={overload: conversions for overload, (_, conversions) in native_calls.items() if conversions},
            renamed_inside_at=_renamed_inside_at(before, after, ops_names),
        )


def _ufunc_files(out: Path, backend: str, native_structs: Sequence[Snippet]) -> list[Path]:
    """What torchgen's ufunc codegen wrote for BACKEND and the op of these native structs:
    Ufunc<B>_<op>.cpp, which uses them, and its Ufunc<B>Kernel_<op>.cpp."""
    names = {s.name for s in native_structs}
    files = [p for p in out.glob(f"Ufunc{backend}*") if p.is_file()]
    ops = {_ufunc_op(p) for p in files if names & _words(p.read_text())}
    return sorted(p for p in files if _ufunc_op(p) in ops)


def _ufunc_op(path: Path) -> str:
    return path.stem.split("_", 1)[1]


def _op_structs(
    out: Path, cpu_scaffolding: Sequence[Snippet]
) -> tuple[tuple[Snippet, ...], tuple[str, ...], tuple[str, ...], tuple[Snippet, ...]]:
    """The op's native structs the CPU registration derives its classes from (carried over), its other backends'
    (CUDA, MPS, ...: lost with the bypass), those of the first whose impl the ufunc codegen wrote, and its meta structs.

    Told apart by what torchgen's CPU registration derives from, never by the kernel's name: `lerp.Scalar_out`'s
    CPU kernel `lerp_Scalar` is also the name of its meta struct. The output may hold other ops' structs (entries a
    torchgen release checks across the yaml join the run): the op's are those deriving from its meta structs.
    """
    derived = {name for s in cpu_scaffolding for name in _NATIVE_BASE.findall(s.text)}
    all_native = _structs(out / "NativeFunctions.h")
    cpu = tuple(s for s in all_native if s.name in derived)
    meta = tuple(s for s in _structs(out / "NativeMetaFunctions.h") if s.name in _words(*(s.text for s in cpu)))
    meta_names = {m.name for m in meta}
    other = tuple(s.name for s in all_native if s not in cpu and meta_names & _words(s.text))
    ufunc = {s.name for p in _ufunc_files(out, "CPU", cpu) for s in _structs(p)}
    return cpu, other, tuple(s.name for s in cpu if s.name in ufunc), meta


def _words(*texts: str) -> set[str]:
    return {word for t in texts for word in re.findall(r"\b\w+\b", t)}


def _register_file(out: Path, key: str) -> Path:
    """torchgen 2.x shards Register<Key>_N.cpp and also writes Register<Key>Everything.cpp."""
    for name in (f"Register{key}Everything.cpp", f"Register{key}.cpp"):
        if (out / name).exists():
            return out / name
    raise BadInput(f"torchgen wrote no Register{key}*.cpp into {out}; is this torchgen 2.x?")


def _source(path: Path) -> Source:
    return cpp_syntax.parse(path.read_bytes())


def generated_functions(path: Path, ops_names: dict[str, str]) -> tuple[ApiFunction, ...]:
    src = _source(path)
    found = []
    for node in cpp_syntax.walk(src.root):
        if node.type != "function_definition" or cpp_syntax.namespaces(node) != ("at",):
            continue
        body = node.child_by_field_name("body")
        call = _OPS_CALL.search(text(body)) if body is not None else None
        if call is None or call.group(1) not in ops_names:
            continue
        head, start = cpp_syntax.function_head(src, node)
        found.append(
            ApiFunction(
                overload=ops_names[call.group(1)],
                name=cpp_syntax.definition_name(node),
                declaration=head,
                definition_head=cpp_syntax.strip_default_arguments(node, head, start),
                body=src.text(body),
            )
        )
    return tuple(found)


def _methods(path: Path, ops_names: dict[str, str]) -> tuple[ApiFunction, ...]:
    """Pair each generated `Tensor::x` definition with its declaration in the class (which has the defaults)."""
    src = _source(path)
    methods = []
    for node in cpp_syntax.walk(src.root):
        if node.type != "function_definition" or cpp_syntax.namespaces(node) != ("at",):
            continue
        name = cpp_syntax.definition_name(node)
        body = node.child_by_field_name("body")
        call = _OPS_CALL.search(text(body)) if body is not None else None
        if not (isinstance(name, str) and name.startswith("Tensor::") and call and call.group(1) in ops_names):
            continue
        head, _ = cpp_syntax.function_head(src, node)
        member = name.removeprefix("Tensor::")
        declaration = _member_declaration(src, member, head.replace(f"{name}(", f"{member}(", 1))
        if declaration is None:
            raise BadInput(f"{path}: no declaration of Tensor::{member} inside class Tensor matches its definition")
        methods.append(ApiFunction(ops_names[call.group(1)], member, declaration, head, src.text(body)))
    return tuple(methods)


def _member_declaration(src: Source, name: str, signature: str) -> str | None:
    """The member declaration `NAME(...)` whose signature, default arguments dropped, is SIGNATURE.

    Overloads differ only in their parameter types (clamp's Scalar? and Tensor? pairs), so the whole
    signature decides. torchgen writes each member declaration on a line of its own; tree-sitter reads
    some of them inside TensorBody.h as expressions, so each candidate line is parsed alone, as a member."""
    wanted = _squeezed(signature)
    for line in src.data.decode().splitlines():
        declaration = line.strip()
        if f"{name}(" not in declaration or not declaration.endswith(";"):
            continue
        member = cpp_syntax.parse(f"struct S {{ {declaration} }};".encode())
        node = next((n for n in cpp_syntax.walk(member.root) if n.type == "field_declaration"), None)
        if node is None or cpp_syntax.function_declarator(node) is None:
            continue
        start = node.start_byte
        without_defaults = cpp_syntax.strip_default_arguments(node, member.span(start, node.end_byte), start)
        if _squeezed(without_defaults.rstrip(";")) == wanted:
            return declaration.rstrip(";").rstrip()
    return None


def _squeezed(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _structs(path: Path) -> tuple[Snippet, ...]:
    """Struct definitions, with their closing `;` (TORCH_API confuses tree-sitter, so match the head)."""
    src = _source(path)
    return tuple(
        Snippet(text(node.child_by_field_name("name")), src.text(node) + ";", path.name)
        for node in cpp_syntax.walk(src.root)
        if node.type == "struct_specifier" and node.child_by_field_name("body") is not None
    )


def _cpu_scaffolding(path: Path, wrappers: set[str]) -> tuple[tuple[Snippet, ...], tuple[Snippet, ...]]:
    """The op's CPU WRAPPERS with the structured classes they use, and the helpers those call."""
    src = _source(path)
    definitions: dict[str, str] = {}  # the anonymous namespace's structs and functions, in file order
    structs: set[str] = set()
    for node in cpp_syntax.walk(src.root):
        if node.parent is None or node.parent.type != "declaration_list":
            continue
        if cpp_syntax.namespaces(node) != ("at", ""):
            continue
        name = cpp_syntax.definition_name(node) if node.type == "function_definition" else None
        if node.type == "struct_specifier":
            structs.add(text(node.child_by_field_name("name")))
            definitions[text(node.child_by_field_name("name"))] = src.text(node) + ";"
        elif isinstance(name, str):
            definitions[name] = src.text(node)
    used = _reachable([body for name, body in definitions.items() if name in wrappers], definitions)
    scaffolding = tuple(
        Snippet(name, body, path.name) for name, body in definitions.items() if name in wrappers or name in used & structs
    )
    helpers = tuple(Snippet(name, body, path.name) for name, body in definitions.items() if name in used - wrappers - structs)
    return scaffolding, helpers


def _reachable(texts: list[str], candidates: dict[str, str]) -> set[str]:
    """Names of CANDIDATES the texts use, directly or through other candidates."""
    needed: set[str] = set()
    pending = list(texts)
    while pending:
        for name in sorted(_words(pending.pop()) & candidates.keys() - needed):
            needed.add(name)
            pending.append(candidates[name])
    return needed


def _registrations(path: Path, overloads: Sequence[str]) -> dict[str, str]:
    """overload -> the function registered for it, for these overloads."""
    return {overload: wrapper for overload, wrapper in _M_IMPL.findall(path.read_text()) if overload in overloads}


def _renamed_inside_at(before: Path, after: Path, ops_names: dict[str, str]) -> tuple[Snippet, ...]:
    """The op's definitions in a namespace inside `at` (BEFORE's output) whose name AFTER's generates `__dispatch_`."""
    found = []
    for name in _RENAMED_INSIDE_AT:
        src = _source(before / name)
        renamed = _words((after / name).read_text())
        for node in cpp_syntax.walk(src.root):
            scope = cpp_syntax.namespaces(node) if node.type == "function_definition" else ()
            if len(scope) < 2 or scope[0] != "at":
                continue
            function = cpp_syntax.definition_name(node)
            entry = _OPS_ENTRY.search(text(node))
            if isinstance(function, str) and entry and entry.group(1) in ops_names and f"__dispatch_{function}" in renamed:
                whole = node.parent if node.parent.type == "template_declaration" else node
                found.append(Snippet("::".join((*scope, function)), src.text(whole), name))
    return tuple(found)


def _names_in_namespace(path: Path, namespace: tuple[str, ...], uses: set[str]) -> tuple[str, ...]:
    """Functions defined in NAMESPACE whose definition uses one of these names."""
    names = []
    for node in cpp_syntax.walk(_source(path).root):
        if node.type == "function_definition" and cpp_syntax.namespaces(node) == namespace:
            name = cpp_syntax.definition_name(node)
            if isinstance(name, str) and name not in names and uses & _words(text(node)):
                names.append(name)
    return tuple(names)


def _native_calls(path: Path, overloads: Sequence[str]) -> dict[str, tuple[str, dict[str, str]]]:
    """overload -> the at::native:: function its CompositeImplicitAutograd wrapper calls, and the parameters the
    wrapper passes as an expression of themselves (`k.guard_int(__FILE__, __LINE__)`), by `parameter_key`; a tensor
    list the wrapper takes as a TensorList, by the key of its structured spelling, as a copy the kernel takes."""
    src = _source(path)
    calls = {}
    for node in cpp_syntax.walk(src.root):
        name = cpp_syntax.definition_name(node) if node.type == "function_definition" else None
        call = next((n for n in cpp_syntax.walk(node) if n.type == "call_expression"
                     and text(n.child_by_field_name("function")).startswith("at::native::")), None) if isinstance(name, str) else None
        if call is None:
            continue
        typed = cpp_syntax.parameters(node)
        parameters = {param: parameter_key(type_, param) for type_, param in typed}
        conversions = {
            parameter_key(_STRUCTURED_TENSOR_LIST, param): f"std::vector<at::Tensor>({param}.begin(), {param}.end())"
            for type_, param in typed if _squeezed(type_) == _UNSTRUCTURED_TENSOR_LIST
        }
        for argument in call.child_by_field_name("arguments").named_children:
            expression = src.text(argument)
            used = _words(expression) & parameters.keys()
            if expression not in parameters and len(used) == 1:
                conversions[parameters[used.pop()]] = expression
        calls[name] = (text(call.child_by_field_name("function")).removeprefix("at::native::"), conversions)
    return {overload: calls[wrapper] for overload, wrapper in _registrations(path, overloads).items() if wrapper in calls}


def _includes(path: Path) -> tuple[str, ...]:
    src = _source(path)
    return tuple(
        src.text(node).strip()
        for node in src.root.named_children
        if node.type == "preproc_include" and not _ALL_OPS_HEADER.search(src.text(node))
    )
