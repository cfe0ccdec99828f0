"""`codemod tree from-torch DEST`: a PyTorch-layout tree from the installed torch (or another release's torchgen)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import click

from codemod.apply import journal
from codemod.capture import fromtorch
from codemod.cli import report
from codemod.cli.group import CommandGroup
from codemod.cli.options import run, say, wants_json
from codemod.model.tree import STATE_DIR


@click.group(cls=CommandGroup)
def tree() -> None:
    """Trees to run codemod on."""


@tree.command("from-torch")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--sources", type=click.Path(file_okay=False, path_type=Path), default=fromtorch.REPO_TARGET_TREE, show_default=True,
    help="The native .cpp sources and callers to add (the wheel ships none), taken as they were before the bypasses "
    "codemod journaled in them (reverted in a scratch copy).",
)
@click.option(
    "--torchgen", "torchgen_from", type=click.Path(exists=True, path_type=Path), default=None,
    help="Take torchgen and its packaged inputs from this torch .whl (pip download --no-deps torch==X) "
    "or torchgen directory instead of the installed torch.",
)
def from_torch(dest: Path, sources: Path, torchgen_from: Path | None) -> None:
    """Write a PyTorch-layout tree at DEST from the installed torch 2.13.0 (or --torchgen's release): its yaml,
    templates, torchgen and autograd codegen, plus the native sources of SOURCES."""

    as_json = wants_json()

    def action() -> None:
        # a tree codemod changed (the README's first command leaves target_tree/ bypassed) gives its sources as they
        # were before any bypass: from a scratch copy with its bypasses reverted
        with tempfile.TemporaryDirectory(prefix="codemod-sources-") as scratch:
            changed = (sources / STATE_DIR).exists()
            fromtorch.write_tree_from_torch(dest, journal.pristine_copy(sources, Path(scratch) / "sources") if changed else sources, torchgen_from)
        origin = torchgen_from or "the installed torch"
        say(f"wrote a PyTorch-layout tree from {origin} at {dest} (native sources from {sources})")
        if as_json:
            click.echo(report.dumps(report.tree_from_torch(dest, torchgen_from, sources)))

    run(action)
