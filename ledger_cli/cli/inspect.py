"""Read-only commands: `state`, `blocked`, `list`, `tree`, `log`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_status, parse_uint, validate_key, validate_text
from ledger_cli.errors import NoKeyError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState


def state(settings: Settings, key: str) -> int:
    validate_key(key)
    with Session(settings) as s:
        rec = s.ledger.state(key)
        if rec is None:
            raise NoKeyError()
        if settings.json:
            output.line(output.record(rec))
            return 0
        need_status = {}
        for need in rec.needs or ():
            dep = s.load(need)
            need_status[need] = dep.status if dep is not None else None
        now = s.now()
    from ledger_cli.cli import render

    render.console().print(render.state_panel(rec, now, need_status, output.task(rec.task)))
    return 0


def blocked(settings: Settings, key: str) -> int:
    """Exit 0 and print the blocking key when blocked; exit 1 (silent) when not."""
    validate_key(key)
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
) -> int:
    wanted = {parse_status(st) for st in statuses or ()}
    if owner is not None:
        validate_text(owner, "owner")
    max_n = parse_uint(limit, "--limit") if limit is not None else None
    if jsonl and settings.json:
        raise InputError("ledger: give --json or --jsonl, not both")
    records: list[TaskState] = []
    with Session(settings) as s:
        for rec in s.store.range():
            if max_n is not None and len(records) >= max_n:
                break
            if wanted and rec.status not in wanted:
                continue
            if owner is not None and rec.owner != owner:
                continue
            records.append(rec)
        now = s.now()
    if settings.json:
        output.line("[" + ",".join(output.record(r) for r in records) + "]")
    elif jsonl:
        for rec in records:
            output.line(output.record(rec))
    else:
        from ledger_cli.cli import render

        render.console().print(render.record_table(records, now))
    return 0


def tree(settings: Settings, key: str | None = None) -> int:
    if key is not None:
        validate_key(key)
    with Session(settings) as s:
        records = {rec.key: rec for rec in s.store.range()}
    if key is not None and key not in records:
        raise NoKeyError()
    if settings.json:
        output.json_line(_tree_json(key, records))
        return 0
    from ledger_cli.cli import render

    con = render.console()
    if key is not None:
        con.print(render.needs_tree(key, records))
    else:
        render.print_trees(con, render.failure_trees(records), "no failed tasks")
    return 0


def _tree_json(key: str | None, records: dict[str, TaskState]) -> object:
    """--json for `tree`: the failed records and what each blocks, or the
    transitive needs of KEY with their statuses (null: never admitted)."""
    if key is None:
        out = []
        for failed in sorted(k for k, r in records.items() if r.status == "failed"):
            blocked = sorted(
                k for k, r in records.items() if r.status == "blocked" and r.blocked_by == failed
            )
            dependents = _closure(failed, records, down=True)
            out.append({"key": failed, "blocked": blocked, "dependents": dependents})
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
    if key is not None:
        validate_key(key)
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
