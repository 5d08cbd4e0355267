"""Complete: finish a claimed record; a failure blocks its dependents (docs/design.md §2.4)."""

from __future__ import annotations

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import COMPLETED, FAILED
from ledger_cli.errors import UnknownStatusError

_FINAL = {COMPLETED: COMPLETED, FAILED: FAILED}


def final_status(status: object) -> str:
    """Exactly "completed" or "failed" (a Status or a plain string); else UnknownStatusError."""
    if not isinstance(status, str) or status not in _FINAL:
        raise UnknownStatusError()
    return _FINAL[status]


def complete(
    core: Core, actor: str, key: str, owner: str, fence: int, status: object, now: Instant
) -> None:
    final = final_status(status)
    if final == FAILED:  # it blocks dependents (engine/serial.py)
        from ledger_cli.engine.dependencies import block_dependents
        from ledger_cli.engine.serial import blocking_writes

        blocks = core.blocks
        if blocks is None:
            blocking_writes(core, _complete, core, actor, key, owner, fence, final, now, True)
            return
        # With a driver (engine/blocks.py) the walk follows the completion's
        # commit, in blocks of its own, as Go's follows its compare-and-swap.
        blocks.one(
            lambda: blocking_writes(core, _complete, core, actor, key, owner, fence, final, now)
        )
        blocks.after(lambda: block_dependents(core, actor, now, key))
        return
    _complete(core, actor, key, owner, fence, final, now)


def _complete(
    core: Core,
    actor: str,
    key: str,
    owner: str,
    fence: int,
    final: str,
    now: Instant,
    walk: bool = False,
) -> None:
    while True:
        cur = core.require_held(key, fence)
        nxt = cur.replace(status=final, updated_by=actor, updated_at=now)
        if core.swap(key, cur, nxt):
            core.emit(events.COMPLETED, key, f"key {key} completed as {final} by {owner}")
            if walk:  # a failure (`complete` imported the walk)
                from ledger_cli.engine.dependencies import block_dependents

                block_dependents(core, actor, now, key)
            return
