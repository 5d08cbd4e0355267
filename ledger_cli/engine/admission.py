"""Admit: idempotency-keyed admission with rebase and dependency blocking (docs/design.md §2.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import (
    BLOCKED,
    COMPLETED,
    PENDING,
    TaskState,
    check_sequence,
    check_str,
    is_terminal,
)
from ledger_cli.errors import ValidationError

if TYPE_CHECKING:
    from typing import Any


def check_names(actor: object, key: object, needs: tuple[object, ...] | None) -> None:
    """An admission's key, actor and needs, before any store is read, with one
    rule on every store (docs/design.md §2.11, departures 5 and 6): each a str
    (`check_str`), the key and each need not empty (the command line's "need
    must not be empty"), and beyond ASCII valid Unicode (engine/arguments.py,
    imported only then): else ValidationError (exit 8), nothing written."""
    name = check_str(key, "key")
    if name == "":
        raise ValidationError("ledger: idempotency key must not be empty")
    who = check_str(actor, "actor")
    named = tuple(check_str(need, "need") for need in needs or ())
    if "" in named:
        raise ValidationError("ledger: need must not be empty")
    if not (name.isascii() and who.isascii() and all(n.isascii() for n in named)):
        from ledger_cli.engine.arguments import check_keys, check_text

        check_keys(name, named)
        check_text(who, "actor")


def admit(
    core: Core,
    actor: str,
    key: str,
    seq: int,
    task: Any,
    now: Instant,
    needs: tuple[str, ...] | None,
    seen: list[TaskState] | None = None,
) -> bool:
    """Record a task once per key; a duplicate, lower sequence or terminal record is a no-op.

    `needs` is None when the caller named none (it encodes as `null`). On a
    no-op, the record that made it one is appended to `seen` when given (the
    outcome of docs/design.md §8.4 is judged from that very record: engine/conflict.py);
    on a rebase, the record it replaced (its lease: engine/schedule.py `wait_out`).
    """
    check_names(actor, key, needs)
    seq = check_sequence(seq)  # one rule on every store, before any is read
    if needs:  # the walks over needs: imported only for a record that names some
        from ledger_cli.engine.dependencies import admission_blocker, recheck_needs
    settled = _settled(core, needs) if needs else False
    # With `behind_completed`, settled means all that the needs reach is
    # completed, which never changes: no walk to make again.
    checked = None if settled and core.behind_completed else needs

    def write() -> bool:
        while True:
            cur = core.store.load(key)
            if cur is not None:
                if is_noop(cur, seq):
                    if seen is not None:
                        seen.append(cur)
                    return False
                created_by, created_at, fence = cur.created_by, cur.created_at, cur.fence
            else:
                created_by, created_at, fence = actor, now, 0
            blocker = admission_blocker(core, checked) if checked else None
            nxt = TaskState(
                key=key,
                status=BLOCKED if blocker is not None else PENDING,
                sequence=seq,
                fence=fence,
                needs=needs,
                blocked_by=blocker or "",
                task=task,
                created_by=created_by,
                created_at=created_at,
                updated_by=actor,
                updated_at=now,
            )
            if not core.swap(key, cur, nxt):
                continue
            if seen is not None and cur is not None:
                seen.append(cur)
            if blocker is not None:
                core.emit(events.BLOCKED, key, f"key {key} blocked by {blocker} at admission")
                # Extension (docs/design.md §6.2): the read after the write, so that a
                # concurrent retry of the blocker cannot leave this block orphaned.
                from ledger_cli.engine.reopen import confirm_block

                confirm_block(core, actor, now, key, blocker)
                return True
            if not (checked and recheck_needs(core, actor, now, key, checked)):
                core.emit(events.ADMITTED, key, f"key {key} admitted at sequence {seq}")
            return True

    if needs and not settled:
        # It may write a block (at once, or after its recheck): engine/serial.py.
        # A completed need never changes again, so with all of them completed
        # (and, with `behind_completed`, all they need in turn) no block can
        # follow, and the admission takes no lock.
        from ledger_cli.engine.serial import blocking_writes

        return blocking_writes(core, write)
    return write()


def is_noop(cur: TaskState, seq: int) -> bool:
    """An admit at sequence `seq` over the stored `cur` writes nothing: the
    record is finished, or `seq` is not above its sequence."""
    return is_terminal(cur.status) or not seq > cur.sequence


def _settled(core: Core, needs: tuple[str, ...]) -> bool:
    if core.behind_completed:
        from ledger_cli.engine.dependencies import blocking_behind

        return blocking_behind(core, needs)[1]
    for need in needs:
        rec = core.store.load(need)
        if rec is None or rec.status != COMPLETED:
            return False
    return True
