"""`ledger snapshot` and `ledger restore`: the Go-compatible wire format."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.admission import read_source
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState


def snapshot(settings: Settings, out: str | None = None) -> int:
    with Session(settings) as s:
        snap = s.ledger.snapshot()
    data = snap.encode()
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


def _check_keys(tasks: tuple[TaskState, ...]) -> None:
    """Every key a restored record names (its own, its needs, its blocker) must be one
    the command line can address (SPEC §5): ValidationError (exit 8) otherwise."""
    from ledger_cli.cli.inputs import validate_key
    from ledger_cli.errors import ValidationError

    for i, rec in enumerate(tasks):
        named = [("key", rec.key), *(("need", n) for n in rec.needs or ())]
        if rec.blocked_by:
            named.append(("blocked-by key", rec.blocked_by))
        for what, key in named:
            try:
                validate_key(key, what)
            except InputError as exc:
                detail = str(exc).removeprefix("ledger: ")
                raise ValidationError(f"ledger: snapshot entry {i}: {detail}") from None


def restore(settings: Settings, source: str) -> int:
    """Insert every record of a snapshot; refuse before writing anything when a
    key is already taken (the engine's Restore would stop halfway)."""
    from ledger_cli.cli.inputs import MAX_INPUT_BYTES
    from ledger_cli.engine.record import go_quote
    from ledger_cli.engine.snapshot import Snapshot
    from ledger_cli.errors import RestoreConflictError
    from ledger_cli.stores.history import HistoryEntry

    data = read_source(
        source, "snapshot", MAX_INPUT_BYTES, "restore it in parts (split its Tasks array)"
    )
    snap = Snapshot.decode(data)
    tasks = snap.tasks or ()
    _check_keys(tasks)
    with Session(settings) as s:
        now = s.now()
        with s.store.batch():
            seen: set[str] = set()
            for rec in tasks:
                if rec.key in seen or s.load(rec.key) is not None:
                    raise RestoreConflictError(
                        f"ledger: restore: key {go_quote(rec.key)} already has a record"
                    )
                seen.add(rec.key)
            s.ledger.restore(snap)
            append = getattr(s.store, "append_history", None)
            if append is not None and tasks:
                append(
                    [
                        HistoryEntry(
                            time=str(now),
                            actor=s.actor,
                            event="ledger.restored",
                            key=rec.key,
                            fence=(cur.fence if (cur := s.load(rec.key)) else rec.fence),
                            data=f"key {rec.key} restored from a snapshot",
                        )
                        for rec in tasks
                    ]
                )
    if settings.json:
        output.json_line({"restored": len(tasks)})
    else:
        output.line(f"restored {len(tasks)} records")
    return 0
