"""Precompiled headers (codemod.verify.pch) with the real g++: keyed by what they hold, made once per key, refused
when stale, bounded in number, and loaded only where the preprocessor reads the same text with them as without."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from codemod.model.errors import VerificationFailed
from codemod.verify import compiler, pch
from tests.conftest import REPO

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


def loading(header: Path, flags: list[str]) -> list[str]:
    """What loads HEADER precompiled into a compile with FLAGS (made if need be)."""
    with pch.loaded(CXX, header, flags) as added:
        return added


def used(flags: list[str], source: Path) -> list[str]:
    """The .gch files g++ -H reports it loaded ("! path") compiling SOURCE with FLAGS."""
    result = subprocess.run([CXX, *flags, "-fsyntax-only", "-H", str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [line[2:] for line in result.stderr.splitlines() if line.startswith("! ")]


def test_a_pch_is_made_once_and_loaded_by_the_compile(tmp_path: Path, cache: Path) -> None:
    include = headers(tmp_path / "include", deep="inline int deep() { return 1; }\n", top="#include <deep.h>\n")
    held = headers(tmp_path / "pch", held="#include <top.h>\n") / "held.h"
    flags = [*LANGUAGE, f"-I{include}"]
    first = loading(held, flags)
    assert first == loading(held, flags)  # the same key: found in the cache
    assert len(list(cache.glob("pch-*"))) == 1
    source = tmp_path / "use.cpp"
    source.write_text("int main() { return deep(); }\n")
    assert used([*flags, *first], source) == [f"{first[1]}.gch"]


def test_a_changed_or_shadowed_header_gives_another_pch(tmp_path: Path, cache: Path) -> None:
    include = headers(tmp_path / "include", deep="inline int deep() { return 1; }\n", top="#include <deep.h>\n")
    held = headers(tmp_path / "pch", held="#include <top.h>\n") / "held.h"
    flags = [*LANGUAGE, f"-I{include}"]
    original = loading(held, flags)
    (include / "deep.h").write_text("inline int deep() { return 2; }\n")
    changed = loading(held, flags)
    shadowing = headers(tmp_path / "shadow", deep="inline int deep() { return 3; }\n")
    shadowed = loading(held, [*LANGUAGE, f"-I{shadowing}", f"-I{include}"])
    assert len({original[1], changed[1], shadowed[1]}) == 3
    # include directories alone are not in the key: the same headers through another path list share a PCH
    assert loading(held, [*LANGUAGE, f"-I{include}", f"-I{tmp_path / 'empty'}"]) == changed


def test_g_plus_plus_refuses_a_pch_made_with_other_flags(tmp_path: Path) -> None:
    include = headers(tmp_path / "include", deep="inline int deep() { return 1; }\n")
    held = headers(tmp_path / "pch", held="#include <deep.h>\n") / "held.h"
    made = loading(held, ["-std=c++20", f"-I{include}"])
    source = tmp_path / "use.cpp"
    source.write_text("int main() { return deep(); }\n")
    refused = subprocess.run([CXX, "-std=c++17", f"-I{include}", *made, "-fsyntax-only", str(source)], capture_output=True, text=True)
    assert refused.returncode != 0 and "not used because" in refused.stderr


def test_a_header_g_plus_plus_cannot_precompile_is_an_error_naming_it(tmp_path: Path) -> None:
    held = headers(tmp_path / "pch", held="#include <no_such_header.h>\n") / "held.h"
    with pytest.raises(VerificationFailed, match="held.h"):
        loading(held, LANGUAGE)


def slow_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A g++ that logs each PCH it makes and takes two seconds more to make it, so that concurrent requests overlap."""
    log, cxx = tmp_path / "made.log", tmp_path / "g++"
    cxx.write_text(f'#!/bin/sh\ncase "$*" in *c++-header*.gch*) echo made >> {log}; sleep 2;; esac\nexec {CXX} "$@"\n')
    cxx.chmod(0o755)
    return cxx, log


def test_threads_asking_for_the_same_pch_make_it_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cxx, log = slow_compiler(tmp_path)
    held = headers(tmp_path / "pch", held="#include <vector>\n") / "held.h"
    found: list[list[str]] = []

    def load() -> None:
        with pch.loaded(str(cxx), held, LANGUAGE) as added:
            found.append(added)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 3 and found[0] == found[1] == found[2]
    assert log.read_text().splitlines() == ["made"]
    assert capsys.readouterr().err.count("precompile held.h") == 1


def test_processes_sharing_a_cache_make_a_pch_once(tmp_path: Path, cache: Path) -> None:
    cxx, log = slow_compiler(tmp_path)
    held = headers(tmp_path / "pch", held="#include <vector>\n") / "held.h"
    script = f"from pathlib import Path\nfrom codemod.verify import pch\nwith pch.loaded({str(cxx)!r}, Path({str(held)!r}), {LANGUAGE!r}):\n    pass\n"
    runs = [
        subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    said = [run.communicate()[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], said
    assert log.read_text().splitlines() == ["made"]
    assert sum(text.count("precompile held.h") for text in said) == 1
    assert len([entry for entry in cache.glob("pch-*") if entry.is_dir()]) == 1


def test_only_the_most_recently_used_pchs_of_a_bounded_header_are_kept(tmp_path: Path, cache: Path) -> None:
    """Made with a bound of two, a header keeps its two most recently used PCHs, and any in use when another is made;
    the PCHs of other headers are left alone."""
    include = tmp_path / "include"
    held = headers(tmp_path / "pch", held="#include <state.h>\n") / "held.h"
    other = headers(tmp_path / "pch", other="#include <vector>\n") / "other.h"
    loading(other, LANGUAGE)
    flags = [*LANGUAGE, f"-I{include}"]

    def made(state: int) -> str:
        headers(include, state=f"constexpr int state = {state};\n")
        with pch.loaded(CXX, held, flags, bound=2):
            pass
        time.sleep(0.05)  # distinct times of last use
        return pch.key(CXX, held, flags)

    first, second = made(0), made(1)
    with pch.loaded(CXX, held, flags, first, bound=2):  # used again: more recently than the second
        time.sleep(0.05)
    third = made(2)  # the second goes
    with pch.loaded(CXX, held, flags, third, bound=2):  # in use while two more are made: stays
        fourth = made(3)  # the first goes
        fifth = made(4)
    kept = {entry.name for entry in cache.glob("pch-*") if (entry / "held.h.gch").is_file()}
    assert kept == {f"pch-{third}", f"pch-{fourth}", f"pch-{fifth}"}
    assert not {f"pch-{first}", f"pch-{second}"} & set(os.listdir(cache))
    assert (cache / f"pch-{pch.key(CXX, other, LANGUAGE)}" / "other.h.gch").is_file()
    assert not [name for name in os.listdir(cache) if name.startswith(".evicted-")]


def test_the_check_accepts_a_pch_of_headers_the_source_reads_alike(tmp_path: Path) -> None:
    include = headers(tmp_path / "include", wide="#pragma once\n#ifdef WIDE\ntypedef long T;\n#else\ntypedef int T;\n#endif\n")
    held = headers(tmp_path / "pch", held="#include <wide.h>\n") / "held.h"
    source = tmp_path / "plain.cpp"
    source.write_text("#include <wide.h>\nT twice(T t) { return 2 * t; }\n")
    flags = [*LANGUAGE, f"-I{include}"]
    assert pch.reads_the_same(pch.preprocessed(CXX, source, flags), pch.preprocessed(CXX, source, flags, held))


def test_the_check_refuses_a_pch_read_under_other_macros_or_adding_a_header(tmp_path: Path) -> None:
    """The source defines a macro its header reads: precompiled first, the header would be read without it. And a
    source that does not include the header would read one more with the PCH."""
    include = headers(tmp_path / "include", wide="#pragma once\n#ifdef WIDE\ntypedef long T;\n#else\ntypedef int T;\n#endif\n")
    held = headers(tmp_path / "pch", held="#include <wide.h>\n") / "held.h"
    flags = [*LANGUAGE, f"-I{include}"]
    defines = tmp_path / "defines.cpp"
    defines.write_text("#define WIDE\n#include <wide.h>\nT twice(T t) { return 2 * t; }\n")
    assert not pch.reads_the_same(pch.preprocessed(CXX, defines, flags), pch.preprocessed(CXX, defines, flags, held))
    without = tmp_path / "without.cpp"
    without.write_text("int twice(int t) { return 2 * t; }\n")
    assert not pch.reads_the_same(pch.preprocessed(CXX, without, flags), pch.preprocessed(CXX, without, flags, held))


def installed_include_flags() -> list[str]:
    torch = compiler.torch_dir()
    return ["-fsyntax-only", "-std=c++20", "-DCAFFE2_BUILD_MAIN_LIB", "-w", f"-I{torch / 'include'}", f"-I{torch / 'include/torch/csrc/api/include'}"]


def test_the_check_on_functions_h_accepts_a_reader_and_refuses_torch_assert_no_operators(tmp_path: Path) -> None:
    """A PCH of <ATen/Functions.h> (the installed one here): a source that includes it after other ATen headers reads
    the same text (glibc's typedefs that several system headers share may move between them); one that defines
    TORCH_ASSERT_NO_OPERATORS first hits Functions.h's #error without the PCH, so it cannot load one."""
    flags = installed_include_flags()
    functions = headers(tmp_path / "pch", functions="#include <ATen/Functions.h>\n") / "functions.h"
    reader = tmp_path / "reader.cpp"
    reader.write_text("#include <ATen/core/Tensor.h>\n#include <ATen/Functions.h>\nat::Tensor twice(const at::Tensor& t) { return at::add(t, t); }\n")
    assert pch.reads_the_same(pch.preprocessed(CXX, reader, flags), pch.preprocessed(CXX, reader, flags, functions))
    no_operators = tmp_path / "no_operators.cpp"
    no_operators.write_text("#define TORCH_ASSERT_NO_OPERATORS\n#include <ATen/Functions.h>\n")
    assert pch.preprocessed(CXX, no_operators, flags) is None
    assert pch.preprocessed(CXX, no_operators, flags, functions) is not None  # the PCH would hide the #error
    assert not pch.reads_the_same(pch.preprocessed(CXX, no_operators, flags), pch.preprocessed(CXX, no_operators, flags, functions))


def test_where_no_pch_pays_the_compile_check_makes_none_and_runs_no_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One file of the run reads ATen/Functions.h: fewer than GENERATED_PCH_USERS, and none kept, so no PCH is made
    and its check (g++ -E) is not run; a clean file compiles, a broken one fails at its own line."""
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
    text = "#include <ATen/Functions.h>\n\nat::Tensor twice(const at::Tensor& t) { return at::add(t, t); }\n"
    # a plan that wrote only Mine.cpp: the compile check compiles the bytes on disk
    writes_mine = dataclasses.replace(make_plan(tree, "mul"), changes=(FileChange(mine, None, text.encode()),), reaching=())
    progress.set_level(progress.VERBOSE)
    try:
        tree.path(mine).write_text(text)
        report = compile_check.check(tree, nothing_regenerated, [writes_mine])
        with pytest.raises(VerificationFailed, match=r"Mine\.cpp:3:.*no_such_function"):
            tree.path(mine).write_text(text.replace("at::add", "at::no_such_function"))
            compile_check.check(tree, nothing_regenerated, [writes_mine])
    finally:
        progress.set_level(progress.NORMAL)
    assert report.compiled == ("aten/src/ATen/native/Mine.cpp",) and not report.not_compiled
    commands = [line for line in capsys.readouterr().err.splitlines() if line.startswith("$ ")]
    compiles = [line for line in commands if " -c " in line]
    assert len(compiles) == 2 and not any("-include" in line for line in compiles)
    assert not any(" -E " in line for line in commands) and not any("precompile" in line for line in commands)
