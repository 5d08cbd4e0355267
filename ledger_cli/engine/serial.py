"""One lock for the writes that block, fail or un-block (docs/design.md §6.2): the
extension's answer to a store whose batch excludes nobody.

`reopen`'s argument needs, of a block and the un-block of its blocker (each a
write followed by a read), that one of the two reads sees the other's write.
The JSON and SQLite stores hold an exclusive lock for a whole batch, and an
operation outside a batch is a sequence of single linearizable steps, so the
argument holds there as it stands. A PostgreSQL batch is a READ COMMITTED
transaction: two open transactions do not see each other's writes, so both
reads can miss both writes. There every operation that may write a block, a
failure or an un-block runs under one transaction-scoped lock
(`PostgresStore.lock_blocks`: `pg_advisory_xact_lock`, per schema), taken
before its first write and held to the commit; outside a batch the operation
becomes a transaction of its own for that. Such writers then follow one
another, each seeing every earlier one committed: the races of `reopen` do
not arise between them. Writes that never block or un-block (a claim that is
granted, a completion as completed, renew, release, an admission whose needs
are all completed) take no lock.

The cost: such transactions no longer commit side by side. Concurrent
admissions that need unfinished work (a DAG submitted ahead of its work) run
one at a time on PostgreSQL (`benchmarks/bench_retry.py` measures it).

Deadlocks: a transaction waiting for the lock must hold no row lock another
holder may want. One operation takes it before its first write; a batch of
several (`admit --batch`) takes it at its start (`take`). Row locks can still
meet in opposite orders (a completion's ready trigger locking the dependents
of its key against a transaction holding one of them; a `claim --next` batch
holding its candidates FOR UPDATE when a refused claim blocks): PostgreSQL
then rolls one transaction back whole, nothing of it written
(`StoreConflictError`). Whoever opened that transaction runs it again
(`rerun.py`): here, the batch this module opens for an operation outside
one; the command line's `Session.writes` for its own batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.core import Core
from ledger_cli.errors import LedgerError, StoreError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from ledger_cli.engine.store import Store

    T = TypeVar("T")


def take(store: Store) -> bool:
    """Inside an open batch of a store that needs it: take the lock now (held to
    the batch's end). False when the store needs none or no batch is open."""
    lock = getattr(store, "lock_blocks", None)
    return bool(lock()) if callable(lock) else False


def blocking_writes(core: Core, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` under the lock: in the open batch, or in a batch of its own
    (a refusal after a write keeps the write, as outside a batch, and is raised
    after the commit), run again when the store rolled it back to break a
    deadlock; its events fire after the commit, those of a rolled-back attempt
    never. A plain call on stores that need no lock."""
    store = core.store
    lock = getattr(store, "lock_blocks", None)
    if not callable(lock) or lock():
        return fn(*args)
    from ledger_cli.engine.rerun import rerun

    return rerun(lambda: _own_batch(core, lock, fn, args))


def _own_batch(core: Core, lock: Callable[[], object], fn: Callable[..., T], args: Any) -> T:
    refusal: LedgerError | None = None
    result: T | None = None
    with core.holding_events() as held:
        with core.store.batch():
            lock()
            try:
                result = fn(*args)
            except StoreError:
                raise
            except LedgerError as exc:
                refusal = exc
        held.release()  # committed: the events describe writes that landed
    if refusal is not None:
        raise refusal
    return result  # type: ignore[return-value]
