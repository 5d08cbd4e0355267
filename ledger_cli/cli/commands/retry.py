"""`ledger retry KEY [--reason TEXT]`: reopen a failed task and un-block what needs it
(docs/design.md §6.2).

The engine call (`Ledger.retry`; `cancel.py` makes the other remedy) runs through the
session's block driver (cli/blockwrites.py): the reopen or the failure
commits first, then the un-blocks or blocks land in short blocks, each with
its history lines (actor, and the reason in each event's text).
"""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import validate_key, validate_text


def reason_text(reason: str | None) -> str | None:
    return validate_text(reason, "--reason") if reason else None


def retry(settings: Settings, key: str, reason: str | None = None) -> int:
    validate_key(key)
    why = reason_text(reason)
    with Session(settings) as s:
        now = s.blocks.now = s.now()
        unblocked = s.ledger.retry(s.actor, key, now, why)
        rec = s.load(key)
    if settings.json:
        output.json_line({"key": key, "record": output.record(rec), "unblocked": unblocked})
    else:
        output.line(f"retried {key}")
        for dep in unblocked:
            output.line(f"unblocked {dep}")
    return 0
