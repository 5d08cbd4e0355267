"""`ledger snapshot [-o F]`: every record in the Go-compatible wire format."""

from __future__ import annotations

import sys

from ledger_cli.cli import outfile, output
from ledger_cli.cli.context import Session, Settings


def snapshot(settings: Settings, out: str | None = None) -> int:
    from ledger_cli.engine import prune, queues, schedule, wireext

    with Session(settings, reads=True) as s:
        snap = s.ledger.snapshot()
        kept = schedule.every(s.store) if schedule.any_kept(s.store) else {}
        queued = queues.every(s.store)
        # The pruned records are marked so a restore puts them back pruned (docs/design.md §2.10).
        pruned = prune.keys(s.store) if prune.count_pruned(s.store) else frozenset()
    extended = kept or queued or pruned
    data = wireext.encode(snap.tasks, kept, queued, pruned) if extended else snap.encode()
    count = len(snap.tasks or ())
    if out is None or out == "-":
        sys.stdout.flush()
        # Byte-exact (no newline) into a pipe or file; a newline on a terminal.
        sys.stdout.buffer.write(data + (b"\n" if sys.stdout.isatty() else b""))
        sys.stdout.buffer.flush()
        return 0
    outfile.write_atomically(out, data)
    if settings.json:
        output.json_line({"output": out, "records": count})
    else:
        output.diag(f"wrote {output.counted(count, 'record')} to {out}")
    return 0
