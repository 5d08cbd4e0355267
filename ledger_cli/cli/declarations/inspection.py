"""Declarations of `state`, `blocked`, `list`, `prune`, `tree`, `log` and `graph`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import (
    JsonLines,
    Key,
    Queues,
    Statuses,
    command,
    flag,
    keys_arg,
    opt_key,
    option,
)


def complete_prune_status(incomplete: str) -> list[str]:
    from ledger_cli.cli import shell_completion

    return shell_completion.complete_prune_status(incomplete)


def complete_graph_format(incomplete: str) -> list[str]:
    from ledger_cli.cli import shell_completion

    return shell_completion.complete_graph_format(incomplete)


def complete_event(incomplete: str) -> list[str]:
    from ledger_cli.cli import shell_completion

    return shell_completion.complete_event(incomplete)


@command("ledger state report", "ledger --json state report | jq .Status")
def state(ctx: typer.Context, key: Key) -> None:
    """Show one record."""


@command('ledger blocked report && echo "report is stuck"')
def blocked(ctx: typer.Context, key: Key) -> None:
    """Print the blocking key and exit 0 when blocked; exit 1 when not."""


@command(
    "ledger list --status failed",
    "ledger list --jsonl | jq -r .Key",
    name="list",
    work="list:list_records",
)
def list_(
    ctx: typer.Context,
    statuses: Statuses = None,
    owner: Annotated[str | None, option("--owner", "O", "Only this owner.")] = None,
    limit: Annotated[str | None, option("--limit", "N", "At most N records.")] = None,
    jsonl: JsonLines = False,
    pruned: Annotated[bool, flag("--pruned", "List the pruned records only.")] = False,
    queue: Queues = None,
) -> None:
    """List records as a table (--json: an array, --jsonl: one per line)."""


@command("ledger prune --older-than 30d --dry-run", "ledger prune --older-than 7d --status failed")
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str, option("--older-than", "D", "Only records last updated at least D ago.")
    ],
    statuses: Annotated[
        list[str] | None,
        option("--status", "S", "completed or failed (default both).", complete_prune_status),
    ] = None,
    dry_run: Annotated[
        bool, flag("--dry-run", "Count what would be pruned; change nothing.")
    ] = False,
) -> None:
    """Prune finished records: keep their keys (admit stays idempotent), drop the rest.

    The rest includes their history lines: a `log --follow` that has not read
    them yet never prints them.
    """


@command("ledger tree", "ledger tree report")
def tree(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("Show this task's chain of needs instead.")] = None,
) -> None:
    """Why is it stuck: failures and what they block, or KEY's chain of needs."""


@command(
    "ledger log report",
    "ledger log --jsonl | tail -n 5",
    "ledger log --follow --jsonl --event ledger.completed | while read -r line; do …; done",
)
def log(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("Only this task's history.")] = None,
    jsonl: JsonLines = False,
    follow: Annotated[
        bool,
        flag(
            "--follow",
            "Print lines as they are written (polled every 100 ms), until interrupted; "
            "only the lines written from now on that are still in the history when "
            "read (prune removes a pruned record's lines).",
        ),
    ] = False,
    event: Annotated[
        list[str] | None,
        option(
            "--event",
            "NAME",
            "Only this event, such as ledger.completed (repeatable; an unknown name "
            "is a usage error that lists the names).",
            complete_event,
        ),
    ] = None,
) -> None:
    """The history of writes, oldest first."""


@command(
    "ledger graph | dot -Tsvg > graph.svg",
    "ledger graph report --format mermaid",
    "ledger --json graph | jq '.edges[] | select(.blocking)'",
)
def graph(
    ctx: typer.Context,
    keys: Annotated[
        list[str] | None,
        keys_arg(
            "KEY...",
            "Only these tasks, what they need and what needs them (a need never "
            "admitted too: missing, with what needs it; a key neither exits 3).",
        ),
    ] = None,
    fmt: Annotated[
        str,
        option(
            "--format",
            "F",
            "dot (Graphviz, the default; each `&` written `&amp;`, so Graphviz "
            "shows keys as stored), mermaid (a flowchart) or svg (drawn without "
            "Graphviz; at most 2000 tasks).",
            complete_graph_format,
        ),
    ] = "dot",
) -> None:
    """The graph of needs: each need points to the task that needs it, coloured by status."""
