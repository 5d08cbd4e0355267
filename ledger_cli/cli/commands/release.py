"""`ledger release KEY --owner O --fence F`: give a claim back."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import parse_uint, validate_text


def release(settings: Settings, key: str, owner: str, fence: str) -> int:
    owner = validate_text(owner, "owner")
    fence_n = parse_uint(fence, "--fence")
    with Session(settings, existing=True) as s:
        for attempt in s.writes(s.unit_now()):  # now: once the write lock is held
            with attempt:
                s.ledger.release(s.actor, key, owner, fence_n, attempt.clock(key))
                rec = s.load(key)
    output.written(settings.json, key, rec, f"released {key}")
    return 0
