"""Declarations of `ledger output` and `ledger wait` (docs/design.md §7.2, §7.5).

Registered on the app of `base.py` when `declarations.registered_app` imports it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import Key, Queues, app, dispatch, examples, keys_arg

OUTPUT_EXAMPLES = examples(
    "ledger output nightly-backup",
    "ledger output nightly-backup --attempt 2 --tail 20",
    "ledger output nightly-backup --follow",
)
WAIT_EXAMPLES = examples(
    "ledger wait build test deploy --timeout 30m",
    'ledger wait --all && echo "every task completed"',
)


@app.command(epilog=OUTPUT_EXAMPLES)
def output(
    ctx: typer.Context,
    key: Key,
    attempt: Annotated[
        str | None,
        typer.Option("--attempt", metavar="N", help="Attempt N (default: the latest)."),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new output until it ends.")
    ] = False,
    tail: Annotated[
        str | None, typer.Option("--tail", metavar="LINES", help="Only the last LINES lines.")
    ] = None,
) -> None:
    """Print the kept output (stdout and stderr) of a run of KEY, byte for byte."""
    from ledger_cli.cli.commands.output import output_cmd as work

    dispatch(ctx, work, key=key, attempt=attempt, follow=follow, tail=tail)


@app.command(epilog=WAIT_EXAMPLES)
def wait(
    ctx: typer.Context,
    keys: Annotated[list[str] | None, keys_arg("KEY", "The keys to wait for.")] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Wait until no record is pending or claimed.")
    ] = False,
    timeout: Annotated[
        str | None,
        typer.Option("--timeout", metavar="D", help="Give up after D (exit 124)."),
    ] = None,
    interval: Annotated[
        str | None, typer.Option("--interval", metavar="D", help="Poll every D (default 1s).")
    ] = None,
    queue: Queues = None,
) -> None:
    """Wait until every KEY is completed, failed or blocked (exit 0 when all completed)."""
    from ledger_cli.cli.commands.wait import wait as work

    dispatch(
        ctx,
        work,
        keys=list(keys or []),
        all_=all_,
        timeout=timeout,
        interval=interval,
        queue=queue,
    )
