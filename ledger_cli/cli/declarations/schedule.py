"""Declarations of `check`, `pause`, `resume` (docs/design.md §8.3, §8.5) and `limit` (§8.7).

Registered on the app of `base.py` when `declarations.registered_app` imports it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli import typer_compat as compat
from ledger_cli.cli.declarations.base import Fence, Key, Owner, command, flag, option
from ledger_cli.cli.typer_compat import TyperCommand


@command(
    'ledger check job-7 --owner "$W" --fence "$F" && upload.sh',
    "ledger --json check job-7 --owner w1 --fence 3",
)
def check(ctx: typer.Context, key: Key, owner: Owner, fence: Fence) -> None:
    """Do I still hold this lease? Exit 0 and print the time left; 5 when the
    fence is stale, the holder is another or the lease ran out; 6 not claimed;
    3 no record. Reads only."""


@command(
    'ledger pause --reason "deploy freeze"', "ledger pause && ledger stats --json | jq .paused"
)
def pause(
    ctx: typer.Context,
    reason: Annotated[
        str | None, option("--reason", "TEXT", "Why: shown to claimers and in the log.")
    ] = None,
) -> None:
    """Stop `claim --next` and `run --next` from claiming (exit 7 while paused);
    everything else works as always."""


@command("ledger resume")
def resume(ctx: typer.Context) -> None:
    """Let `claim --next` and `run --next` claim again after `ledger pause`."""


class LimitCommand(TyperCommand):
    """`limit QUEUE -1`: a negative N is an argument (then refused as N), not an
    unknown option; it is moved after a `--` so the parser takes it as one."""

    def parse_args(self, ctx: compat.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            negative = [a for a in args if a[:1] == "-" and a[1:].isdigit()]
            if negative:
                args = [a for a in args if a not in negative] + ["--", *negative]
        return super().parse_args(ctx, args)


@command(
    "ledger limit db 2",
    "ledger limit db",
    "ledger limit db --clear",
    cls=LimitCommand,
)
def limit(
    ctx: typer.Context,
    queue: Annotated[
        str | None,
        typer.Argument(metavar="QUEUE", show_default=False, help="The queue (none: list them)."),
    ] = None,
    n: Annotated[
        str | None,
        typer.Argument(
            metavar="N",
            show_default=False,
            help="At most N live leases (a whole number, 1 to 1000000; none: show QUEUE's).",
        ),
    ] = None,
    clear: Annotated[bool, flag("--clear", "Remove QUEUE's limit.")] = False,
) -> None:
    """Limit QUEUE to N live leases across every worker (a lease that runs out
    frees its slot; one that cancel, a rebase or a block takes away, only when
    it would have run out); with QUEUE alone, show its limit and held slots;
    without QUEUE, list the queues with theirs, a line each as a change prints it:
    `QUEUE limit=N held=H` (`limit=-`: no limit)."""
