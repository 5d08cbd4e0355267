"""Running a transaction again that the store rolled back to break a deadlock.

PostgreSQL answers two transactions waiting for each other's row locks by
rolling one of them back whole (SQLSTATE 40P01; 40001 for a serialization
failure): nothing it wrote stays, and its client may simply run it again
(the PostgreSQL manual's advice). The store reports it as
`StoreConflictError`; only the opener of the outermost transaction can run
it again, since an inner part cannot undo its caller's rolled-back work:
`serial.blocking_writes` for the batch it opens for one operation, the
command line's `Session.writes` for each of its batches, and
`PostgresStore.compare_and_swap` for a lone statement outside any batch.

An extension beyond the Go package, whose stores write one row per statement.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from ledger_cli.errors import StoreConflictError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

ATTEMPTS = 8
"""Runs in all; the error of the last one reaches the caller."""


def pause(attempt: int) -> float:
    """Seconds to wait before run `attempt + 2`: random (the two losers of one
    deadlock must not meet again in step), growing from 10 ms to at most 0.5 s."""
    spread = int.from_bytes(os.urandom(2), "big") / 0xFFFF  # not random's: it imports hashlib
    return spread * min(0.5, 0.01 * 2.0**attempt)


def rerun(
    fn: Callable[[], T],
    *,
    attempts: int = ATTEMPTS,
    before_again: Callable[[], None] = lambda: None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`fn()`, run again (after `before_again()`, which discards what the
    rolled-back run left outside the store) while it raises StoreConflictError,
    at most `attempts` runs in all."""
    for attempt in range(attempts - 1):
        try:
            return fn()
        except StoreConflictError:
            before_again()
        sleep(pause(attempt))
    return fn()
