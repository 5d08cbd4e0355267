"""Declarations of the operating commands (docs/design.md §6.2, §6.3, §6.5, §6.6).

`retry`, `cancel`, `stats`, `watch`, `serve`: registered on the app of `base.py` when
`declarations.registered_app` imports this group.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import (
    Key,
    Queues,
    command,
    complete_status,
    flag,
    option,
)

StatsQueues = Annotated[
    list[str] | None,
    option(
        "--queue",
        "Q",
        "Only the queue(s) Q (a,b; repeatable), with a row each in the table. Without "
        "it, --json and --prometheus give every queue in use and the table none.",
    ),
]


def complete_watch_status(incomplete: str) -> list[str]:
    """The statuses `watch --status` takes: not completed (exit 2)."""
    return [s for s in complete_status(incomplete) if s != "completed"]


WatchStatuses = Annotated[
    list[str] | None,
    option(
        "--status",
        "S",
        "Only this status: pending, claimed, blocked, or failed (those blocking"
        " a task); repeatable. Not completed (exit 2).",
        complete_watch_status,
    ),
]
Reason = Annotated[str | None, option("--reason", "TEXT", "Why: kept in the history (ledger log).")]


@command('ledger retry load --reason "upstream fixed"')
def retry(ctx: typer.Context, key: Key, reason: Reason = None) -> None:
    """Reopen a failed task and un-block what its failure blocked."""


@command('ledger cancel report --reason "superseded"')
def cancel(ctx: typer.Context, key: Key, reason: Reason = None) -> None:
    """Fail a pending, claimed or blocked task without its lease (the holder is fenced off)."""


@command(
    "ledger stats",
    "ledger stats --prometheus -o /var/lib/node_exporter/ledger.prom",
    "ledger stats --queue db,mail",
)
def stats(
    ctx: typer.Context,
    prometheus: Annotated[
        bool, flag("--prometheus", "The Prometheus text exposition format.")
    ] = False,
    out: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            metavar="FILE",
            help="Write to FILE: a file is replaced atomically, "
            "a symlink followed, a FIFO written in place.",
        ),
    ] = None,
    queue: StatsQueues = None,
) -> None:
    """Counts by status, ready tasks, expired leases, the oldest ready task's age;
    with --queue, each named queue's pending, claimed, ready and held slots too."""


@command("ledger watch", "ledger watch --interval 5s --status claimed", "ledger watch --queue db")
def watch(
    ctx: typer.Context,
    interval: Annotated[
        str | None, option("--interval", "D", "Refresh every D (default 2s).")
    ] = None,
    statuses: WatchStatuses = None,
    queue: Queues = None,
) -> None:
    """A live view of the stats and the unfinished tasks (q or Ctrl-C to leave)."""


@command("ledger serve", "LEDGER_TOKEN=$(openssl rand -hex 16) ledger serve --bind 0.0.0.0:8765")
def serve(
    ctx: typer.Context,
    bind: Annotated[
        str | None,
        option(
            "--bind",
            "HOST:PORT",
            "Where to listen (default 127.0.0.1:8765; port 0: any free port).",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="T",
            help=(
                "Require this token (default $LEDGER_TOKEN): printable ASCII, no"
                " leading or trailing space; needed off loopback."
            ),
            show_default=False,
        ),
    ] = None,
) -> None:
    """A read-only web view: the graph, the task table, each task's output, live.

    Prints its URL on the first line (on 0.0.0.0 or ::, the loopback's, and
    a second line saying it listens on every interface), then serves until
    interrupted. Every
    request needs `Authorization: Bearer T`, or the cookie that visiting
    `/?token=T` sets, when a token is given.
    """
