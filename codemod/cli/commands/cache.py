"""`codemod cache` and `codemod cache prune`: where the build cache is, how big, by kind, and emptying it."""
from __future__ import annotations

import os

import click

from codemod.cli import report
from codemod.cli.group import CommandGroup
from codemod.cli.options import run, say, wants_json
from codemod.model import cache, cache_entries


@click.group("cache", cls=CommandGroup, invoke_without_command=True)
def cache_command() -> None:
    """Where the build cache is, how big, what it holds by kind and how much of it is stale; `cache prune` empties it."""
    if click.get_current_context().invoked_subcommand is not None:
        return
    as_json = wants_json()

    def action() -> None:
        found = cache_entries.entries()
        if as_json:
            click.echo(report.dumps(report.cache(_where(), found, cache.made_under())))
            return
        click.echo(_listing(found))

    run(action)


@cache_command.command()
@click.option("--all", "everything", is_flag=True, help="Remove every entry: the cache is made again as commands need it.")
@click.option("--stale", is_flag=True, help="Remove what this install will not use again (`codemod cache` says what).")
def prune(everything: bool, stale: bool) -> None:
    """Remove the build cache's entries: --all of them, or the --stale ones; run it while no other codemod does."""
    if everything == stale:
        raise click.UsageError("give --all or --stale, one of the two")
    as_json = wants_json()

    def action() -> None:
        found = cache_entries.entries()
        removed = found if everything else [entry for entry in found if entry.stale]
        cache_entries.prune(removed)
        left = cache_entries.entries()
        say(f"removed {len(removed)} entries ({_size(removed)}) from {cache.cache_dir()}; {len(left)} left ({_size(left)})")
        if as_json:
            click.echo(report.dumps(report.cache_prune(_where(), "all" if everything else "stale", removed, left)))

    run(action)


def _where() -> dict:
    return {"path": str(cache.cache_dir()), "from_environment": bool(os.environ.get("CODEMOD_BUILD_CACHE"))}


def _listing(found: list[cache_entries.Entry]) -> str:
    where = _where()
    chosen = "set by $CODEMOD_BUILD_CACHE" if where["from_environment"] else "the default; set CODEMOD_BUILD_CACHE to move it"
    kinds = sorted({entry.kind for entry in found}, key=lambda kind: -sum(e.bytes for e in found if e.kind == kind))
    width = max([len("kind"), *map(len, kinds)])
    lines = [f"build cache: {where['path']} ({chosen})", f"{_size(found)} in {len(found)} entries",
             f"{'kind':<{width}}  {'entries':>7}  {'size':>9}  {'stale':>9}"]
    for kind in kinds:
        of_kind = [entry for entry in found if entry.kind == kind]
        lines.append(f"{kind:<{width}}  {len(of_kind):>7}  {_size(of_kind):>9}  {_size([e for e in of_kind if e.stale]):>9}")
    stale = [entry for entry in found if entry.stale]
    made = cache.made_under()
    lines.append(f"stale: {len(stale)} entries, {_size(stale)}, which this install (torch {made['torch']}, Python "
                 f"{made['python']}) will not use again:")
    for reason in sorted({entry.stale for entry in stale}, key=lambda why: -sum(e.bytes for e in stale if e.stale == why)):
        of_reason = [entry for entry in stale if entry.stale == reason]
        lines.append(f"  {len(of_reason)} {'entry' if len(of_reason) == 1 else 'entries'}, {_size(of_reason)}: {reason}")
    lines.append("`codemod cache prune --stale` removes them; `codemod cache prune --all` empties the cache")
    return "\n".join(lines)


_UNITS = (("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


def _size(found: list[cache_entries.Entry]) -> str:
    size = sum(entry.bytes for entry in found)
    return next((f"{size / scale:,.1f} {unit}" for unit, scale in _UNITS if size >= scale), f"{size} B")
