"""The Typer app: every command's declaration (docs/design.md §4), one module per group.

Declarations only: each command gathers its options and hands the raw strings
to its work in `cli/commands/` (imported when it runs). Values are parsed
there, by `inputs`, so the typer path and the fast path (`fast.py`) share one
parser. `base.py` holds the app, the global settings (`--store`, `--actor`,
`--now`, `--json`, accepted before and after the command), `--version`, the
option types and `command`, which registers a declaration; each group
registers its commands on that app when imported, and `ledger --help` lists
them in GROUPS order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    import typer

    from ledger_cli.cli.typer_compat import Command

GROUPS = ("tasks", "inspection", "run", "store", "attempts", "operate", "schedule")


def registered_app() -> typer.Typer:
    """The Typer app with every group's commands registered on it."""
    from ledger_cli.cli import typer_compat as compat
    from ledger_cli.cli.declarations.base import app

    for group in GROUPS:
        __import__(f"{__name__}.{group}")

    def rank(info: Any) -> int:  # whoever imported a group first, help keeps GROUPS order
        return GROUPS.index(str(info.callback.__module__).rpartition(".")[2])

    compat.registered_commands(app).sort(key=rank)
    return app


def build_cli() -> Command:
    """The click group of the app (what `typer.testing.CliRunner` runs too),
    with the app's own completion classes in click's table of shells."""
    from ledger_cli.cli import completion_shells
    from ledger_cli.cli import typer_compat as compat

    cli = compat.get_command(registered_app())
    completion_shells.register()
    return cli
