"""`ledger run`'s outcome: written with the claim's fence, through outages.

The completion (or failure) is tried again through a store outage until it
lands or the lease last proved is over (then LeaseLostError, exit 5: the task
will run again). A write whose commit outcome is unknown (its connection
dropped at COMMIT) is settled by reading the record back: the same fence, the
outcome, this owner and actor mean it landed. A call blocked on a stalled
connection is cut when the lease is over (`interrupt`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

from ledger_cli.cli import output
from ledger_cli.cli.commands.run.attempts import annotate_completion
from ledger_cli.cli.commands.run.leasekeeper import REFUSALS, LeaseKeeper
from ledger_cli.cli.context import Session
from ledger_cli.cli.outage import Outage
from ledger_cli.errors import FencedError, LedgerError, StoreDamageError, StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.cli.context import Attempt
    from ledger_cli.engine.record import TaskState


class LeaseLostError(FencedError):
    """The lease was lost, or could not be proved, while the command ran (or
    before its outcome could be recorded): the command was stopped (exit 5)."""


def exit_code(rc: int) -> int:
    """A child's exit status as a shell reports it (128+N when signal N killed it)."""
    return rc if rc >= 0 else 128 - rc


def lost_lease(key: str, why: LedgerError, ended: int | None) -> LeaseLostError:
    """Exit 5 for a lease found lost (a refused renewal or completion: a rebase,
    a cancel, a takeover): `why` is the refusal; `ended` the command's status
    when it had ended by itself (Popen's: -N for signal N), else it was stopped."""
    what = "the command was stopped"
    if ended is not None:
        what = f"the command had ended with exit status {exit_code(ended)}"
    return LeaseLostError(f"{output.within(f'lost the lease on {key}', why.explained())}; {what}")


class OutcomeWrites:
    """The supervisor's outcome writes (a mixin of `Supervisor`, over its
    session, claim and lease keeper)."""

    s: Session
    key: str
    owner: str
    fence: int
    keeper: LeaseKeeper
    recorder: Any
    signum: int | None
    then: Callable[[Attempt, float], Any] | None = None
    """Called in the outcome's unit once the outcome is written, with the unit
    and the monotonic time just before it was sent (`run --drain` claims its
    next task there: one commit, one sync for both); its result, when that
    unit commits, is `then_result`."""
    then_result: Any = None

    def _landed(self, status: str) -> TaskState | None:
        """The record when it shows this runner's outcome (same fence, the
        status, this owner and actor), else None."""
        rec = self.s.load(self.key)
        if (
            rec is not None
            and rec.fence == self.fence
            and rec.status == status
            and rec.owner == self.owner
            and rec.updated_by == self.s.actor
        ):
            return rec
        return None

    def _complete(self, status: str) -> TaskState | None:
        """Record the outcome with the claim's fence, through outages, until it
        lands or the lease last proved is over (LeaseLostError: exit 5)."""
        outage = Outage(f"recording {self.key} as {status}")
        if self.keeper.running():
            raise self._too_late(StoreError("ledger: the store did not answer the last renewal"))
        if getattr(self.s.store, "interrupt", None) is None:
            return self._complete_until_landed(status, outage)  # no connection to stall
        # A call blocked on a stalled connection is cut when the lease is over.
        timer = threading.Timer(
            max(self.keeper.proved_until() - time.monotonic(), 0.0), self._interrupt
        )
        timer.daemon = True
        timer.start()
        try:
            return self._complete_until_landed(status, outage)
        finally:
            timer.cancel()

    def _complete_until_landed(self, status: str, outage: Outage) -> TaskState | None:
        uncertain = False  # a try failed: it may have landed all the same
        damaged = False  # a try failed on a damaged file
        while True:
            try:
                sent = time.monotonic()
                # None: the unit reads the store's clock with its load of the key
                # (PostgreSQL: no round trip of its own); else --now, or the
                # clock read once the write lock is held.
                for attempt in self.s.writes(self.s.unit_now(), "now_with"):
                    with attempt:
                        self.then_result = None  # a unit rolled back has none
                        now = attempt.clock(self.key)
                        self.s.ledger.complete(
                            self.s.actor, self.key, self.owner, self.fence, status, now
                        )
                        annotate_completion(self.s, self.key, self.recorder)
                        rec = self.s.load(self.key)
                        if self.then is not None and self.signum is None:
                            self.then_result = self.then(attempt, sent)
                outage.ok()
                return rec
            except REFUSALS:
                self._then_dropped()
                if uncertain:  # refused because the earlier try landed?
                    with contextlib.suppress(StoreError):
                        landed = self._landed(status)
                        if landed is not None:
                            return landed
                raise
            except StoreError as exc:
                self._then_dropped()
                # Damage (a corrupt file, not an outage) does not pass by
                # waiting: one more try (its recovery may rebuild a derived
                # index a committed journal left, journal.py), then exit 9
                # naming the file rather than spin until the lease runs out.
                if isinstance(exc, StoreDamageError):
                    if damaged:
                        raise
                    damaged = True
                uncertain = True
                with contextlib.suppress(StoreError):
                    landed = self._landed(status)
                    if landed is not None:
                        outage.ok()
                        return landed
                left = self.keeper.proved_until() - time.monotonic()
                if left <= 0:
                    raise self._too_late(exc) from None
                pause = outage.failed(exc, limit="until the lease runs out")
                time.sleep(min(pause, left))

    def _then_dropped(self) -> None:
        """The unit failed: whatever `then` did in it is not known to have
        committed, so there is no result; a try again writes the outcome alone."""
        self.then, self.then_result = None, None

    def _interrupt(self) -> None:
        """Cut the store's connection under a call blocked on it (PostgreSQL:
        a stalled connection), so that it fails instead of hanging."""
        interrupt = getattr(self.s.store, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def _too_late(self, exc: LedgerError) -> LeaseLostError:
        return LeaseLostError(
            f"{output.one_line(exc.explained())} (could not record the outcome of {self.key} "
            "before its lease ran out: it may run again)"
        )
