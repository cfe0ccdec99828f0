"""`codemod cache`: where the build cache is, how big, by kind; `cache prune --stale | --all` (issue 28), on a
temporary cache holding one entry of each kind, some stale, as codemod publishes them and as older runs left them."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from codemod.model import cache
from tests.conftest import OUTPUT_SCHEMA, run_codemod


@pytest.fixture
def filled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache (CODEMOD_BUILD_CACHE, seen by the CLI processes too) with fresh and stale entries of each kind."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(root))
    fresh_run, _ = cache.cached_build(f"torchgen-{'1' * 20}", ".ran-clean", lambda d: (d / ".ran-clean").touch())
    fresh_build, _ = cache.cached_build(f"mul-{'2' * 20}", "harness", lambda d: [(d / name).write_text("x") for name in ("harness", "harness.cpp")])
    (root / f"harness-mul-{'3' * 20}.json").write_text(json.dumps({"entry": fresh_build.name}))
    (root / f"harness-div-{'4' * 20}.json").write_text(json.dumps({"entry": f"div-{'5' * 20}"}))  # its build is gone
    other_torch = root / f"pch-{'6' * 20}"
    other_torch.mkdir()
    (other_torch / "ATen_pch.h.gch").write_bytes(b"\0" * 100_000)
    (other_torch / cache.ENTRY_STAMP).write_text(json.dumps({"torch": "1.0.0", "python": cache.made_under()["python"]}))
    unstamped = root / f"samples-{'7' * 20}"  # made by a codemod before entries were stamped
    unstamped.mkdir()
    (unstamped / "samples.pt").write_bytes(b"\0" * 5_000)
    (root / f"capture-mul-{'8' * 20}.json").write_text("{}")
    (root / "kernels").mkdir()
    (root / "kernels" / f"{'9' * 24}.json").write_text("[]")
    (root / "mul-failed.cpp").write_text("int main() { oops }\n")
    (root / "hot-cost-add-torch-1.0.0-timed.json").write_text(json.dumps({"torch": "1.0.0"}))
    killed = root / f"torchgen-{'a' * 20}-k1ll3d_x"  # a scratch directory its run never renamed
    killed.mkdir()
    os.utime(killed, (time.time() - 3 * 24 * 3600,) * 2)
    (root / f"torchgen-{'b' * 20}-runn1ng_").mkdir()  # one being written now
    assert json.loads((fresh_run / cache.ENTRY_STAMP).read_text()) == cache.made_under()
    assert (root / f".{fresh_run.name}.lock").is_file()  # made under its lock, which is no entry
    return root


def cache_json(*args: str) -> dict:
    run = run_codemod("cache", *args, "--json")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    OUTPUT_SCHEMA.validate(document)
    return document


def test_cache_says_where_it_is_how_big_by_kind_and_what_is_stale(filled: Path) -> None:
    listed = cache_json()
    assert (listed["path"], listed["from_environment"], listed["entries"]) == (str(filled), True, 12)
    kinds = {kind["kind"]: (kind["entries"], kind["stale_entries"]) for kind in listed["kinds"]}
    assert kinds == {
        "codegen runs": (1, 0), "harnesses and extensions": (1, 0), "build records": (2, 1), "precompiled headers": (1, 1),
        "OpInfo samples": (1, 1), "captures": (1, 0), "kernel definitions": (1, 0), "sources that did not compile": (1, 1),
        "hot's per-call costs": (1, 1), "unfinished (a run was publishing it)": (2, 1),
    }
    reasons = {reason["reason"]: reason["entries"] for reason in listed["stale"]["reasons"]}
    assert reasons == {
        "a build record whose build is gone or stale": 1, "made under torch 1.0.0": 1,
        "made by a codemod that did not record what it was made under": 1, "a source kept to read its compile error": 1,
        "per-call costs measured under torch 1.0.0": 1, "left by a run that did not finish": 1,
    }
    assert listed["stale"]["entries"] == 6 and listed["bytes"] > listed["stale"]["bytes"] >= 100_000
    text = run_codemod("cache")
    assert text.returncode == 0 and text.stdout.startswith(f"build cache: {filled} (set by $CODEMOD_BUILD_CACHE)\n")
    assert "  1 entry, " in text.stdout and ": made under torch 1.0.0\n" in text.stdout
    assert text.stdout.endswith("`codemod cache prune --stale` removes them; `codemod cache prune --all` empties the cache\n")
    assert max(map(len, text.stdout.splitlines()[1:-1])) <= 100  # but the path


def test_prune_stale_keeps_what_this_install_uses_and_all_empties_the_cache(filled: Path) -> None:
    before = cache_json()
    pruned = cache_json("prune", "--stale")
    assert pruned["removed"] == {"entries": 6, "bytes": before["stale"]["bytes"]}
    assert pruned["left"]["entries"] == 6 and cache_json()["stale"]["entries"] == 0
    assert (filled / f"torchgen-{'1' * 20}").is_dir() and not (filled / f"pch-{'6' * 20}").exists()
    assert (filled / f"torchgen-{'b' * 20}-runn1ng_").is_dir()  # a run may still be writing it
    emptied = run_codemod("cache", "prune", "--all")
    assert emptied.returncode == 0 and emptied.stderr.startswith("removed 6 entries (") and "from " + str(filled) in emptied.stderr
    assert cache_json()["entries"] == 0 and not list(filled.glob(".*.lock"))  # the entries' locks go with them


@pytest.mark.parametrize("flags", [(), ("--all", "--stale")])
def test_prune_needs_one_of_all_or_stale(filled: Path, flags: tuple[str, ...]) -> None:
    run = run_codemod("cache", "prune", *flags)
    assert (run.returncode, run.stderr) == (2, "codemod: give --all or --stale, one of the two (see `codemod cache prune --help`)\n")
    assert cache_json()["entries"] == 12


def test_an_empty_or_missing_cache_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMOD_BUILD_CACHE", str(tmp_path / "none"))
    assert (cache_json()["entries"], cache_json("prune", "--all")["removed"]) == (0, {"entries": 0, "bytes": 0})
