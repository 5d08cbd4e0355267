"""`ledger retry KEY [--reason TEXT]`: reopen a failed task and un-block what needs it
(docs/design.md §6.2).

The engine call (`Ledger.retry`; `cancel.py` makes the other remedy) runs through the
session's block driver (cli/blockwrites.py): the reopen or the failure
commits first, then the un-blocks or blocks land in short blocks, each with
its history lines (actor, and the reason in each event's text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import validate_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.instant import Instant


def reason_text(reason: str | None) -> str | None:
    return validate_text(reason, "--reason") if reason else None


def retry(settings: Settings, key: str, reason: str | None = None) -> int:
    return remedy(settings, key, reason, lambda s: s.ledger.retry, "retried", "unblocked")


def remedy(
    settings: Settings,
    key: str,
    reason: str | None,
    call: Callable[[Session], Callable[[str, str, Instant, str | None], list[str]]],
    done: str,
    moved: str,
) -> int:
    """`retry` and `cancel`: the engine `call` through the session's block
    driver, then the key's record and the dependents its walk `moved`
    (`{"key", "record", "unblocked": [...]}`, or a line each). KEY is any
    key a store holds (docs/design.md §5.2), a key the Go service wrote with
    bytes that are not UTF-8 among them: one no store holds exits 3."""
    why = reason_text(reason)
    with Session(settings, existing=True) as s:
        now = s.blocks.now = s.now()
        walked = call(s)(s.actor, key, now, why)
        rec = s.load(key)
    output.written(settings.json, key, rec, f"{done} {key}", **{moved: walked})
    if not settings.json:
        for dep in walked:
            output.line(f"{moved} {dep}")
    return 0
