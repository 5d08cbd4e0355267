"""The outermost `PostgresStore.batch()`: one transaction in pipeline mode.

psycopg's `transaction()` sends BEGIN and waits for its answer before the first
statement, and waits for each statement whose result nobody reads (a history
INSERT) before COMMIT: two round trips a batch that carry nothing back. Here the
connection is in pipeline mode for the transaction: BEGIN is queued and goes
out with the first statement whose result is read (one round trip); statements
whose results are not read (the history, the advisory lock) go out at once but
are answered with the next read, or with COMMIT at the end (one Sync, one
round trip). The statements run in the order sent, as before; the server
answers each in turn, so an error is raised at the next read or at the commit.

Rollback: an exception in the block (or a statement that failed) ends in
ROLLBACK after the pipeline is synced, so a failure anywhere writes nothing.
A failed statement aborts the pipeline up to the Sync, COMMIT included: the
transaction is then in the failed state and rolled back here too.

Nested batches stay psycopg's savepoints (`transaction()` inside the pipeline:
it syncs around them so that `ROLLBACK TO` runs after a failure).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg


def supported(pg: Any) -> bool:
    """Pipeline mode needs libpq 14 or later (psycopg[binary] bundles one)."""
    return bool(pg.Pipeline.is_supported())


class Pipelined:
    """Batches of one connection (in autocommit mode) on a pipeline."""

    def __init__(self, conn: psycopg.Connection[Any], pg: Any) -> None:
        self._conn = conn
        self._pg = pg
        self._pipe: psycopg.Pipeline | None = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN … COMMIT for the block (the outermost batch)."""
        conn, pg = self._conn, self._pg
        status = pg.pq.TransactionStatus
        try:
            with conn.pipeline() as pipe:
                self._pipe = pipe
                conn.execute("BEGIN")
                try:
                    yield
                except BaseException:
                    # Collect every answer now (errors included: the block's own
                    # exception is the one raised), so that leaving the pipeline
                    # has nothing to report and ROLLBACK below runs.
                    with contextlib.suppress(pg.Error):
                        pipe.sync()
                    raise
                commit = conn.execute("COMMIT")  # sent with the Sync of leaving the pipeline
            if commit.statusmessage != "COMMIT":  # COMMIT of a failed transaction rolls back
                raise pg.OperationalError(
                    f"the transaction was rolled back ({commit.statusmessage})"
                )
        finally:
            self._pipe = None
            if not conn.closed and conn.info.transaction_status in (status.INTRANS, status.INERROR):
                with contextlib.suppress(pg.Error):
                    conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def savepoint(self, depth: int) -> Iterator[None]:
        """A nested batch: SAVEPOINT … RELEASE, both sent with later statements;
        ROLLBACK TO it when the block raises (after a Sync: a failed statement
        aborts what the pipeline holds until then)."""
        conn, pipe = self._conn, self._pipe
        assert pipe is not None
        name = f"ledger_batch_{depth}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            with contextlib.suppress(self._pg.Error):
                pipe.sync()
            # Not suppressed: when the savepoint is gone (an earlier statement
            # failed), the whole transaction must fail, not commit without it.
            conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
            conn.execute(f"RELEASE SAVEPOINT {name}")
            pipe.sync()
            raise
        conn.execute(f"RELEASE SAVEPOINT {name}")
