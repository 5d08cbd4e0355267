"""`ledger log [KEY] [--jsonl]`: the history of writes, oldest first."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError


def log(settings: Settings, key: str | None = None, jsonl: bool = False) -> int:
    if jsonl and settings.json:
        raise InputError("ledger: give --json or --jsonl, not both")
    with Session(settings) as s:
        read = getattr(s.store, "read_history", None)
        entries = list(read(key)) if read is not None else []
    if settings.json:
        output.json_line([e.to_obj() for e in entries])
    elif jsonl:
        output.jsonl(e.to_obj() for e in entries)
    else:
        for e in entries:
            output.line(f"{e.time} {e.actor} {e.event} {e.key} {e.fence} {e.data}")
    return 0
