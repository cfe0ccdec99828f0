"""Precompiled headers (codemod.verify.pch) with the real g++: keyed by what they hold, refused when stale, and
for the compile check holding only headers the compiled file reads anyway."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from codemod.model.errors import VerificationFailed
from codemod.verify import compiler, pch

CXX = compiler.CXX
LANGUAGE = ["-std=c++20", "-w"]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def headers(root: Path, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / f"{name}.h").write_text(text)
    return root


def used(flags: list[str], source: Path) -> list[str]:
    """The .gch files g++ -H reports it loaded ("! path") compiling SOURCE with FLAGS."""
    result = subprocess.run([CXX, *flags, "-fsyntax-only", "-H", str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [line[2:] for line in result.stderr.splitlines() if line.startswith("! ")]


def test_a_pch_is_made_once_and_loaded_by_the_compile(tmp_path: Path, cache: Path) -> None:
    include = headers(tmp_path / "include", deep="inline int deep() { return 1; }\n", top="#include <deep.h>\n")
    held = headers(tmp_path / "pch", held="#include <top.h>\n") / "held.h"
    flags = [*LANGUAGE, f"-I{include}"]
    first = pch.flags_for(CXX, held, flags)
    assert first == pch.flags_for(CXX, held, flags)  # the same key: found in the cache
    assert len(list(cache.glob("pch-*"))) == 1
    source = tmp_path / "use.cpp"
    source.write_text("int main() { return deep(); }\n")
    assert used([*flags, *first], source) == [f"{first[1]}.gch"]


def test_a_changed_or_shadowed_header_gives_another_pch(tmp_path: Path, cache: Path) -> None:
    include = headers(tmp_path / "include", deep="inline int deep() { return 1; }\n", top="#include <deep.h>\n")
    held = headers(tmp_path / "pch", held="#include <top.h>\n") / "held.h"
    flags = [*LANGUAGE, f"-I{include}"]
    original = pch.flags_for(CXX, held, flags)
    (include / "deep.h").write_text("inline int deep() { return 2; }\n")
    changed = pch.flags_for(CXX, held, flags)
    shadowing = headers(tmp_path / "shadow", deep="inline int deep() { return 3; }\n")
    shadowed = pch.flags_for(CXX, held, [*LANGUAGE, f"-I{shadowing}", f"-I{include}"])
    assert len({original[1], changed[1], shadowed[1]}) == 3
    # include directories alone are not in the key: the same headers through another path list share a PCH
    assert pch.flags_for(CXX, held, [*LANGUAGE, f"-I{include}", f"-I{tmp_path / 'empty'}"]) == changed


def test_g_plus_plus_refuses_a_pch_made_with_other_flags(tmp_path: Path) -> None:
    include = headers(tmp_path / "include", deep="inline int deep() { return 1; }\n")
    held = headers(tmp_path / "pch", held="#include <deep.h>\n") / "held.h"
    made = pch.flags_for(CXX, held, ["-std=c++20", f"-I{include}"])
    source = tmp_path / "use.cpp"
    source.write_text("int main() { return deep(); }\n")
    refused = subprocess.run([CXX, "-std=c++17", f"-I{include}", *made, "-fsyntax-only", str(source)], capture_output=True, text=True)
    assert refused.returncode != 0 and "not used because" in refused.stderr


def test_a_header_g_plus_plus_cannot_precompile_is_an_error_naming_it(tmp_path: Path) -> None:
    held = headers(tmp_path / "pch", held="#include <no_such_header.h>\n") / "held.h"
    with pytest.raises(VerificationFailed, match="held.h"):
        pch.flags_for(CXX, held, LANGUAGE)


def installed_include_flags() -> list[str]:
    torch = compiler.torch_dir()
    return ["-fsyntax-only", "-std=c++20", "-DCAFFE2_BUILD_MAIN_LIB", "-w", f"-I{torch / 'include'}", f"-I{torch / 'include/torch/csrc/api/include'}"]


def test_the_compile_checks_pch_holds_only_aten_pch_headers_the_source_reads(tmp_path: Path) -> None:
    """PyTorch's own ATen_pch.h, less what the file does not include: the PCH only changes the order of headers
    the file reads anyway."""
    source = tmp_path / "uses_irange.cpp"
    source.write_text("#include <c10/util/irange.h>\nint count() { int n = 0; for (auto i : c10::irange(3)) n += i; return n; }\n")
    flags = installed_include_flags()
    added = pch.for_source(CXX, source, flags)
    held = Path(added[1]).read_text()
    assert "#include <c10/util/irange.h>" in held
    assert "#include <ATen/core/TensorBase.h>" not in held and "#include <c10/core/TensorImpl.h>" not in held
    assert "TORCH_ASSERT_NO_OPERATORS" in held  # PyTorch's own guard stays
    assert used([*flags, *added], source) == [f"{added[1]}.gch"]


def test_with_the_pch_a_missing_include_is_still_an_error(tmp_path: Path) -> None:
    """c10::irange without its header: an error without the PCH, and with it (the PCH does not bring it in)."""
    source = tmp_path / "forgets_irange.cpp"
    source.write_text("#include <c10/macros/Macros.h>\nint count() { int n = 0; for (auto i : c10::irange(3)) n += i; return n; }\n")
    flags = installed_include_flags()
    added = pch.for_source(CXX, source, flags)
    assert "#include <c10/util/irange.h>" not in Path(added[1]).read_text()
    for extra in ([], added):
        result = subprocess.run([CXX, *flags, *extra, str(source)], capture_output=True, text=True)
        assert result.returncode != 0 and "irange" in result.stderr


def test_no_pch_where_the_include_directories_hold_no_aten_pch(tmp_path: Path) -> None:
    source = tmp_path / "plain.cpp"
    source.write_text("int main() { return 0; }\n")
    assert pch.for_source(CXX, source, [*LANGUAGE, f"-I{tmp_path}"]) == []
    assert not os.path.exists(os.environ["CODEMOD_BUILD_CACHE"])


def test_the_compile_check_loads_aten_pch_precompiled_and_compiles_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compile_check's g++ command force-includes the precompiled ATen_pch.h subset; a clean file compiles, a
    broken one fails at its own line, as without the PCH."""
    import dataclasses

    from codemod.capture.fromtorch import write_tree_from_torch
    from codemod.model import progress
    from codemod.model.tree import locate
    from codemod.plan.plan import FileChange, make_plan
    from codemod.verify import compile_check
    from tests.conftest import TARGET_TREE

    write_tree_from_torch(tmp_path / "tree", TARGET_TREE)
    tree = locate(tmp_path / "tree")
    nothing_regenerated = compile_check.Headers(tmp_path / "no-headers", "none")
    mine = "aten/src/ATen/native/Mine.cpp"
    text = "#include <ATen/core/Tensor.h>\n\nint64_t elements(const at::Tensor& t) { return t.numel(); }\n"
    # a plan that wrote only Mine.cpp: the compile check compiles the bytes on disk
    writes_mine = dataclasses.replace(make_plan(tree, "mul"), changes=(FileChange(mine, None, text.encode()),), reaching=())
    progress.set_level(progress.VERBOSE)
    try:
        tree.path(mine).write_text(text)
        report = compile_check.check(tree, nothing_regenerated, [writes_mine])
        with pytest.raises(VerificationFailed, match=r"Mine\.cpp:3:.*no_such_member"):
            tree.path(mine).write_text(text.replace("numel()", "no_such_member()"))
            compile_check.check(tree, nothing_regenerated, [writes_mine])
    finally:
        progress.set_level(progress.NORMAL)
    assert report.compiled == ("aten/src/ATen/native/Mine.cpp",) and not report.not_compiled
    compiles = [line for line in capsys.readouterr().err.splitlines() if line.startswith("$ ") and "-fsyntax-only" in line]
    assert len(compiles) == 2 and all("/ATen_pch.h -Winvalid-pch -Werror=invalid-pch -fpch-deps" in line for line in compiles)
