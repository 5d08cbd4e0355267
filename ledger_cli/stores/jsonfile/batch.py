"""The writes of an open `batch()`, held in memory until the outermost batch commits."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState

if TYPE_CHECKING:
    from ledger_cli.stores.jsonfile.attemptfiles import Op


class PendingBatch:
    """Writes of an open batch, in memory until the outermost batch commits.

    A nested batch is a savepoint: while one is open, every write logs the
    value it replaced, so an exception leaving the nested block undoes its
    writes only.
    """

    __slots__ = (
        "attempts",
        "cache",
        "history",
        "marks",
        "moved",
        "owns_lock",
        "records",
        "thread",
        "undo",
    )

    def __init__(self) -> None:
        self.records: dict[str, tuple[TaskState, bytes]] = {}
        self.history: list[bytes] = []
        self.attempts: list[Op] = []
        """Attempt files written with the batch, in order (attemptfiles.py)."""
        self.thread = threading.get_ident()
        self.owns_lock = False
        self.undo: list[tuple[str, tuple[TaskState, bytes] | None]] = []
        self.marks: list[tuple[int, int, int]] = []
        self.cache: dict[str, TaskState | None] = {}
        """Records read while the batch holds the lock: nobody else can change them."""
        self.moved: set[str] | None = None
        """At commit, the records whose tally membership the batch changes
        (tally.noted_moves: only their shard lines are rewritten); None: all."""

    def put(self, digest: str, rec: TaskState, data: bytes) -> None:
        if self.marks:
            self.undo.append((digest, self.records.get(digest)))
        self.records[digest] = (rec, data)

    def add_attempt(self, op: Op) -> None:
        self.attempts.append(op)

    def mark(self) -> tuple[int, int, int]:
        """Where a savepoint begins (what `rollback` goes back to)."""
        return len(self.undo), len(self.history), len(self.attempts)

    def rollback(self, mark: tuple[int, int, int]) -> None:
        undo_at, history_at, attempts_at = mark
        for digest, previous in reversed(self.undo[undo_at:]):
            if previous is None:
                del self.records[digest]
            else:
                self.records[digest] = previous
        del self.undo[undo_at:]
        del self.history[history_at:]
        del self.attempts[attempts_at:]

    def mine(self) -> bool:
        """True in the thread that opened the batch."""
        return self.thread == threading.get_ident()
