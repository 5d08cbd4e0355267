"""The Typer app: every command's declaration (docs/design.md §4).

Declarations only: `command` registers each, and the command hands the raw
strings to its work in `cli/commands/`, imported when the command runs.
Values (keys, durations, integers, JSON) are parsed there, by `inputs`, so
the typer path and the fast path of `app.main` share one parser.

The global settings `--store`, `--actor`, `--now` and `--json` are accepted
before the command (`ledger --json list`) and after it (`ledger list --json`):
`build_cli` adds them to the group and to every command; the value given
after the command wins.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Annotated, Any

import typer

from ledger_cli.cli import typer_compat as compat
from ledger_cli.cli.context import ENV_ACTOR, ENV_NOW, ENV_STORE, SETTINGS_KEY, Settings
from ledger_cli.cli.typer_compat import TyperGroup

# -- global settings ---------------------------------------------------------------


def _remember(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """Keep a global setting given on the command line (the later one wins)."""
    if value is None or value is False or param.name is None:
        return value
    if ctx.get_parameter_source(param.name) != compat.ParameterSource.COMMANDLINE:
        return value
    ctx.find_root().meta.setdefault(SETTINGS_KEY, {})[param.name] = value
    return value


def _setting(*decls: str, metavar: str | None = None, help: str) -> Any:
    return typer.Option(
        *decls,
        metavar=metavar,
        help=help,
        expose_value=False,
        callback=_remember,
        show_default=False,
    )


def _global_settings(
    store: Annotated[
        str | None,
        _setting(
            "--store",
            metavar="URL",
            help=f"Store URL or path [env: {ENV_STORE}; default: the user data dir].",
        ),
    ] = None,
    actor: Annotated[
        str | None,
        _setting(
            "--actor",
            metavar="NAME",
            help=f"Who is writing, for the records and the log [env: {ENV_ACTOR}; "
            "default: user@host].",
        ),
    ] = None,
    now: Annotated[
        str | None,
        _setting(
            "--now",
            metavar="TIME",
            help=f"Use this RFC 3339 instant as the clock [env: {ENV_NOW}].",
        ),
    ] = None,
    json: Annotated[
        bool, _setting("--json", help="Machine-readable JSON output (errors included).")
    ] = False,
) -> None:
    """The global settings' declarations: never run, only turned into parameters."""


def global_params() -> list[compat.Parameter]:
    """Fresh click parameters for the global settings, built by typer itself from
    `_global_settings` (so every typer line builds them its own way)."""
    holder = typer.Typer()
    holder.command()(_global_settings)
    return [p for p in compat.get_command(holder).params if p.name in _GLOBAL_NAMES]


_GLOBAL_NAMES = ("store", "actor", "now", "json")


def _print_version(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from ledger_cli import __version__

        typer.echo(f"ledger_cli {__version__}")
        raise typer.Exit(0)


def _version_option(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print `ledger_cli X.Y.Z` and exit.",
            is_eager=True,
            expose_value=False,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """The group's --version declaration: never run, only turned into a parameter."""


def version_param() -> compat.Parameter:
    holder = typer.Typer()
    holder.command()(_version_option)
    (param,) = [p for p in compat.get_command(holder).params if p.name == "version"]
    return param


COMPLETION_REQUEST = "ledger.completion_request"
"""Where `--show-completion`/`--install-completion` is noted (ctx.meta) for `parse_args`."""


def _request_completion(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    if value and not ctx.resilient_parsing and param.opts:
        ctx.meta[COMPLETION_REQUEST] = param.opts[0]


def _completion_options(
    install_completion: Annotated[
        bool,
        typer.Option(
            "--install-completion",
            help="Install completion for SHELL (bash, zsh, fish; default: this shell) and exit.",
            expose_value=False,
            callback=_request_completion,
        ),
    ] = False,
    show_completion: Annotated[
        bool,
        typer.Option(
            "--show-completion",
            help="Print the completion script for SHELL (bash, zsh, fish; default: this "
            "shell) and exit.",
            expose_value=False,
            callback=_request_completion,
        ),
    ] = False,
) -> None:
    """The group's completion options: never run, only turned into parameters.
    Typer's own take no SHELL (they detect the shell), so the app has these:
    the SHELL is the word after the option, which the group's parsing leaves
    for the command (`LedgerGroup.parse_args` takes it)."""


def completion_params() -> list[compat.Parameter]:
    holder = typer.Typer(add_completion=False)
    holder.command()(_completion_options)
    params = compat.get_command(holder).params
    for param in params:
        _show_shell_in_help(param)
    return params


def _show_shell_in_help(param: compat.Parameter) -> None:
    """`--show-completion [SHELL]` in the help (click's public `get_help_record`)."""
    plain = param.get_help_record

    def with_shell(ctx: compat.Context) -> tuple[str, str] | None:
        record = plain(ctx)
        return (f"{record[0]} [SHELL]", record[1]) if record else None

    param.get_help_record = with_shell  # type: ignore[method-assign]


class LedgerGroup(TyperGroup):
    """The app's group: puts the global settings on itself and on every command."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.params[:0] = [*global_params(), version_param()]
        self.params.extend(completion_params())
        for command in self.commands.values():
            command.params.extend(global_params())
            for param in command.params:
                compat.plain_argument(param)

    def parse_args(self, ctx: compat.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        option = ctx.meta.pop(COMPLETION_REQUEST, None)
        if option is not None:
            from ledger_cli.cli import shell_completion
            from ledger_cli.cli.execute import execute

            settings = Settings.from_env(**ctx.meta.get(SETTINGS_KEY, {}))
            words = compat.words_left(ctx)
            fn = shell_completion.completion_option
            raise typer.Exit(execute(settings, fn, option=option, words=words))
        return rest


app = typer.Typer(
    name="ledger",
    help=(
        "A durable task-admission ledger for the shell: idempotent admission, "
        "fenced leases, dependency blocking."
    ),
    cls=LedgerGroup,
    add_completion=False,  # LedgerGroup has its own completion options
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


WORK_VALUES = "ledger.work_values"
"""Where a command class puts values of its own for the work (ctx.meta): `run`'s CMD."""


WORK: dict[str, str] = {}
"""Each registered command's work, "module:function" below `cli/` (cli/fastgen.py
writes the fast path's table from it)."""


def command(
    *example_lines: str, name: str | None = None, work: str | None = None, cls: Any = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a declaration as the command NAME (by default the function's name).

    The declaration's parameters after `ctx` are the command's arguments and
    options, its docstring the help, EXAMPLE_LINES the closing examples; its body
    is never run. The command hands the values, by parameter name, to WORK
    ("module:function" in `cli/commands/`, by default NAME:NAME), imported when
    the command runs, through `execute`; a non-zero code is the exit code.
    """

    def register(declaration: Callable[..., None]) -> Callable[..., None]:
        command_name = name or declaration.__name__
        module, _, function = (work or f"{command_name}:{command_name}").partition(":")
        WORK[command_name] = f"commands.{module}:{function}"

        @functools.wraps(declaration)
        def run_work(ctx: typer.Context, **values: Any) -> None:
            from ledger_cli.cli.execute import execute

            fn = getattr(importlib.import_module(f"ledger_cli.cli.commands.{module}"), function)
            settings = Settings.from_env(**ctx.find_root().meta.get(SETTINGS_KEY, {}))
            code = execute(settings, fn, **values, **ctx.meta.get(WORK_VALUES, {}))
            if code:
                raise typer.Exit(code)

        app.command(command_name, cls=cls, epilog=examples(*example_lines))(run_work)
        return declaration

    return register


def examples(*lines: str) -> str:
    """A command's help epilog: its examples, each line kept as written (click's
    `\\b` keeps the paragraph from being re-wrapped)."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


# -- option types ------------------------------------------------------------------


def complete_key(ctx: typer.Context, incomplete: str) -> list[str]:
    """Keys from the store on the line being completed (shell_completion.py)."""
    from ledger_cli.cli import shell_completion

    return shell_completion.complete_key(ctx, incomplete)


def complete_status(incomplete: str) -> list[str]:
    from ledger_cli.cli import shell_completion

    return shell_completion.complete_status(incomplete)


def option(
    name: str, metavar: str, help: str, complete: Callable[..., list[str]] | None = None
) -> Any:
    """An option taking a value, METAVAR in the help (repeatable when its type is a list)."""
    return typer.Option(name, metavar=metavar, help=help, autocompletion=complete)


def flag(name: str, help: str) -> Any:
    return typer.Option(name, help=help)


def opt_key(help: str) -> Any:
    """An optional KEY argument (shown `[KEY]` in the usage line)."""
    return typer.Argument(metavar="KEY", help=help, show_default=False, autocompletion=complete_key)


def keys_arg(metavar: str, help: str) -> Any:
    """Any number of KEY arguments, each completed from the store."""
    return typer.Argument(
        metavar=metavar, help=help, show_default=False, autocompletion=complete_key
    )


Key = Annotated[
    str,
    typer.Argument(
        metavar="KEY", help="The task's key.", show_default=False, autocompletion=complete_key
    ),
]
NextKey = Annotated[str | None, opt_key("The task's key (none with --next).")]
Owner = Annotated[str, option("--owner", "O", "Who holds the lease.")]
Lease = Annotated[str, option("--lease", "D", "Lease length: 90s, 5m, 1h30m, 2d, seconds.")]
Fence = Annotated[str, option("--fence", "F", "The fence from the claim.")]
Next = Annotated[bool, flag("--next", "Claim the oldest ready task.")]
Wait = Annotated[str | None, option("--wait", "D", "With --next: poll up to D for a ready task.")]
GiveUp = Annotated[
    str | None,
    option(
        "--give-up-after",
        "D",
        "With --wait or --drain: ride out a store outage while claiming (--drain: between "
        "tasks too) for up to D, then exit 9 (5m). A claimed task's renewals and outcome "
        "are tried again until its lease runs out instead.",
    ),
]
ClaimGiveUp = Annotated[
    str | None,
    option(
        "--give-up-after",
        "D",
        "With --wait: ride out a store outage while waiting for up to D, then exit 9 (5m).",
    ),
]
Queues = Annotated[
    list[str] | None,
    option("--queue", "Q", "Only the queue(s) Q (a,b; repeatable); default: every queue."),
]
JsonLines = Annotated[bool, flag("--jsonl", "One JSON object per line.")]
Statuses = Annotated[
    list[str] | None, option("--status", "S", "Only this status (repeatable).", complete_status)
]
