"""The declaration of `ledger run … -- CMD…`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli import typer_compat as compat
from ledger_cli.cli.declarations.base import (
    GiveUp,
    Lease,
    Next,
    NextKey,
    Owner,
    Queues,
    Wait,
    app,
    dispatch,
    examples,
)
from ledger_cli.cli.typer_compat import TyperCommand


class RunCommand(TyperCommand):
    """`run … -- CMD…`: everything after the first `--` is the command, untouched."""

    def parse_args(self, ctx: compat.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["ledger.command"] = args[cut + 1 :]
            args = args[:cut]
        return super().parse_args(ctx, args)


@app.command(
    cls=RunCommand,
    epilog=examples(
        'ledger run --next --owner "$(hostname)" --lease 2m -- ./job.sh',
        "ledger run --next --drain --owner w1 --lease 2m --retries 3 -- ./job.sh",
        'ledger run fetch --owner w1 --lease 5m -- curl -fsS -o data.csv "$URL"',
    ),
)
def run(
    ctx: typer.Context,
    owner: Owner,
    lease: Lease,
    key: NextKey = None,
    next_: Next = False,
    wait: Wait = None,
    retries: Annotated[
        str | None,
        typer.Option("--retries", metavar="N", help="Run the command up to N more times."),
    ] = None,
    backoff: Annotated[
        str | None,
        typer.Option("--backoff", metavar="D", help="Wait D, 2D, 4D… between attempts (1s)."),
    ] = None,
    drain: Annotated[
        bool,
        typer.Option(
            "--drain",
            help="With --next: after each task claim the next ready one, over one store "
            "connection, until none is ready and no other worker holds a live lease "
            "(exit 0; 1 if any command failed).",
        ),
    ] = False,
    until_idle: Annotated[
        bool,
        typer.Option(
            "--until-idle",
            help="With --drain: stop at the first moment nothing is ready, without "
            "waiting for the tasks other workers hold.",
        ),
    ] = False,
    give_up_after: GiveUp = None,
    keep_output: Annotated[
        str | None,
        typer.Option(
            "--keep-output",
            metavar="SIZE",
            help="Keep the last SIZE bytes of the command's output (1MiB; 0: none, "
            "output connected straight through; at most 64MiB).",
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="D",
            help="Stop an attempt that runs longer than D (SIGTERM; exit 124).",
        ),
    ] = None,
    kill_after: Annotated[
        str | None,
        typer.Option(
            "--kill-after", metavar="D2", help="With --timeout: SIGKILL D2 after SIGTERM (10s)."
        ),
    ] = None,
    queue: Queues = None,
) -> None:
    """Claim, run `-- CMD…` under the lease (renewed), complete by its exit status."""
    from ledger_cli.cli.commands.run import run as work

    dispatch(
        ctx,
        work,
        key=key,
        owner=owner,
        lease=lease,
        command=list(ctx.meta.get("ledger.command", [])),
        next_=next_,
        wait=wait,
        retries=retries,
        backoff=backoff,
        drain=drain,
        until_idle=until_idle,
        give_up_after=give_up_after,
        keep_output=keep_output,
        timeout=timeout,
        kill_after=kill_after,
        queue=queue,
    )
