"""Read-only commands: `state`, `blocked`, `list`, `tree`, `log`."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_status, parse_uint, validate_text
from ledger_cli.errors import NoKeyError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store


def state(settings: Settings, key: str) -> int:
    from ledger_cli.engine import schedule

    with Session(settings) as s:
        rec = s.ledger.state(key)
        if rec is None:
            raise NoKeyError()
        kept = schedule.of(s.store, key)
        if settings.json:
            from ledger_cli.cli.outcome import with_attempts

            if kept is None:
                doc = str(output.record(rec))
            else:  # SPEC §8.1: the extra members after the 14 Go fields
                from ledger_cli.engine.wireext import record_json

                doc = record_json(rec, kept)
            output.line(with_attempts(doc, s.store, key))
            return 0
        need_status = {}
        for need in rec.needs or ():
            dep = s.load(need)
            need_status[need] = dep.status if dep is not None else None
        now = s.now()
        from ledger_cli.engine.prune import is_pruned

        pruned = is_pruned(s.store, key)
        from ledger_cli.cli.outcome import state_attempts

        runs = state_attempts(s.store, key)  # the last attempts, the output's last lines
    from ledger_cli.cli import render

    con = render.console()
    con.print(render.state_panel(rec, now, need_status, output.task(rec.task), kept))
    for part in runs:
        con.print(part)
    if pruned:
        output.line("pruned: its task, needs and history were removed; the key stays admitted")
    return 0


def blocked(settings: Settings, key: str) -> int:
    """Exit 0 and print the blocking key when blocked; exit 1 (silent) when not."""
    with Session(settings) as s:
        if s.ledger.state(key) is None:
            raise NoKeyError()
        by = s.ledger.blocked(key)
    if settings.json:
        output.json_line({"key": key, "blocked": by is not None, "blocked_by": by})
    elif by is not None:
        output.line(by)
    return 0 if by is not None else 1


def list_records(
    settings: Settings,
    statuses: list[str] | None = None,
    owner: str | None = None,
    limit: str | None = None,
    jsonl: bool = False,
    pruned: bool = False,
) -> int:
    wanted = {parse_status(st) for st in statuses or ()}
    if owner is not None:
        validate_text(owner, "owner")
    max_n = parse_uint(limit, "--limit") if limit is not None else None
    if jsonl and settings.json:
        raise InputError("ledger: give --json or --jsonl, not both")
    records: list[TaskState] = []
    shown = 0
    more = 0
    from ledger_cli.engine import schedule

    with Session(settings) as s:
        kept = schedule.every(s.store) if schedule.any_kept(s.store) else {}
        if kept:
            from ledger_cli.engine.wireext import record_json

            def wire(rec: TaskState) -> str:  # SPEC §8.1: the extra members, when any
                return record_json(rec, kept.get(rec.key))
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
            shown += 1
            if jsonl:  # streamed: printed as read, nothing kept
                output.line(wire(rec))
            elif settings.json or len(records) < TABLE_MAX or not sys.stdout.isatty():
                records.append(rec)
            else:
                more += 1  # on a terminal the table stays readable: "N more" below it
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


def tree(settings: Settings, key: str | None = None) -> int:
    with Session(settings) as s:
        from ledger_cli.engine.prune import visible

        records = {rec.key: rec for rec in visible(s.store)}
        if key is not None and key not in records:
            raise NoKeyError()
        from ledger_cli.cli import outcome

        failed = [k for k, r in records.items() if r.status == "failed"]
        if settings.json:
            tree_doc = _tree_json(key, records)
            outcome.add_failure_fields(tree_doc, s.store)
            output.json_line(tree_doc)
            return 0
        marks = outcome.failure_marks(s.store, failed)  # `failed (exit 1)`, `(timed out)`…
    from ledger_cli.cli import render

    con = render.console()
    if key is not None:
        con.print(render.needs_tree(key, records, marks))
    else:
        render.print_trees(con, render.failure_trees(records, marks), "no failed tasks")
    return 0


def _tree_json(key: str | None, records: dict[str, TaskState]) -> object:
    """--json for `tree`: the failed records and what each blocks (`escaped`:
    the escaped blocks whose nearest failure it is), or the transitive needs of
    KEY with their statuses (null: never admitted)."""
    if key is None:
        from ledger_cli.engine.invariants import find_escaped_blocks

        escaped = find_escaped_blocks(records.values())
        out = []
        for failed in sorted(k for k, r in records.items() if r.status == "failed"):
            blocked = sorted(
                k for k, r in records.items() if r.status == "blocked" and r.blocked_by == failed
            )
            dependents = _closure(failed, records, down=True)
            below = [e.key for e in escaped if e.failure == failed]
            out.append(
                {"key": failed, "blocked": blocked, "dependents": dependents, "escaped": below}
            )
        return {"failed": out}
    needs = _closure(key, records, down=False)
    return {
        "key": key,
        "status": records[key].status,
        "needs": [
            {
                "key": k,
                "status": records[k].status if k in records else None,
                "blocked_by": records[k].blocked_by if k in records else "",
            }
            for k in needs
        ],
    }


def _closure(start: str, records: dict[str, TaskState], down: bool) -> list[str]:
    """Keys reachable from `start` through needs (down=False) or dependents."""
    if down:
        edges: dict[str, list[str]] = {}
        for rec in records.values():
            for need in rec.needs or ():
                edges.setdefault(need, []).append(rec.key)
    seen: list[str] = []
    mark = {start}
    stack = [start]
    while stack:
        k = stack.pop()
        nxt = edges.get(k, []) if down else list((records[k].needs or ()) if k in records else ())
        for n in nxt:
            if n not in mark:
                mark.add(n)
                seen.append(n)
                stack.append(n)
    return seen


def log(settings: Settings, key: str | None = None, jsonl: bool = False) -> int:
    if jsonl and settings.json:
        raise InputError("ledger: give --json or --jsonl, not both")
    with Session(settings) as s:
        read = getattr(s.store, "read_history", None)
        entries = list(read(key)) if read is not None else []
    if settings.json:
        output.json_line([e.to_obj() for e in entries])
    elif jsonl:
        output.jsonl(e.to_obj() for e in entries)
    else:
        for e in entries:
            output.line(f"{e.time} {e.actor} {e.event} {e.key} {e.fence} {e.data}")
    return 0
