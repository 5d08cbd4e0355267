"""`ledger list [--status S] [--owner O] [--limit N] [--jsonl] [--pruned]`: the records."""

from __future__ import annotations

import os
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
    from ledger_cli.engine import queues, schedule

    with Session(settings, reads=True) as s:
        kept = schedule.every(s.store) if schedule.any_kept(s.store) else {}
        queued = queues.every(s.store)
        if kept or queued:
            from ledger_cli.engine.wireext import record_json

            def wire(rec: TaskState) -> str:  # docs/design.md §8.1: the extra members, when any
                return record_json(rec, kept.get(rec.key), queued.get(rec.key))
        else:
            wire = output.record
        source = _source(s.store, wanted, pruned, stream=jsonl)
        # A full scan checks its count against the JSON store's tally (one small
        # read): a record file lost makes them disagree (docs/design.md §5.5).
        tally = None if wanted or pruned else _tally_counts(s.store)
        seen = dict.fromkeys(tally or (), 0)
        for rec in source:
            if tally is not None:
                seen[rec.status] = seen.get(rec.status, 0) + 1
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
                output.line(wire(rec))
            elif settings.json or len(records) < TABLE_MAX or not sys.stdout.isatty():
                records.append(rec)
            else:
                more += 1  # on a terminal the table stays readable: "N more" below it
        if (
            tally is not None
            and seen != tally
            and (max_n is None or shown < max_n)
            and _tally_counts(s.store) == tally  # no writer between: worth confirming
        ):
            _confirm_disagreement(s.store, tally, seen)
        now = s.now()
    if settings.json:
        output.line("[" + ",".join(wire(r) for r in records) + "]")
    elif not jsonl:
        from ledger_cli.cli import render

        render.console().print(render.record_table(records, now, kept))
        if more:
            output.line(f"… {more} more (narrow with --status/--owner/--limit, or use --jsonl)")
    return 0


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


def _tally_counts(store: Store) -> dict[str, int] | None:
    """The JSON store's tally of records by status (None: no tally, or not built)."""
    if getattr(store, "check_tally_index", None) is None:
        return None
    counts: dict[str, int] | None = store.status_counts()  # type: ignore[attr-defined]
    return counts


def _confirm_disagreement(store: Store, tally: dict[str, int], seen: dict[str, int]) -> None:
    """Exit 9 when the scan and the tally still disagree under the store lock
    (writers during the scan that left the counts as they were are no
    damage): a record file is lost, or the tally is damaged. `ledger doctor`
    names which. The caller asks only when the tally read the same before and
    after the scan, so a busy store seldom pays for the locked check."""
    from ledger_cli.errors import StoreDamageError

    if not store.check_tally_index():  # type: ignore[attr-defined]
        return
    diff = ", ".join(
        f"{status} {tally.get(status, 0)} (read {seen.get(status, 0)})"
        for status in sorted(set(tally) | set(seen))
        if tally.get(status, 0) != seen.get(status, 0)
    )
    where = os.path.join(getattr(store, "path", ""), "tally", "counts")
    raise StoreDamageError(
        f"ledger: store: {where}: the tally counts other records than the record files "
        f"hold: {diff}; a record file is lost or the tally is damaged "
        "(ledger doctor names which)"
    )
