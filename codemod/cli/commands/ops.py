"""`codemod ops` and `codemod explain OP`: what the tree's ops are and what a bypass would do to one. Write nothing."""
from __future__ import annotations

from pathlib import Path

import click

from codemod.cli import catalog, report
from codemod.cli import explain as explain_step
from codemod.cli.options import OP_ARGUMENT, TREE_OPTION, run, say, wants_json
from codemod.model.tree import locate


@click.command()
@TREE_OPTION
@click.option("--bypassable", "only_bypassable", is_flag=True, help="List only the ops `bypass` can take.")
def ops(tree_root: Path, only_bypassable: bool) -> None:
    """Every op of the tree's yaml: can `bypass` take it, and if not, why."""

    as_json = wants_json()

    def action() -> None:
        statuses = catalog.catalog(locate(tree_root))
        shown = [s for s in statuses if s.bypassable or not only_bypassable]
        if as_json:
            click.echo(report.dumps(report.ops(shown)))
            return
        for status in shown:
            detail = ", ".join(status.overloads) if status.bypassable else "; ".join(filter(None, (status.reason, status.detail)))
            click.echo(f"{status.op:<40} {'yes' if status.bypassable else 'no':<4} {detail}")
        say(catalog.summary(statuses))

    run(action)


@click.command()
@OP_ARGUMENT
@TREE_OPTION
def explain(op: str, tree_root: Path) -> None:
    """OP's call path today and after each kind of bypass, and what a bypass writes by hand. Writes nothing."""

    as_json = wants_json()

    def action() -> None:
        explained = explain_step.explain(locate(tree_root), op)
        click.echo(report.dumps(report.explain(explained)) if as_json else explain_step.render(explained))

    run(action)
