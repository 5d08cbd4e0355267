"""`ledger list [--status S] [--owner O] [--limit N] [--jsonl] [--pruned]`: the records."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_status, parse_uint, validate_text

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store


def list_records(
    settings: Settings,
    statuses: list[str] | None = None,
    owner: str | None = None,
    limit: str | None = None,
    jsonl: bool = False,
    pruned: bool = False,
    queue: list[str] | None = None,
) -> int:
    wanted = {parse_status(st) for st in statuses or ()}
    from ledger_cli.cli.queueargs import parse_queues

    in_queues = parse_queues(queue)
    if owner is not None:
        validate_text(owner, "owner")
    max_n = parse_uint(limit, "--limit") if limit is not None else None
    if jsonl and settings.json:
        raise InputError("ledger: give --json or --jsonl, not both")
    records: list[TaskState] = []
    shown = 0
    more = 0
    from ledger_cli.engine import badrows, queues, schedule

    with Session(settings, reads=True) as s, badrows.around(s.store) as bad:
        kept = schedule.every(s.store) if schedule.any_kept(s.store) else {}
        queued = queues.every(s.store)
        if kept or queued:
            from ledger_cli.engine.wireext import record_json

            def wire(rec: TaskState) -> str:  # docs/design.md §8.1: the extra members, when any
                return record_json(rec, kept.get(rec.key), queued.get(rec.key))
        else:
            wire = output.record
        source = _source(s.store, wanted, pruned, stream=jsonl)
        for rec in source:
            if max_n is not None and shown >= max_n:
                break
            if wanted and rec.status not in wanted:
                continue
            if owner is not None and rec.owner != owner:
                continue
            if in_queues is not None and queued.get(rec.key, queues.DEFAULT) not in in_queues:
                continue
            shown += 1
            if jsonl:  # streamed: printed as read, nothing kept
                output.raw(wire(rec))
            elif settings.json or len(records) < TABLE_MAX or not sys.stdout.isatty():
                records.append(rec)
            else:
                more += 1  # on a terminal the table stays readable: "N more" below it
        now = s.now()
    if settings.json:
        output.raw("[" + ",".join(wire(r) for r in records) + "]")
    elif not jsonl:
        from ledger_cli.cli import render

        render.console().print(render.record_table(records, now, kept))
        if more:
            output.line(f"… {more} more (narrow with --status/--owner/--limit, or use --jsonl)")
    failed = bad.error("list")  # every row that decodes is out; then the bad ones (§5.5)
    return 0 if failed is None else output.report(failed, json_mode=False)


TABLE_MAX = 500
"""Rows of the table `list` prints on a terminal; the rest is counted."""


def _source(store: Store, wanted: set[str], pruned: bool, stream: bool) -> Iterable[TaskState]:
    """What `list` reads: pruned records only, or the visible ones; a status filter
    within pending/claimed reads the store's live-record index (by_status) only;
    `stream` (--jsonl) takes the store's streaming scan when it has one (the JSON
    store: storage order, each row printed as it is read)."""
    from ledger_cli.engine import prune
    from ledger_cli.engine.record import byte_order

    if pruned:
        return prune.pruned(store)
    by_status = getattr(store, "by_status", None)
    if wanted and wanted <= {"pending", "claimed"} and by_status is not None:
        return sorted(by_status(sorted(wanted)), key=lambda r: byte_order(r.key))
    scan = getattr(store, "scan_visible", None) if stream else None
    return scan() if scan is not None else prune.visible(store)
