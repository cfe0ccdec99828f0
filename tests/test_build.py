"""`codemod build`/`bench` on our target_tree/: real torchgen, real g++, real libtorch, no mocks.

The first build compiles (about 30-40 s); everything after reuses its cache.
Timings are never asserted, except that a cache hit takes under a second.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from codemod import build, plan_cpp
from codemod.errors import VerificationFailed
from codemod.tree import locate
from tests.conftest import TARGET_TREE, run_codemod


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    """A fresh build cache for this module, so the first build really compiles."""
    path = tmp_path_factory.mktemp("build-cache")
    previous = os.environ.get("CODEMOD_BUILD_CACHE")
    os.environ["CODEMOD_BUILD_CACHE"] = str(path)  # also seen by the CLI subprocesses
    yield path
    if previous is None:
        del os.environ["CODEMOD_BUILD_CACHE"]
    else:
        os.environ["CODEMOD_BUILD_CACHE"] = previous


@pytest.fixture(scope="module")
def built(cache: Path) -> build.Built:
    result = build.build(locate(TARGET_TREE), "mul")
    assert not result.cached
    return result


def test_extension_holds_the_bypass_scaffolding_verbatim_in_its_own_namespace(built: build.Built) -> None:
    capture = build.capture_for(locate(TARGET_TREE), "mul")
    source = built.source.read_text()
    assert plan_cpp.scaffolding(capture) in source
    assert "namespace codemod_ext_mul {" in source
    # the installed headers declare the structs; the extension must not define them again
    for struct in (*capture.meta_structs, *capture.native_structs):
        assert struct.text not in source


def test_bypass_agrees_with_the_dispatcher(built: build.Built) -> None:
    checked = build.run_checks(built.executable)
    assert checked.ok, checked.output
    for case in ("float32", "float64", "int64", "bool", "complex64", "broadcast", "non-contiguous",
                 "0-dim", "empty", "out= wrong dtype", "out= resize", "in-place broadcasts self"):
        assert case in checked.output
    assert "in-place broadcasts self) in-place  (both raise" in checked.output
    assert "out= wrong dtype (float inputs, int64 out)  (both raise" in checked.output
    assert checked.failed == 0 and checked.passed >= 50


def test_second_build_is_a_cache_hit_under_a_second(built: build.Built) -> None:
    started = time.perf_counter()
    again = build.build(locate(TARGET_TREE), "mul")
    elapsed = time.perf_counter() - started
    assert again.cached and again.executable == built.executable
    assert elapsed < 1.0, f"cache hit took {elapsed:.2f} s"


def test_compile_error_is_a_verification_failure_with_the_compilers_message(cache: Path) -> None:
    with pytest.raises(VerificationFailed) as raised:
        build.compile_source("int main() { return no_such_name_here; }\n", name="broken")
    assert "no_such_name_here" in str(raised.value)
    assert raised.value.exit_code == 1


def test_cli_build_and_bench_json(built: build.Built) -> None:
    result = run_codemod("build", "mul", "--tree", str(TARGET_TREE))
    assert result.returncode == 0, result.stderr
    assert "cache hit" in result.stderr and "0 failed" in result.stderr

    result = run_codemod("bench", "mul", "--tree", str(TARGET_TREE), "--json", "--no-callgrind", "--size", "2")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (row,) = report["wall"]
    assert row["numel"] == 2 and row["dispatch_ns"] > 0 and row["bypass_ns"] > 0
