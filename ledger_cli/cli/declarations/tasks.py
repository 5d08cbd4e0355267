"""Declarations of `admit`, `claim`, `renew`, `release`, `takeover` and `complete`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import (
    Fence,
    GiveUp,
    Key,
    Lease,
    Next,
    NextKey,
    Owner,
    Queues,
    Wait,
    app,
    complete_key,
    dispatch,
    examples,
    many,
    opt_key,
)


@app.command(
    epilog=examples(
        'ledger admit fetch --task \'{"url": "https://example.com/data.csv"}\'',
        "ledger admit load --needs fetch --queue db",
        "ledger admit --batch jobs.jsonl",
    )
)
def admit(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("The task's key (none with --batch).")] = None,
    seq: Annotated[
        str | None, typer.Option("--seq", metavar="N", help="Sequence (default 1).")
    ] = None,
    needs: Annotated[
        list[str] | None, many("--needs", "K", "A key this task needs (repeatable).", complete_key)
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", metavar="JSON", help="The task payload (JSON).")
    ] = None,
    task_file: Annotated[
        str | None,
        typer.Option("--task-file", metavar="F", help="Read the payload from F (- for stdin)."),
    ] = None,
    batch: Annotated[
        str | None,
        typer.Option("--batch", metavar="F", help="Admit many from JSON Lines in F (- for stdin)."),
    ] = None,
    not_before: Annotated[
        str | None,
        typer.Option(
            "--not-before", metavar="TIME", help="Not due before TIME (RFC 3339): --next waits."
        ),
    ] = None,
    delay: Annotated[
        str | None,
        typer.Option("--delay", metavar="D", help="Not due before now + D (90s, 5m, 2h, 1d)."),
    ] = None,
    priority: Annotated[
        str | None,
        typer.Option(
            "--priority", metavar="N", help="-1000..1000, default 0: higher is claimed first."
        ),
    ] = None,
    queue: Annotated[
        str | None,
        typer.Option("--queue", metavar="Q", help="The task's queue (default: default)."),
    ] = None,
) -> None:
    """Admit a task: prints `admitted`, `duplicate`, `stale` or `conflict` (exit 8)."""
    from ledger_cli.cli.commands.admit import admit as work

    dispatch(
        ctx,
        work,
        key=key,
        seq=seq,
        needs=needs,
        task=task,
        task_file=task_file,
        batch=batch,
        not_before=not_before,
        delay=delay,
        priority=priority,
        queue=queue,
    )


@app.command(
    epilog=examples(
        "F=$(ledger claim fetch --owner w1 --lease 5m)",
        "ledger claim --next --owner w1 --lease 5m --wait 30s",
        "ledger claim --next --queue db,mail --owner w1 --lease 5m",
    )
)
def claim(
    ctx: typer.Context,
    owner: Owner,
    lease: Lease,
    key: NextKey = None,
    next_: Next = False,
    wait: Wait = None,
    give_up_after: GiveUp = None,
    queue: Queues = None,
) -> None:
    """Claim KEY (prints the fence), or the oldest ready task with --next (prints KEY FENCE)."""
    from ledger_cli.cli.commands.claim import claim as work

    dispatch(
        ctx,
        work,
        key=key,
        owner=owner,
        lease=lease,
        next_=next_,
        wait=wait,
        give_up_after=give_up_after,
        queue=queue,
    )


@app.command(epilog=examples('ledger renew fetch --owner w1 --fence "$F" --lease 5m'))
def renew(ctx: typer.Context, key: Key, owner: Owner, fence: Fence, lease: Lease) -> None:
    """Extend a lease you hold."""
    from ledger_cli.cli.commands.renew import renew as work

    dispatch(ctx, work, key=key, owner=owner, fence=fence, lease=lease)


@app.command(epilog=examples('ledger release fetch --owner w1 --fence "$F"'))
def release(ctx: typer.Context, key: Key, owner: Owner, fence: Fence) -> None:
    """Give a claim back: the task is pending again."""
    from ledger_cli.cli.commands.release import release as work

    dispatch(ctx, work, key=key, owner=owner, fence=fence)


@app.command(epilog=examples("F=$(ledger takeover fetch --owner w2 --lease 5m)"))
def takeover(ctx: typer.Context, key: Key, owner: Owner, lease: Lease) -> None:
    """Take over a stale lease; prints the new fence."""
    from ledger_cli.cli.commands.takeover import takeover as work

    dispatch(ctx, work, key=key, owner=owner, lease=lease)


@app.command(
    epilog=examples(
        'ledger complete fetch --owner w1 --fence "$F"',
        'ledger complete fetch --owner w1 --fence "$F" --failed',
    )
)
def complete(
    ctx: typer.Context,
    key: Key,
    owner: Owner,
    fence: Fence,
    failed: Annotated[bool, typer.Option("--failed", help="Complete as failed.")] = False,
) -> None:
    """Finish a claimed task as completed (or failed)."""
    from ledger_cli.cli.commands.complete import complete as work

    dispatch(ctx, work, key=key, owner=owner, fence=fence, failed=failed)
