"""`ledger limit [QUEUE [N] [--clear]]`: limits held by leases (docs/design.md §8.7;
engine/queues.py).

`ledger limit QUEUE N` sets QUEUE's limit (N ≥ 1); `--clear` removes it;
`ledger limit QUEUE` shows it; without a QUEUE it lists every queue that has
a limit or holds a pending or claimed task, with its limit and its held
slots (live leases). Each prints a queue's line the same way: `QUEUE
limit=N held=H` (`limit=-`: none), or with `--json` its object. A change
is one unit under the store's write lock.
"""

from __future__ import annotations

from typing import Any

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_uint
from ledger_cli.cli.queueargs import validate_name
from ledger_cli.engine import queues
from ledger_cli.engine.record import go_quote

MAX_LIMIT = 1_000_000


def limit(
    settings: Settings, queue: str | None = None, n: str | None = None, clear: bool = False
) -> int:
    if queue is None:
        if n is not None or clear:
            raise InputError("ledger: limit N and --clear need a QUEUE")
        return _list(settings)
    validate_name(queue)
    if clear and n is not None:
        raise InputError("ledger: give N or --clear, not both")
    if not clear and n is None:
        return _list(settings, queue)
    value = None if n is None else _limit_value(n)
    with Session(settings) as s:
        now = s.now()
        with s.store.batch():
            queues.set_limit(s.store, queue, value)
            held = queues.held_by_queue(s.store, now).get(queue, 0)
    output.note_committed()  # a failed stdout's line says so (exit 74)
    row = {"queue": queue, "limit": value, "held": held}
    if settings.json:
        output.json_line(row)
    else:
        output.human_line(_line(row))
    return 0


def _limit_value(n: str) -> int:
    """N: a whole number from 1 to MAX_LIMIT; anything else gets one message
    that says so (a negative N, given after `--` or as `-1`, included)."""
    try:
        value = parse_uint(n, "N", MAX_LIMIT)
    except InputError:
        value = 0
    if value < 1:
        raise InputError(
            f"ledger: N must be a whole number from 1 to {MAX_LIMIT} "
            f"(--clear removes the limit), got {go_quote(n)}",
            "bad_number",
        )
    return value


def rows(s: Session) -> list[dict[str, Any]]:
    """Every queue with a limit or a pending/claimed task: queue, limit, held."""
    now = s.now()
    limits = queues.limits(s.store)
    held = queues.held_by_queue(s.store, now)
    names = set(limits) | set(held)
    side = queues.every(s.store)
    from ledger_cli.engine.ready import candidates

    for rec in candidates(s.store):
        names.add(side.get(rec.key, queues.DEFAULT))
    return [{"queue": q, "limit": limits.get(q), "held": held.get(q, 0)} for q in sorted(names)]


def _line(row: dict[str, Any]) -> str:
    """A queue's line: `QUEUE limit=N held=H` (`limit=-`: no limit)."""
    shown = "-" if row["limit"] is None else str(row["limit"])
    return f"{row['queue']} limit={shown} held={row['held']}"


def _list(settings: Settings, queue: str | None = None) -> int:
    """Every queue's line; `queue`: that queue's alone (a queue with no limit
    and no task: `limit=- held=0`), with `--json` its object."""
    with Session(settings, reads=True) as s:
        found = rows(s)
    if queue is not None:
        row = next((r for r in found if r["queue"] == queue), None)
        row = row or {"queue": queue, "limit": None, "held": 0}
        if settings.json:
            output.json_line(row)
        else:
            output.human_line(_line(row))
        return 0
    if settings.json:
        output.json_line(found)
        return 0
    for row in found:
        output.human_line(_line(row))
    return 0
