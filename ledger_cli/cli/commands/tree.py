"""`ledger tree [KEY]`: failures and what they block, or one chain of needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.errors import NoKeyError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState


def tree(settings: Settings, key: str | None = None) -> int:
    with Session(settings, read_only=True) as s:
        from ledger_cli.engine.prune import visible

        records = {rec.key: rec for rec in visible(s.store)}
        if key is not None and key not in records:
            raise NoKeyError(key=key)
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
    KEY with their statuses (null: never admitted) and the cycles of needs
    among them (engine/cycles.py)."""
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
    from ledger_cli.engine.cycles import find_cycles

    reached = {k: records[k] for k in (key, *needs) if k in records}
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
        "cycles": find_cycles(reached),
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
