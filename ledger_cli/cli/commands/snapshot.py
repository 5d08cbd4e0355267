"""`ledger snapshot [-o F]`: every record in the Go-compatible wire format."""

from __future__ import annotations

import contextlib
import os
import sys

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError


def snapshot(settings: Settings, out: str | None = None) -> int:
    from ledger_cli.engine import queues, schedule, wireext

    with Session(settings, reads=True) as s:
        snap = s.ledger.snapshot()
        kept = schedule.every(s.store) if schedule.any_kept(s.store) else {}
        queued = queues.every(s.store)
    data = wireext.encode(snap.tasks, kept, queued) if kept or queued else snap.encode()
    count = len(snap.tasks or ())
    if out is None or out == "-":
        sys.stdout.flush()
        # Byte-exact (no newline) into a pipe or file; a newline on a terminal.
        sys.stdout.buffer.write(data + (b"\n" if sys.stdout.isatty() else b""))
        sys.stdout.buffer.flush()
        return 0
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InputError(f"ledger: cannot write {out}: {exc.strerror or exc}", "bad_file") from None
    if settings.json:
        output.json_line({"output": out, "records": count})
    else:
        output.diag(f"wrote {count} records to {out}")
    return 0
