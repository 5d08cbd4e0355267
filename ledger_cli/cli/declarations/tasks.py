"""Declarations of `admit`, `claim`, `renew`, `release`, `takeover` and `complete`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import (
    ClaimGiveUp,
    Fence,
    Key,
    Lease,
    Next,
    NextKey,
    Owner,
    Queues,
    Wait,
    command,
    complete_key,
    flag,
    opt_key,
    option,
)


@command(
    'ledger admit fetch --task \'{"url": "https://example.com/data.csv"}\'',
    "ledger admit load --needs fetch --queue db",
    "ledger admit --batch jobs.jsonl",
)
def admit(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("The task's key (none with --batch).")] = None,
    seq: Annotated[str | None, option("--seq", "N", "Sequence (default 1).")] = None,
    needs: Annotated[
        list[str] | None,
        option("--needs", "K", "A key this task needs (repeatable).", complete_key),
    ] = None,
    task: Annotated[str | None, option("--task", "JSON", "The task payload (JSON).")] = None,
    task_file: Annotated[
        str | None, option("--task-file", "F", "Read the payload from F (- for stdin).")
    ] = None,
    batch: Annotated[
        str | None, option("--batch", "F", "Admit many from JSON Lines in F (- for stdin).")
    ] = None,
    not_before: Annotated[
        str | None,
        option("--not-before", "TIME", "Not due before TIME (RFC 3339): --next waits."),
    ] = None,
    delay: Annotated[
        str | None, option("--delay", "D", "Not due before now + D (90s, 5m, 2h, 1d).")
    ] = None,
    priority: Annotated[
        str | None,
        option("--priority", "N", "-1000..1000, default 0: higher is claimed first."),
    ] = None,
    queue: Annotated[
        str | None, option("--queue", "Q", "The task's queue (default: default).")
    ] = None,
) -> None:
    """Admit a task: prints `admitted`, `duplicate`, `stale` or `conflict` (exit 8)."""


@command(
    "F=$(ledger claim fetch --owner w1 --lease 5m)",
    "ledger claim --next --owner w1 --lease 5m --wait 30s",
    "ledger claim --next --queue db,mail --owner w1 --lease 5m",
)
def claim(
    ctx: typer.Context,
    owner: Owner,
    lease: Lease,
    key: NextKey = None,
    next_: Next = False,
    wait: Wait = None,
    give_up_after: ClaimGiveUp = None,
    queue: Queues = None,
) -> None:
    """Claim KEY (prints the fence), or the oldest ready task with --next (prints KEY FENCE)."""


@command('ledger renew fetch --owner w1 --fence "$F" --lease 5m')
def renew(ctx: typer.Context, key: Key, owner: Owner, fence: Fence, lease: Lease) -> None:
    """Extend a lease you hold."""


@command('ledger release fetch --owner w1 --fence "$F"')
def release(ctx: typer.Context, key: Key, owner: Owner, fence: Fence) -> None:
    """Give a claim back: the task is pending again."""


@command("F=$(ledger takeover fetch --owner w2 --lease 5m)")
def takeover(ctx: typer.Context, key: Key, owner: Owner, lease: Lease) -> None:
    """Take over a stale lease; prints the new fence."""


@command(
    'ledger complete fetch --owner w1 --fence "$F"',
    'ledger complete fetch --owner w1 --fence "$F" --failed',
)
def complete(
    ctx: typer.Context,
    key: Key,
    owner: Owner,
    fence: Fence,
    failed: Annotated[bool, flag("--failed", "Complete as failed.")] = False,
) -> None:
    """Finish a claimed task as completed (or failed)."""
