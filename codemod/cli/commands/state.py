"""`codemod status` and `codemod recover`: what the tree's journals and transaction log say."""
from __future__ import annotations

from pathlib import Path

import click

from codemod.apply import journal, lock, transaction, unjournaled
from codemod.cli import report
from codemod.cli.options import TREE_OPTION, run, say, wants_json
from codemod.model.tree import locate
from codemod.plan import callers


@click.command()
@TREE_OPTION
def status(tree_root: Path) -> None:
    """Which ops are bypassed, and whether their files still hold what the bypass wrote."""

    as_json = wants_json()

    def action() -> None:
        tree = locate(tree_root)
        everything = journal.bypassed(tree)
        journals = [(entry, entry.mode, journal.changed_since(tree, entry, everything)) for entry in everything]
        unrecorded = {op: where for op, where in unjournaled.markers(tree).items() if op not in {j.op for j in everything}}
        show = say if as_json else click.echo  # the answer goes to stdout, unless the JSON object does
        if not journals and not unrecorded:
            show(f"no op is bypassed in {tree.root}")
        for op, where in unrecorded.items():
            show(unjournaled.how_to_undo(tree, op, where))
        for entry, mode, changed in journals:
            state = f"changed since: {', '.join(changed)}" if changed else "matches the journal"
            command = f"bypass {entry.op}" + (" --guarded" if mode == "guarded" else "")
            show(f"{entry.op} ({', '.join(entry.overloads)}): {mode} (`{command}`), {len(entry.files)} files, {state}")
            if mode == "plain" and entry.capture is not None:
                for reference in callers.still_reaching(tree, entry.capture):
                    verdict = "may no longer compile there (g++ judges it)" if reference.judged_by_compile else "the tree no longer compiles there"
                    show(f"  {verdict}: {reference}")
        for stray in transaction.strays(tree.root):
            show(f"{stray}: a temporary file a killed run left; `codemod recover --tree {tree.root}` removes it")
        if as_json:
            click.echo(report.dumps(report.status(tree.root, journals)))

    run(action)


@click.command()
@TREE_OPTION
@click.option("--discard", is_flag=True,
              help="Drop a transaction log that cannot be replayed (unreadable), after restoring the tree from version control.")
def recover(tree_root: Path, discard: bool) -> None:
    """Finish a bypass or revert that was killed half-way (or drop it if it had not committed)."""

    as_json = wants_json()

    def action() -> None:
        tree = locate(tree_root)
        with lock.held(tree):
            if discard:
                dropped = transaction.discard(tree.root)
                say(f"discarded {dropped}: it could not be replayed" if dropped else f"no transaction log in {tree.root}")
                if as_json:
                    click.echo(report.dumps(report.recover(tree.root, None, str(dropped) if dropped else None)))
                return
            finished = transaction.recover(tree.root)
        say(f"recovered: finished `codemod {finished.command}`" if finished else f"nothing to recover in {tree.root}")
        if as_json:
            click.echo(report.dumps(report.recover(tree.root, finished.command if finished else None)))

    run(action, finishes_transactions=True)
