"""Declarations of `ledger output` and `ledger wait` (docs/design.md §7.2, §7.5).

Registered on the app of `base.py` when `declarations.registered_app` imports it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import Key, Queues, command, flag, keys_arg, option


@command(
    "ledger output nightly-backup",
    "ledger output nightly-backup --attempt 2 --tail 20",
    "ledger output nightly-backup --follow",
    work="output:output_cmd",
)
def output(
    ctx: typer.Context,
    key: Key,
    attempt: Annotated[
        str | None, option("--attempt", "N", "Attempt N (default: the latest).")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing new output until the attempt ends; "
            "exit 5 when it was abandoned (its runner is gone: its lease is over; "
            "one a rebase or cancel took, 5 s past its end).",
        ),
    ] = False,
    tail: Annotated[str | None, option("--tail", "LINES", "Only the last LINES lines.")] = None,
) -> None:
    """Print the kept output (stdout and stderr) of a run of KEY, byte for byte.

    An attempt that kept nothing (its command wrote nothing, or it ran with
    `--keep-output 0`, which keeps none) prints nothing, exits 0, and says so
    in one line on stderr.
    """


@command(
    "ledger wait build test deploy --timeout 30m",
    'ledger wait --all && echo "every task completed"',
)
def wait(
    ctx: typer.Context,
    keys: Annotated[list[str] | None, keys_arg("KEY", "The keys to wait for.")] = None,
    all_: Annotated[bool, flag("--all", "Wait until no record is pending or claimed.")] = False,
    timeout: Annotated[
        str | None, option("--timeout", "D", "Give up waiting after D (exit 124).")
    ] = None,
    interval: Annotated[str | None, option("--interval", "D", "Poll every D (default 1s).")] = None,
    queue: Queues = None,
) -> None:
    """Wait until every KEY is completed, failed or blocked (exit 0 when all completed)."""
