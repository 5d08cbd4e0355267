"""`ledger state KEY`: one record, with its attempts and schedule."""

from __future__ import annotations

import os

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.errors import NoKeyError


def state(settings: Settings, key: str) -> int:
    from ledger_cli.engine import queues, schedule

    with Session(settings, reads=True) as s:
        rec = s.ledger.state(key)
        if rec is None:
            raise NoKeyError(key=key)
        kept = schedule.of(s.store, key)
        queue = queues.of(s.store, key)
        if settings.json:
            from ledger_cli.cli.outcome import with_attempts

            if kept is None and queue == queues.DEFAULT:
                doc = str(output.record(rec))
            else:  # docs/design.md §8.1: the extra members after the 14 Go fields
                from ledger_cli.engine.wireext import record_json

                doc = record_json(rec, kept, None if queue == queues.DEFAULT else queue)
            output.raw(with_attempts(doc, s.store, rec, s.now()))
            return 0
        need_status = {}
        for need in rec.needs or ():
            dep = s.load(need)
            need_status[need] = dep.status if dep is not None else None
        now = s.now()
        from ledger_cli.engine.prune import is_pruned

        pruned = is_pruned(s.store, key)
        from ledger_cli.cli.outcome import state_attempts

        # The last attempts, the output's last lines, and the command that
        # prints it all: with this --store, unless LEDGER_STORE names it.
        given = settings.store if settings.store != os.environ.get("LEDGER_STORE") else None
        runs = state_attempts(s.store, rec, now, given)
        waiting = None
        # Ready by the rule (its needs completed, due) but its queue is full.
        due = kept is None or schedule.due(rec, kept) <= now
        if rec.status == "pending" and due and all(v == "completed" for v in need_status.values()):
            slots = queues.Slots(s.store, now)
            if slots.full(queue):  # ready by the rule, but its queue is at its limit
                n, held = slots.limits[queue], slots.held.get(queue, 0)
                waiting = f"waiting for a slot in {queue} ({held} of {n} held)"
    from ledger_cli.cli import render

    con = render.console()
    con.print(render.state_panel(rec, now, need_status, output.task(rec.task), kept))
    if queue != queues.DEFAULT:
        output.human_line(f"queue: {queue}")
    if waiting is not None:
        output.human_line(waiting)
    from rich.text import Text

    for part in runs:  # a line of text (the output's) as written, never wrapped at the width
        con.print(part, soft_wrap=isinstance(part, Text))
    if pruned:
        output.line("pruned: its task, needs and history were removed; the key stays admitted")
    return 0
