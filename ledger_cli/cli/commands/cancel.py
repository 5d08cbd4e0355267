"""`ledger cancel KEY [--reason TEXT]`: fail a task by hand, blocking what needs it
(docs/design.md §6.3)."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.commands.retry import reason_text
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import validate_key


def cancel(settings: Settings, key: str, reason: str | None = None) -> int:
    validate_key(key)
    why = reason_text(reason)
    with Session(settings) as s:
        now = s.blocks.now = s.now()
        blocked = s.ledger.cancel(s.actor, key, now, why)
        rec = s.load(key)
    if settings.json:
        output.json_line({"key": key, "record": output.record(rec), "blocked": blocked})
    else:
        output.line(f"cancelled {key}")
        for dep in blocked:
            output.line(f"blocked {dep}")
    return 0
