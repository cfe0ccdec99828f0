"""A longer stack than tests/test_any_order.py runs, with its helpers (the functions `bypass --no-build --no-verify`
and `revert` call). Figures for a person; nothing here asserts a time. (Every ordered pair in every pair of modes, the
test's sampled property, runs in full under `python benchmarks/exhaustive.py tests/test_any_order.py`.)

    python benchmarks/any_order_stack.py [SEED] [ORDERS] [EDITS]
        The largest stack: all of target_tree/'s bypassable ops, each plain or guarded at random, bypassed in a random
        order with the real planner (torchgen on every op) and user edits between bypasses, then reverted in ORDERS
        random orders (one to three ops per revert); every order must end byte-identical (files, modes, symlinks,
        directories) to target_tree/ plus the user edits.
"""
from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from codemod.model.tree import NATIVE_FUNCTIONS, locate
from tests.test_any_order import (
    OPS,
    REAL_YAML,
    bypass,
    free_lines,
    prepared_copy,
    quiet_lines,
    revert,
    state,
    user_edit,
)


def stack(seed: int, orders: int, edits_wanted: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="codemod-stack-") as scratch:
        pristine = prepared_copy(Path(scratch) / "pristine")
        quiet = quiet_lines(pristine)
        root = Path(scratch) / "tree"
        shutil.copytree(pristine, root, symlinks=True)
        tree = locate(root)
        order = rng.sample(OPS, len(OPS))
        modes = {op: rng.random() < 0.5 for op in order}
        edit_after = sorted(rng.randrange(len(order) + 1) for _ in range(edits_wanted))
        edits, start = [], time.monotonic()
        for done, op in enumerate([*order, None]):
            for _ in range(edit_after.count(done)):
                edits.append(user_edit(root, *rng.choice(free_lines(quiet, edits)), len(edits)))
            if op is not None:
                bypass(tree, op, modes[op])
        print(f"bypassed {', '.join(op + (' (guarded)' if modes[op] else '') for op in order)} "
              f"with {len(edits)} user edits: {time.monotonic() - start:.1f} s")
        expected = state(pristine)
        for path, line, comment in edits:
            key = REAL_YAML if path == NATIVE_FUNCTIONS else path
            kind, data, mode = expected[key]
            expected[key] = (kind, data.replace(line, comment + line), mode)
        bypassed = Path(scratch) / "bypassed"
        shutil.copytree(root, bypassed, symlinks=True)
        for _ in range(orders):
            shutil.rmtree(root)
            shutil.copytree(bypassed, root, symlinks=True)
            reverts, batches, start = rng.sample(order, len(order)), [], time.monotonic()
            while reverts:
                size = rng.randint(1, 3)
                batches.append(reverts[:size])
                revert(tree, *reverts[:size])
                reverts = reverts[size:]
            same = state(root) == expected
            print(f"revert {' | '.join(' '.join(b) for b in batches)}: {time.monotonic() - start:.1f} s, "
                  f"{'byte-identical' if same else 'DIFFERENT'}")
            if not same:
                sys.exit(1)


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:]]
    stack(*(arguments + [1, 6, 6][len(arguments):]))
