"""`ledger complete`: finish a claimed task as completed or failed."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import parse_uint, validate_text


def complete(settings: Settings, key: str, owner: str, fence: str, failed: bool = False) -> int:
    owner = validate_text(owner, "owner")
    fence_n = parse_uint(fence, "--fence")
    status = "failed" if failed else "completed"
    with Session(settings, existing=True) as s:
        # None: the unit reads the store's clock with its load of the key
        # (PostgreSQL: no round trip of its own); else --now, or the clock
        # read once the write lock is held.
        for attempt in s.writes(s.unit_now(), "now_with"):
            with attempt:
                s.ledger.complete(s.actor, key, owner, fence_n, status, attempt.clock(key))
                rec = s.load(key)
    output.written(settings.json, key, rec, f"{status} {key}")
    return 0
