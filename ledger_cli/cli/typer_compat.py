"""Every name the CLI takes from typer beyond its documented top level, in one place.

typer vendors click as `typer._click` (0.28 and 0.29 alike), keeps its shells'
completion classes in `typer._completion_classes` and its shell detection in
`typer._completion_shared`: private modules that a typer release may move
without notice. The rest of the package imports
them from here only, so a move breaks one module, and
`tests/interop/test_typer_compat.py` checks every name below against the installed
typer with an error that names what moved.

Supported: typer 0.28 and 0.29 (pyproject pins `typer>=0.28,<0.30`; CI runs
the CLI tests against both lines). Importing this module imports typer: only
the typer path of `app.py` and the declarations in `declarations/` do.
"""

from __future__ import annotations

from typing import Any

from typer import _click
from typer._click import shell_completion as _shell_completion
from typer._completion_classes import BashComplete, FishComplete, ZshComplete
from typer._completion_shared import _get_shell_name as detect_shell
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command

ClickException = _click.exceptions.ClickException
Context = _click.Context
Parameter = _click.Parameter
Command = _click.Command
ParameterSource = _click.core.ParameterSource
CompletionItem = _shell_completion.CompletionItem
ShellComplete = _shell_completion.ShellComplete
"""The base of the shells' completion classes (`completion_shells._WordsComplete`)."""
add_completion_class = _shell_completion.add_completion_class
"""Click's registry of shells (`_LEDGER_COMPLETE=complete_SHELL` looks the class up there)."""
resolve_context = _shell_completion._resolve_context
resolve_incomplete = _shell_completion._resolve_incomplete
"""Click's two steps of `ShellComplete.get_completions`: the context of the line's
command, then the parameter (or command) that completes the word; completion_shells.py
takes them one by one to know when a KEY argument is completed."""


def plain_argument(param: Parameter) -> None:
    """Show an argument as its metavar alone: `KEY` in the usage line (`[KEY]`
    when optional) and in the help's Arguments section, where typer 0.29
    appends its type (`KEY <str>`) and writes a required one `{KEY}`. Uses click's
    public `get_usage_pieces` and typer 0.29's `display_type_rich` (0.28 has none
    and shows the metavar alone already)."""
    if param.param_type_name != "argument" or param.metavar is None:
        return
    name = param.metavar if param.required else f"[{param.metavar}]"
    param.get_usage_pieces = lambda ctx: [name]  # type: ignore[method-assign]
    param.display_type_rich = lambda ctx: None  # type: ignore[attr-defined]


def words_left(ctx: Context) -> list[str]:
    """The words a group's parsing left for its command (`ledger --show-completion
    zsh`: `["zsh"]`), kept by click's Group in `_protected_args` and `args`."""
    return [*ctx._protected_args, *ctx.args]


def registered_commands(app: Any) -> list[Any]:
    """The app's commands in registration order (`Typer.registered_commands`,
    an undocumented attribute): `declarations` orders them for the help."""
    commands: list[Any] = app.registered_commands
    return commands


SUPPORTED = ((0, 28), (0, 29))
"""The typer lines this module is known to work with (major, minor)."""

__all__ = [
    "SUPPORTED",
    "BashComplete",
    "ClickException",
    "Command",
    "CompletionItem",
    "Context",
    "FishComplete",
    "Parameter",
    "ParameterSource",
    "ShellComplete",
    "TyperCommand",
    "TyperGroup",
    "ZshComplete",
    "add_completion_class",
    "detect_shell",
    "get_command",
    "plain_argument",
    "registered_commands",
    "resolve_context",
    "resolve_incomplete",
    "words_left",
]
