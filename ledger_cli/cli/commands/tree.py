"""`ledger tree [KEY]`: failures and what they block, or one chain of needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.errors import NoKeyError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store


def tree(settings: Settings, key: str | None = None) -> int:
    with Session(settings, reads=True) as s:
        from ledger_cli.engine.prune import visible

        records = {rec.key: rec for rec in visible(s.store)}
        pruned = _add_pruned(s.store, records, key)
        if key is not None and key not in records:
            raise NoKeyError(key=key)
        from ledger_cli.cli import outcome

        failed = [k for k, r in records.items() if r.status == "failed"]
        if settings.json:
            tree_doc = _tree_json(key, records, pruned)
            outcome.add_failure_fields(tree_doc, s.store)
            output.json_line(tree_doc)
            return 0
        marks = outcome.failure_marks(s.store, failed)  # `failed (exit 1)`, `(timed out)`…
    from ledger_cli.cli import render

    con = render.console()
    if key is not None:
        con.print(render.needs_tree(key, records, marks, pruned))
    else:
        trees = render.failure_trees(records, marks, pruned)
        render.print_trees(con, trees, "no failed tasks")
    return 0


def _add_pruned(store: Store, records: dict[str, TaskState], key: str | None) -> set[str]:
    """Load into `records` each pruned record a listed record needs (and KEY,
    when it is pruned): listings leave pruned records out, but one is still the
    completed or failed record it was, and a failed one blocks what needs it
    (docs/design.md §6.4). The keys loaded that are pruned."""
    from ledger_cli.engine.prune import is_pruned

    absent = {n for rec in records.values() for n in rec.needs or () if n not in records}
    if key is not None and key not in records:
        absent.add(key)
    pruned = set()
    for k in sorted(absent):
        found = store.load(k)
        if found is not None:
            records[k] = found
            if is_pruned(store, k):
                pruned.add(k)
    return pruned


def _tree_json(key: str | None, records: dict[str, TaskState], pruned: set[str]) -> object:
    """--json for `tree`: the failed records and what each blocks (`escaped`:
    the escaped blocks whose nearest failure it is), or the transitive needs of
    KEY with their statuses (null: never admitted) and the cycles of needs
    among them (engine/cycles.py); `pruned` on each record that is (a pruned
    failure is listed when a listed record needs it)."""
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
                {
                    "key": failed,
                    "pruned": failed in pruned,
                    "blocked": blocked,
                    "dependents": dependents,
                    "escaped": below,
                }
            )
        return {"failed": out}
    needs = _closure(key, records, down=False)
    from ledger_cli.engine.cycles import find_cycles

    reached = {k: records[k] for k in (key, *needs) if k in records}
    return {
        "key": key,
        "status": records[key].status,
        "pruned": key in pruned,
        "needs": [
            {
                "key": k,
                "status": records[k].status if k in records else None,
                "pruned": k in pruned,
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
