"""The one state of several ops bypassed over an earlier bypass in the other mode that the suite verifies in full:
guarded mul (the tutorial's last state), then, plain and in one command, div (two structured groups) and the
signature class drawn this session (every class under --sample-all).

Three tests reach it, each on its own copy of target_tree/: test_slim_compile.py (what is compiled, one full tree
for the ops), test_any_order.py (the reverts in another order) and test_signatures.py (the class's own checks). The
copies hold the same bytes, so the build cache shares the compiles and the state is verified once per session.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests import sampling
from tests.conftest import run_codemod

# Each signature class's op and the source of ours that defines its kernels.
SIGNATURE_OPS = {
    "gelu": "Activation.cpp",
    "scatter": "TensorAdvancedIndexing.cpp",
    "topk": "Sorting.cpp",
    "nll_loss_forward": "LossNLL.cpp",
    "clamp": "TensorCompare.cpp",
    "index_add": "TensorAdvancedIndexing.cpp",
}
CLASSES = tuple(SIGNATURE_OPS)
# A population is drawn from one stream of the session's seed, so `sampling.parametrize(..., CLASSES, 1)` draws these.
DRAWN_CLASS = tuple(sampling.draw(CLASSES, 1))
PLAIN_OPS = ("div", *DRAWN_CLASS)


def bypass_guarded_mul(tree: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """The earlier bypass, in TREE (a copy of target_tree/); it passed."""
    guarded = run_codemod("bypass", "mul", "--guarded", *flags, "--tree", str(tree))
    assert guarded.returncode == 0, guarded.stderr
    return guarded


def bypass_plain_ops(tree: Path) -> subprocess.CompletedProcess[str]:
    """PLAIN_OPS in one command, in TREE once bypass_guarded_mul ran; it passed."""
    plain = run_codemod("bypass", *PLAIN_OPS, "--tree", str(tree))
    assert plain.returncode == 0, plain.stderr
    return plain
