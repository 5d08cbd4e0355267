"""Declarations of the whole-store commands: `snapshot`, `restore`, `doctor`, `demo`."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli.cli.declarations.base import command, flag


@command(
    "ledger snapshot -o ledger.snapshot.json",
    "ledger --store sqlite:app.db snapshot | jq '.Tasks | length'",
)
def snapshot(
    ctx: typer.Context,
    out: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            metavar="F",
            help="Write to F (- for stdout): a file is replaced atomically, "
            "a symlink followed, a FIFO written in place.",
        ),
    ] = None,
) -> None:
    """Write every record in the Go-compatible wire format. A pruned record carries
    the extra member "Pruned": true (Go's decoder ignores it), so a restore puts it back
    pruned."""


@command("ledger --store /srv/ledger-new restore ledger.snapshot.json")
def restore(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="F|-", help="A snapshot file, - for stdin.")],
) -> None:
    """Insert every record of a snapshot (nothing when a key holds another
    record). A key that already holds the snapshot's record counts as restored,
    so the same restore run again finishes one cut short. A record marked
    "Pruned": true goes back pruned: left out of list and stats, listed by list
    --pruned, and refused by retry as on the source."""


@command("ledger doctor", "ledger doctor --fix", "ledger doctor --fix --drop-damaged")
def doctor(
    ctx: typer.Context,
    fix: Annotated[
        bool,
        flag(
            "--fix",
            "Repair what can be repaired safely: remove a crash's temporary files, "
            "block each escaped block and un-block each orphaned one (the engine's "
            "walks), rebuild the ready, dependents and live indexes from the records, "
            "write pruned/count again from its shards, make the writes of a damaged "
            "wal.log durable when they were applied. "
            "A damaged or lost record is never touched nor forgotten.",
        ),
    ] = False,
    drop_damaged: Annotated[
        bool,
        flag(
            "--drop-damaged",
            "With --fix: accept the loss of damaged and lost primary data. A damaged "
            "record file is moved aside into damaged/ (never deleted), a lost one's key is "
            "dropped, a history's torn last line is copied into damaged/ and cut; a history "
            "line (ledger.dropped) and a line of output each. A damaged attempt file is "
            "moved into damaged/ too, with a history line and a line of output. A lost "
            "queue or schedule file the ready index tells of is accepted (the task goes "
            "to the default queue, due at once), with a line of output.",
        ),
    ] = False,
) -> None:
    """Check the store: problems exit 9, notes exit 0."""


@command("ledger demo", "ledger demo --workers 5")
def demo(
    ctx: typer.Context,
    workers: Annotated[int, typer.Option("--workers", min=1, max=8, help="Worker processes.")] = 3,
) -> None:
    """Run a small real workflow on a temporary store and show the result."""
