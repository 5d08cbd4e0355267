"""Queues and limits (docs/design.md §8.7; engine/queues.py) on the SQL stores: the side
tables `ledger_queue (key, queue)`, one row per key outside the `default`
queue, and `ledger_limit (queue, n)`. The Go schema of `ledger_tasks` stays
as it is; a row the Go service writes has no queue row, so it is in
`default`. A store made before these tables gets them at its first write of
a queue or a limit (`ledger_revoked`: of a revoked lease); until then every
read finds none: each read asks first whether the table is there
(dialect.py `_queue_tables`, `_revoked_table`), the ready scan through
`ledger_queue`'s index included (claims.py), and a read never makes one."""

from __future__ import annotations

from ledger_cli.stores.sql.codec import damaged_row, shown

QUEUE_TABLE = "ledger_queue"
LIMIT_TABLE = "ledger_limit"
REVOKED_TABLE = "ledger_revoked"


EXISTS = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)"
SELECT_ONE = "SELECT queue FROM ledger_queue WHERE key = {p}"
SELECT_ALL = "SELECT key, queue FROM ledger_queue"
DELETE = "DELETE FROM ledger_queue WHERE key = {p}"
UPSERT = (
    "INSERT INTO ledger_queue (key, queue) VALUES ({p}, {p})"
    " ON CONFLICT (key) DO UPDATE SET queue = excluded.queue"
)
LIMITS = "SELECT queue, n FROM ledger_limit"
DELETE_LIMIT = "DELETE FROM ledger_limit WHERE queue = {p}"
UPSERT_LIMIT = (
    "INSERT INTO ledger_limit (queue, n) VALUES ({p}, {p})"
    " ON CONFLICT (queue) DO UPDATE SET n = excluded.n"
)


CLAIMED = (
    "SELECT t.key, coalesce(q.queue, 'default'), t.lease_until, 0 FROM ledger_tasks t"
    " LEFT JOIN ledger_queue q ON q.key = t.key WHERE t.status = 'claimed'"
)
"""Every claimed task's queue and lease (held slots, engine/queues.py); 0: not revoked."""
CLAIMED_DEFAULT = "SELECT key, 'default', lease_until, 0 FROM ledger_tasks WHERE status = 'claimed'"
"""CLAIMED on an SQLite store that has no queue table yet."""
AND_REVOKED = " UNION ALL SELECT key, queue, lease_until, 1 FROM ledger_revoked"
"""With CLAIMED: the revoked leases too, in the same query (one snapshot: a
revocation committing meanwhile is seen whole or not at all)."""
REVOKED_EXISTS = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
REVOKED = "SELECT key, fence, queue, lease_until FROM ledger_revoked"
"""`ledger_revoked (key, fence, queue, lease_until)`: the leases a cancel, rebase or
block took from a holder that may still run, each holding a slot of its queue
until its lease_until (engine/revoked.py); written in the revoking
write's transaction, the ended rows dropped by the next such write."""
KEEP_REVOKED = (
    "INSERT INTO ledger_revoked (key, fence, queue, lease_until) VALUES ({p}, {p}, {p}, {p})"
    " ON CONFLICT (key, fence) DO NOTHING"
)
DROP_REVOKED = "DELETE FROM ledger_revoked WHERE key = {p} AND fence = {p}"
LOCK_TASK = "SELECT 1 FROM ledger_tasks WHERE key = {p} FOR UPDATE"
LOCK_LIMIT = "SELECT n FROM ledger_limit WHERE queue = {p} FOR UPDATE"
"""PostgreSQL: a claim in a queue with a limit locks the queue's limit row
before it counts the held slots, so that two claimers of the last slot take
turns (engine/queues.py Slots.lock_slot)."""


_QUEUE_OF = "coalesce((SELECT q.queue FROM ledger_queue q WHERE q.key = {row}.key), 'default')"


def condition(
    wanted: frozenset[str] | None, skip: frozenset[str], mark: str, row: str = "d"
) -> tuple[str, tuple[str, ...]] | None:
    """The ready scan's condition on a candidate's queue (` AND …`, its
    parameters) for claiming from `wanted` (None: every queue) less `skip`
    (queues at their limit); None when no queue is left. Applied in the
    index scan, before any row is returned (or locked, FOR UPDATE SKIP
    LOCKED): the candidates of other queues cost an index probe each, not a
    round trip and a queue lookup."""
    of = _QUEUE_OF.format(row=row)
    if wanted is not None:
        names = sorted(wanted - skip)
        if not names:
            return None
        return f" AND {of} IN ({', '.join([mark] * len(names))})", tuple(names)
    if not skip:
        return "", ()
    names = sorted(skip)
    return f" AND {of} NOT IN ({', '.join([mark] * len(names))})", tuple(names)


def limit_of(queue: str, n: object) -> int:
    """A fetched limit; StoreDamageError naming the queue when it is not an
    integer of at least 1 (a hand edit: SQLite's CHECK lets text through)."""
    if type(n) is int and n >= 1:
        return n
    row = f"the ledger_limit row of queue {shown(queue)!r}"
    remedy = f"`ledger limit {shown(queue)} N` (or --clear) writes it again"
    raise damaged_row(row, "n", "not an integer of at least 1", remedy)
