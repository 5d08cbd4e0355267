"""Declarations of `state`, `blocked`, `list`, `prune`, `tree`, `log` and `graph`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import (
    JsonLines,
    Key,
    Queues,
    Statuses,
    app,
    dispatch,
    examples,
    keys_arg,
    many,
    opt_key,
)


@app.command(epilog=examples("ledger state report", "ledger --json state report | jq .Status"))
def state(ctx: typer.Context, key: Key) -> None:
    """Show one record."""
    from ledger_cli.cli.commands.state import state as work

    dispatch(ctx, work, key=key)


@app.command(epilog=examples('ledger blocked report && echo "report is stuck"'))
def blocked(ctx: typer.Context, key: Key) -> None:
    """Print the blocking key and exit 0 when blocked; exit 1 when not."""
    from ledger_cli.cli.commands.blocked import blocked as work

    dispatch(ctx, work, key=key)


@app.command(
    "list", epilog=examples("ledger list --status failed", "ledger list --jsonl | jq -r .Key")
)
def list_(
    ctx: typer.Context,
    status: Statuses = None,
    owner: Annotated[
        str | None, typer.Option("--owner", metavar="O", help="Only this owner.")
    ] = None,
    limit: Annotated[
        str | None, typer.Option("--limit", metavar="N", help="At most N records.")
    ] = None,
    jsonl: JsonLines = False,
    pruned: Annotated[bool, typer.Option("--pruned", help="List the pruned records only.")] = False,
    queue: Queues = None,
) -> None:
    """List records as a table (--json: an array, --jsonl: one per line)."""
    from ledger_cli.cli.commands.list import list_records as work

    dispatch(
        ctx,
        work,
        statuses=status,
        owner=owner,
        limit=limit,
        jsonl=jsonl,
        pruned=pruned,
        queue=queue,
    )


@app.command(
    epilog=examples(
        "ledger prune --older-than 30d --dry-run", "ledger prune --older-than 7d --status failed"
    )
)
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str,
        typer.Option("--older-than", metavar="D", help="Only records last updated at least D ago."),
    ],
    status: Annotated[
        list[str] | None, many("--status", "S", "completed or failed (default both).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be pruned; change nothing.")
    ] = False,
) -> None:
    """Prune finished records: keep their keys (admit stays idempotent), drop the rest."""
    from ledger_cli.cli.commands.prune import prune as work

    dispatch(ctx, work, older_than=older_than, statuses=status, dry_run=dry_run)


@app.command(epilog=examples("ledger tree", "ledger tree report"))
def tree(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("Show this task's chain of needs instead.")] = None,
) -> None:
    """Why is it stuck: failures and what they block, or KEY's chain of needs."""
    from ledger_cli.cli.commands.tree import tree as work

    dispatch(ctx, work, key=key)


@app.command(
    epilog=examples(
        "ledger log report",
        "ledger log --jsonl | tail -n 5",
        "ledger log --follow --jsonl --event ledger.completed | while read -r line; do …; done",
    )
)
def log(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("Only this task's history.")] = None,
    jsonl: JsonLines = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Print lines as they are written (polled every 100 ms), until interrupted; "
            "only the lines written from now on.",
        ),
    ] = False,
    event: Annotated[
        list[str] | None,
        many("--event", "NAME", "Only this event, such as ledger.completed (repeatable)."),
    ] = None,
) -> None:
    """The history of writes, oldest first."""
    from ledger_cli.cli.commands.log import log as work

    dispatch(ctx, work, key=key, jsonl=jsonl, follow=follow, event=event)


@app.command(
    epilog=examples(
        "ledger graph | dot -Tsvg > graph.svg",
        "ledger graph report --format mermaid",
        "ledger --json graph | jq '.edges[] | select(.blocking)'",
    )
)
def graph(
    ctx: typer.Context,
    keys: Annotated[
        list[str] | None,
        keys_arg("KEY...", "Only these tasks, what they need and what needs them."),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="F",
            help="dot (Graphviz, the default), mermaid (a flowchart) or svg (drawn without "
            "Graphviz; at most 2000 tasks).",
        ),
    ] = "dot",
) -> None:
    """The graph of needs: each need points to the task that needs it, coloured by status."""
    from ledger_cli.cli.commands.graph import graph as work

    dispatch(ctx, work, keys=keys or [], fmt=fmt)
