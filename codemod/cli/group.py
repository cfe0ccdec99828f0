"""How `codemod` and its command families take their command line: the global options wherever they stand, a usage
error said in one line, and commands whose modules are imported only when they run.

Light on purpose: `codemod --help` imports this module, click and report.py (a usage error's JSON object), and no
command's module."""
from __future__ import annotations

import difflib
import errno
import importlib
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NoReturn

import click
from click.shell_completion import CompletionItem

from codemod.cli import report


def complain(message: str, json_command: str | None, exit_code: int) -> None:
    """An error, whatever -q: one line on stderr, and the JSON error object on stdout for a --json command."""
    click.echo(f"codemod: {message}", err=True)
    if json_command is not None:
        click.echo(report.dumps(report.error(json_command, message, exit_code)))


class CommandGroup(click.Group):
    """`codemod` and its command families. The root's options are global: taken before or after the command
    (`global_options_first`), and each command's help says so. A usage error (an unknown command or option, a
    missing or bad argument) is said like every other error: one line, `codemod: what (the fix)`, exit 2, instead of
    click's usage, hint and error lines; with --json on the line, the JSON error object too."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        ctx.find_root().meta[_INVOKED] = f"{ctx.command_path} {args[0]}"  # loading it may fail: boundary.one_line names it
        name, command, rest = super().resolve_command(ctx, args)
        ctx.find_root().meta[_INVOKED] = f"{ctx.command_path} {name}"  # the parser's errors do not all carry their command
        return name, command, rest

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None and command.epilog is None:
            command.epilog = _global_options_said(ctx.find_root())
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            args = global_options_first(ctx, args)
            ctx.meta[_ARGS] = list(args)
        return super().parse_args(ctx, args)

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as error:
            if parent is not None:  # a family's (`tree`): said in the root's invoke, as every other one
                raise
            _usage_error(error, list(args), info_name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            if ctx.parent is not None:
                raise
            _usage_error(error, ctx.meta.get(_ARGS, []), ctx.meta.get(_INVOKED, ctx.command_path))
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own ways out: it says them
        except Exception as error:  # noqa: BLE001  (the one boundary: no traceback reaches a user)
            if ctx.parent is not None or (isinstance(error, OSError) and error.errno == errno.EPIPE):
                raise  # a reader that left: click's, and pipes.py's, to handle
            _internal_error(error, ctx)


_ARGS, _INVOKED = "codemod.args", "codemod.invoked"
TREE_STATE = "codemod.tree_state"  # (the command's tree root, boundary.snapshot of its journals at the start)


def _internal_error(error: Exception, ctx: click.Context) -> NoReturn:
    """An exception no command expected: one line (what failed, the tree's state, the log keeping the traceback),
    the JSON error object too with --json, and exit EXIT_INTERNAL."""
    from codemod.cli import boundary  # the error path only: `codemod --help` stays light
    from codemod.model.errors import EXIT_INTERNAL

    invoked = ctx.meta.get(_INVOKED, ctx.command_path)
    root, before = ctx.meta.get(TREE_STATE, (None, None))
    message = boundary.one_line(error, invoked, root, before)
    complain(message, (invoked.partition(" ")[2] or invoked) if "--json" in ctx.meta.get(_ARGS, []) else None, EXIT_INTERNAL)
    sys.exit(EXIT_INTERNAL)


def global_options_first(ctx: click.Context, args: list[str]) -> list[str]:
    """ARGS with the root's options (-q, -v, --json, --color) moved in front of the command from wherever they stand,
    so every command takes them after its name too: `codemod revert mul -q` is `codemod -q revert mul`. Left where
    they are: everything after `--` (`hot SCRIPT -- -v`: the script's own -v), and an option's value that looks like
    one of them (`--patch -q`: a file named -q)."""
    root = ctx.command
    global_options = _value_taking(root.params)
    command, options = root, global_options
    front: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            rest += args[index:]
            break
        name, inline_value = (word.partition("=")[0], "=" in word) if word.startswith("--") else (word, False)
        if name in global_options or _short_flags_of(word, global_options):
            taken, takes_value = front, global_options.get(name, False)
        elif word.startswith("-") and word != "-":
            taken, takes_value = rest, options.get(name, False)
        else:
            rest.append(word)
            index += 1
            if isinstance(command, click.Group):  # WORD names a command (or family) whose options follow
                command = command.get_command(ctx, word)
                if command is None:  # click says so
                    rest += args[index:]
                    break
                options = _value_taking(command.params)
            continue
        width = 2 if takes_value and not inline_value else 1
        if taken is front and index + width > len(args) and not ctx.resilient_parsing:  # in front of the command it would
            raise click.BadOptionUsage(name, f"option '{name}' requires an argument", ctx)  # take its name as the value
        taken += args[index:index + width]
        index += width
    return front + rest


def _value_taking(params: list[click.Parameter]) -> dict[str, bool]:
    """Each option name of PARAMS (-q, --quiet, ...), and whether a value follows it."""
    return {
        name: not (param.is_flag or param.count)
        for param in params if isinstance(param, click.Option) for name in (*param.opts, *param.secondary_opts)
    }


def _short_flags_of(word: str, options: dict[str, bool]) -> bool:
    """Is WORD a cluster of OPTIONS' short flags (`-qv`)?"""
    return len(word) > 2 and word[0] == "-" and word[1] != "-" and all(options.get(f"-{letter}") is False for letter in word[1:])


def _option_names(ctx: click.Context) -> list[str]:
    return [name for param in ctx.command.get_params(ctx) if isinstance(param, click.Option) for name in (*param.opts, *param.secondary_opts)]


def _global_options_said(root: click.Context) -> str:
    """The line each command's help ends with: the global options it takes too."""
    options = [param for param in root.command.params if isinstance(param, click.Option)]
    names = ", ".join(option.opts[0] + (f" {option.metavar}" if option.metavar else "") for option in options)
    return f"Global options, before or after the command: {names} (see `{root.info_name} --help`)."


def _usage_error(error: click.UsageError, args: list[str], invoked: str) -> NoReturn:
    """Say ERROR in one line and exit 2; INVOKED: the command path, when ERROR does not carry its own."""
    if isinstance(error, click.exceptions.NoArgsIsHelpError):  # a bare `codemod`: its help is the answer
        raise error
    command = error.ctx.command_path if error.ctx is not None else invoked
    close = getattr(error, "possibilities", None) or []
    if isinstance(error, click.NoSuchOption) and error.ctx is not None:  # a global option mistyped after the command, too
        names = dict.fromkeys(_option_names(error.ctx) + _option_names(error.ctx.find_root()))
        close = difflib.get_close_matches(error.option_name, names, n=2)
    said = error.message if isinstance(error, (click.NoSuchOption, click.exceptions.NoSuchCommand)) else error.format_message()
    what = said[:1].lower() + said[1:].removesuffix(".")
    suggestion = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    complain(f"{what} ({suggestion}see `{command} --help`)", (command.partition(" ")[2] or command) if "--json" in args else None, error.exit_code)
    sys.exit(error.exit_code)


@dataclass(frozen=True)
class LazyCommand:
    """A command by where it is defined ("package.module:attribute") and the line `codemod --help` shows for it."""

    target: str
    short_help: str

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


class LazyCommands(Mapping[str, click.Command]):
    """Command name -> command, each imported on first use: click looks commands up, lists and suggests them by
    name, so a command's module (and the libraries it needs: libcst, torch, the compilers' helpers) is imported
    only when that command runs or its own help or completion is asked for."""

    def __init__(self, commands: dict[str, LazyCommand]) -> None:
        self.lazy = commands
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            self._loaded[name] = self.lazy[name].load()
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self.lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.lazy)

    def __len__(self) -> int:
        return len(self.lazy)


class LazyCommandGroup(CommandGroup):
    """`codemod` itself: its commands are LazyCommands, and its help and the completion of a command name say each
    one's short help without importing any."""

    commands: LazyCommands

    def __init__(self, *args, lazy_commands: dict[str, LazyCommand], **kwargs) -> None:
        super().__init__(*args, commands=LazyCommands(lazy_commands), **kwargs)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, self.commands.lazy[name].short_help) for name in self.list_commands(ctx)])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        named = [CompletionItem(name, help=self.commands.lazy[name].short_help)
                 for name in self.list_commands(ctx) if name.startswith(incomplete)]
        return named + click.Command.shell_complete(self, ctx, incomplete)  # the options (click.Group's would load every command)
