"""The build cache every compile publishes into: entries keyed by a content digest, published by one rename.

`$CODEMOD_BUILD_CACHE`, else `cpp_ext/build/` of the checkout codemod runs from. Entries are never edited in
place, so concurrent codemod processes (and several checkouts pointed at one cache) share it safely.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("CODEMOD_BUILD_CACHE") or REPO / "cpp_ext" / "build")  # set but empty: the default, not "."



def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()



def cached_build(entry: str, product: str, make: Callable[[Path], None]) -> tuple[Path, bool]:
    """CACHE/ENTRY, holding PRODUCT, and whether it was there already. MAKE fills a scratch directory
    beside it, published by one rename, so a half-made entry is never seen."""
    out_dir = cache_dir() / entry
    if (out_dir / product).is_file():
        return out_dir, True
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{entry}-", dir=cache_dir(), ignore_cleanup_errors=True) as scratch:
        make(Path(scratch))
        try:
            Path(scratch).rename(out_dir)
        except OSError:  # a concurrent build published first
            if not (out_dir / product).is_file():
                raise
    return out_dir, False


def keep_failed(source: Path, name: str) -> Path:
    """Keep a source that did not compile where the user can open it."""
    kept = cache_dir() / f"{name}-failed.cpp"
    shutil.copyfile(source, kept)
    return kept
