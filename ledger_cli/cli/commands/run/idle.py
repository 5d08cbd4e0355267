"""What keeps a `run --drain` worker going once nothing is ready to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger_cli.cli.context import Session


def what_keeps_going(s: Session, wanted: frozenset[str] | None) -> str | None:
    """What keeps the drain going: "held" when some task is claimed with a
    live lease (its outcome may make more ready), "ready" when a task this
    drain may claim is ready (another worker's claim of it may be in
    flight), None when neither: the graph, but for new admissions, is done.

    Read in one consistent unit, the store's `snapshot()` (PostgreSQL: a
    REPEATABLE READ transaction whose reads lock no row; SQLite: a deferred
    read transaction, one WAL snapshot, which keeps no writer out) or else
    its batch (the JSON store's lock): a check of leases and a later check
    of the ready tasks could each miss a task that went from ready to
    claimed between them, and stop a worker while the graph is still
    running. A snapshot may be a moment old, which is enough: if at that
    instant nothing was held and nothing ready, only a new admission can
    make work again (a claim needs a ready task, a completion a held one),
    as under a lock taken at that instant. A conflict with another writer
    is "look again"."""
    from ledger_cli.engine import queues
    from ledger_cli.engine.queuefilter import Filter
    from ledger_cli.engine.ready import live_lease_held, nameable, ready_iter
    from ledger_cli.errors import StoreConflictError

    store = s.store
    # As a claim filters (cli/commands/claim.py): a store that filters by
    # queue reads only the wanted queues' tasks; each candidate's queue is
    # checked all the same.
    filt = None if wanted is None else Filter(wanted, frozenset())
    unit = getattr(store, "snapshot", None) or store.batch
    try:
        with unit():
            now = s.now()
            if live_lease_held(store, now):
                return "held"
            for rec in ready_iter(store, store.load, now, filt):
                if nameable(rec.key) and (wanted is None or queues.of(store, rec.key) in wanted):
                    return "ready"
    except StoreConflictError:
        return "ready"
    return None
