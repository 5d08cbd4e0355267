"""`ledger run`'s lease keeping: renew in the background, and know until when
the lease is *proved*.

A thread renews the lease every third of it. A renewal refused by the ledger
(the fence is stale: someone took over; the record is no longer claimed) means
the lease is lost: `on_lost` is told at once. A renewal that cannot be made (a
store error: the server restarted, SQLite's lock held past its busy timeout)
is tried again, over a new connection where the store has one, with jittered
backoff (first 50 ms, doubling, at most a tenth of the lease), until it lands;
one warning line per outage.

The hard stop: the lease is proved until `sent + lease`, `sent` being the
monotonic time just before the last write that granted or renewed it (the
claim, or a renewal that landed) was sent. The store stamps that write's
`lease_until` from a clock read *after* `sent` (PostgreSQL's clock for a
PostgreSQL store, the host's for SQLite and JSON), so no other worker can see
the lease run out before `sent + lease` on the monotonic clock, whatever the
store clock's offset from ours: only its rate matters (and it must not be
stepped forward). `stop_at()` is a margin before that, the margin being a
tenth of the lease or 1 s, whichever is less; the supervisor stops the
command's process group there (SIGTERM, then SIGKILL by half the margin before
the end), so the command never runs past a lease the runner cannot prove.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

from ledger_cli.cli.context import Session
from ledger_cli.cli.outage import Outage, margin_of
from ledger_cli.engine import queues
from ledger_cli.errors import FencedError, LedgerError, NoKeyError, NotClaimedError

REFUSALS: tuple[type[LedgerError], ...] = (
    FencedError,
    NotClaimedError,
    NoKeyError,
    queues.QueueFullError,
)
"""A renewal or completion refused for a real reason (exit 5, 6 or 3; 4: an
expired lease whose slot went to another claim): the lease is lost."""


class LeaseKeeper:
    """Renews `key`'s lease at `fence` in a thread, from `start()` to `halt()`.

    `sent`: the monotonic time just before the claim (or the last renewal)
    that granted the lease now held was sent.
    """

    def __init__(
        self,
        session: Session,
        key: str,
        owner: str,
        fence: int,
        lease: timedelta,
        sent: float,
        writing: threading.Lock,
        on_lost: Callable[[LedgerError], None],
    ) -> None:
        self.s = session
        self.key = key
        self.owner = owner
        self.fence = fence
        self.lease = lease
        self.lease_s = lease.total_seconds()
        self.margin = margin_of(self.lease_s)
        self.sent = sent
        self.writing = writing
        self.on_lost = on_lost
        self.lost: LedgerError | None = None
        self.stop = threading.Event()
        self.interval = max(self.lease_s / 3, 0.01)
        self.outage = Outage(f"renewing {key}", cap=max(self.lease_s / 10, 0.01))
        self.thread = threading.Thread(target=self._loop, name="ledger-renew", daemon=True)

    # -- the deadline ----------------------------------------------------------

    def proved_until(self) -> float:
        """Monotonic time at which the lease last proved may run out."""
        return self.sent + self.lease_s

    def stop_at(self) -> float:
        """When to stop the command: a margin before the proved end."""
        return self.proved_until() - self.margin

    def kill_at(self) -> float:
        """When a command stopped at `stop_at` that is still running gets SIGKILL."""
        return self.proved_until() - self.margin / 2

    def expired(self) -> bool:
        """The margin before the proved end has been reached: stop the command."""
        return time.monotonic() >= self.stop_at()

    # -- the thread ------------------------------------------------------------

    def start(self) -> None:
        """Renew from now on (again: nothing). The supervisor calls this once the
        command outlives a poll, so that a command over by then starts no
        thread; the first renewal is due a third of the lease after `sent`
        whenever the thread starts."""
        if self.thread.ident is None and not self.stop.is_set():
            self.thread.start()

    def running(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` s for the thread to leave (none started: at once)."""
        if self.thread.ident is not None:
            self.thread.join(timeout)

    def halt(self, wait: bool = True) -> None:
        """Stop renewing. `wait`: until the thread has left (not when it may be
        blocked on a stalled connection: the hard stop does not wait)."""
        self.stop.set()
        if self.thread.ident is not None:
            self.thread.join(None if wait else self.margin)

    def _loop(self) -> None:
        pause = max(self.sent + self.interval - time.monotonic(), 0.0)
        while not self.stop.wait(pause):
            sent = time.monotonic()
            try:
                with self.writing:
                    if self.stop.is_set():
                        return
                    # The renewal's now is read once the write lock is held.
                    for attempt in self.s.writes(self.s.unit_now()):
                        with attempt:
                            now = attempt.clock(self.key)
                            queues.check_stale_slot(self.s.store, self.key, now)
                            self.s.ledger.renew(
                                self.s.actor, self.key, self.owner, self.fence, self.lease, now
                            )
            except REFUSALS as exc:
                # Refused (exit 5 or 6: taken over, cancelled, rebased): the lease is lost.
                self.lost = exc
                self.on_lost(exc)
                return
            except LedgerError as exc:  # the store failed: try again soon
                pause = self.outage.failed(exc, limit="until the lease runs out")
                continue
            self.sent = max(self.sent, sent)
            self.outage.ok()
            pause = max(self.interval - (time.monotonic() - sent), 0.0)
