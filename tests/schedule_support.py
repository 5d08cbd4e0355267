"""The Ready rule of docs/design.md §4.3 with §8's order, evaluated by brute force over
`range()` and the store's schedules: what every ready index must agree with."""

from __future__ import annotations

from ledger_cli.engine import schedule
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.store import Store


def brute_ready(store: Store, now: Instant) -> list[str]:
    """Every ready key in the Ready order (priority desc, due, key)."""
    recs = {r.key: r for r in store.range()}
    kept = schedule.every(store)

    def poisoned(key: str) -> bool:  # a failed or blocked key in the transitive needs
        seen: set[str] = set()
        todo = list(recs[key].needs or ())
        while todo:
            need = todo.pop()
            if need in seen:
                continue
            seen.add(need)
            dep = recs.get(need)
            if dep is None:
                continue
            if dep.status in ("failed", "blocked"):
                return True
            todo.extend(dep.needs or ())
        return False

    def ready(r: TaskState) -> bool:
        if not (r.status == "pending" or (r.status == "claimed" and r.lease_until <= now)):
            return False
        nb = kept.get(r.key)
        if nb is not None and nb[0] > now:
            return False
        for need in r.needs or ():
            dep = recs.get(need)
            if dep is None or dep.status != "completed":
                return False
        return not poisoned(r.key)

    def order(r: TaskState) -> tuple[int, int, bytes]:
        value = kept.get(r.key)
        priority = value[1] if value is not None else 0
        due = r.created_at
        if value is not None and value[0] > due:
            due = value[0]
        return (-priority, due.unix_ns, r.key.encode("utf-8", "surrogatepass"))

    return [r.key for r in sorted((r for r in recs.values() if ready(r)), key=order)]
