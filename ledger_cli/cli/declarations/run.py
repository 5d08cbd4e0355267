"""The declaration of `ledger run … -- CMD…`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli import typer_compat as compat
from ledger_cli.cli.declarations.base import (
    WORK_VALUES,
    GiveUp,
    Lease,
    Next,
    NextKey,
    Owner,
    Queues,
    Wait,
    command,
    flag,
    option,
)
from ledger_cli.cli.typer_compat import TyperCommand


class RunCommand(TyperCommand):
    """`run … -- CMD…`: everything after the first `--` is the command, untouched."""

    def parse_args(self, ctx: compat.Context, args: list[str]) -> list[str]:
        cut = args.index("--") if "--" in args else len(args)
        ctx.meta[WORK_VALUES] = {"command": args[cut + 1 :]}
        return super().parse_args(ctx, args[:cut])


@command(
    'ledger run --next --owner "$(hostname)" --lease 2m -- ./job.sh',
    "ledger run --next --drain --owner w1 --lease 2m --retries 3 -- ./job.sh",
    'ledger run fetch --owner w1 --lease 5m -- curl -fsS -o data.csv "$URL"',
    cls=RunCommand,
)
def run(
    ctx: typer.Context,
    owner: Owner,
    lease: Lease,
    key: NextKey = None,
    next_: Next = False,
    wait: Wait = None,
    retries: Annotated[
        str | None, option("--retries", "N", "Run the command up to N more times.")
    ] = None,
    backoff: Annotated[
        str | None, option("--backoff", "D", "Wait D, 2D, 4D… between attempts (1s).")
    ] = None,
    drain: Annotated[
        bool,
        flag(
            "--drain",
            "With --next: after each task claim the next ready one, over one store "
            "connection, until none is ready and no other worker holds a live lease "
            "in any queue, --queue or not (exit 0; 1 if any command failed), or until "
            "`ledger pause` (after the task "
            "in hand: exit 7 and the pause's line; 1, the line still on stderr, if any "
            "command failed).",
        ),
    ] = False,
    until_idle: Annotated[
        bool,
        flag(
            "--until-idle",
            "With --drain: stop at the first moment nothing is ready, without "
            "waiting for the tasks other workers hold.",
        ),
    ] = False,
    give_up_after: GiveUp = None,
    keep_output: Annotated[
        str | None,
        option(
            "--keep-output",
            "SIZE",
            "Keep the last SIZE bytes of the command's output (1MiB; 0: none, "
            "output connected straight through; at most 64MiB).",
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        option("--timeout", "D", "Stop an attempt that runs longer than D (SIGTERM; exit 124)."),
    ] = None,
    kill_after: Annotated[
        str | None, option("--kill-after", "D2", "With --timeout: SIGKILL D2 after SIGTERM (10s).")
    ] = None,
    queue: Queues = None,
) -> None:
    """Claim, run `-- CMD…` under the lease (renewed), complete by its exit status.

    A KEY that starts with `-` goes after a `--` of its own, then the command
    after a second one: `ledger run [OPTIONS] -- -x -- CMD…`.
    """
