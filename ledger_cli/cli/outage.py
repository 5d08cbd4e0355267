"""Riding out a store outage: jittered backoff, one warning line per outage,
and the `--give-up-after` limit of the long-lived commands.

An outage is a StoreUnavailableError: a lost or refused PostgreSQL connection
(a restart, a network cut: the store opens a new connection by itself at the
next call), or SQLite's write lock held past the busy timeout; a login the
server refuses (StoreLoginError: a wrong password, an unknown role or
database) is a verdict, never waited out. `ledger run`'s
lease keeping (cli/commands/run/leasekeeper.py) and its completion retry until the lease it
last proved runs out; `run --next --drain` and `claim --next --wait` retry
until the store has been unreachable for longer than `--give-up-after`
(default 5m), then exit 9 with the last error.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import parse_duration
from ledger_cli.errors import LedgerError, StoreError, StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterator

DEFAULT_GIVE_UP = 300.0
"""`--give-up-after` when not given: five minutes."""

FIRST_PAUSE = 0.05
MAX_PAUSE = 3.0
"""Seconds: the backoff between attempts starts at FIRST_PAUSE and doubles up
to MAX_PAUSE (jittered: each pause is drawn from its upper half)."""


MAX_MARGIN = 1.0
"""Seconds: the margin before the proved end of a lease is a tenth of the lease, at most this."""


def margin_of(lease: float) -> float:
    """A tenth of the lease or MAX_MARGIN seconds, whichever is less."""
    return min(lease / 10, MAX_MARGIN)


@contextlib.contextmanager
def cut_after(store: object, seconds: float) -> Iterator[None]:
    """Cut the store's connection (`interrupt()`) when a call made inside
    takes longer than `seconds`: a read on a stalled connection (PostgreSQL)
    never returns by itself; cut, it fails as an outage does. A store with no
    connection to stall (JSON, SQLite: no `interrupt`) is left alone."""
    interrupt = getattr(store, "interrupt", None)
    if interrupt is None:
        yield
        return
    import threading

    timer = threading.Timer(max(seconds, 0.0), interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def parse_give_up(value: str | None) -> float:
    """`--give-up-after D` in seconds (0: give up at the first failure)."""
    if value is None:
        return DEFAULT_GIVE_UP
    return parse_duration(value, "--give-up-after").total_seconds()


def is_outage(exc: BaseException) -> bool:
    """A failure that may pass: the store could not be reached (not a refusal,
    not damage)."""
    return isinstance(exc, StoreUnavailableError)


class Backoff:
    """Exponential backoff with jitter: FIRST_PAUSE, doubling, up to `cap`."""

    def __init__(self, cap: float = MAX_PAUSE, first: float = FIRST_PAUSE) -> None:
        self.cap = max(cap, 0.001)
        self.first = min(first, self.cap)
        self.pause = self.first

    def next(self) -> float:
        """The pause before the next attempt (and double the one after)."""
        import random  # only in an outage: it costs every claim's start-up a millisecond

        pause = self.pause
        self.pause = min(self.pause * 2, self.cap)
        return random.uniform(pause / 2, pause)

    def reset(self) -> None:
        self.pause = self.first


class Outage:
    """An outage as a long-lived command lives through it: the first failure
    prints one warning line (what failed, and for how long it will go on
    trying); the failures after it are silent; a success ends it. Past
    `give_up` seconds of failures, the last error is raised (exit 9)."""

    def __init__(self, what: str, give_up: float = DEFAULT_GIVE_UP, cap: float = MAX_PAUSE) -> None:
        self.what = what
        self.give_up = give_up
        self.backoff = Backoff(cap)
        self.since: float | None = None
        """Monotonic time of the first failure of the current outage (None: no outage)."""
        self.outages = 0

    def failed(
        self, exc: LedgerError, limit: str | None = None, began: float | None = None
    ) -> float:
        """Record a failure; the pause before trying again. Raises `exc` once
        the store has been unreachable for longer than `give_up`. `began`: the
        monotonic time the failed call was made (a call cut after a stall
        failed only then, but the store was unreachable from its start)."""
        now = time.monotonic()
        since = self.since if self.since is not None else began
        if limit is None and (
            self.give_up <= 0 or (since is not None and now - since > self.give_up)
        ):
            raise StoreError(
                f"{output.one_line(str(exc))} (the store was unreachable for more than "
                f"{self.give_up:g}s: giving up)"
            ) from None
        if self.since is None:
            self.since = now if began is None else began
            self.outages += 1
            until = limit if limit is not None else f"for up to {self.give_up:g}s"
            output.diag(f"{output.one_line(str(exc))} ({self.what}: trying again {until})")
        return self.backoff.next()

    def ok(self) -> None:
        """The store answered: the outage, if any, is over."""
        self.since = None
        self.backoff.reset()


def open_session(
    settings: Settings, give_up: float | None, reads: bool = False, existing: bool = False
) -> Session:
    """`Session(settings, reads=reads, existing=existing)`; with `give_up` (a long-lived command:
    `--drain`, `--wait`), a store that cannot be reached yet is tried again as
    any outage is, up to `give_up` seconds."""
    outage = Outage("opening the store", give_up if give_up is not None else 0.0)
    while True:
        try:
            return Session(settings, reads=reads, existing=existing)
        except StoreError as exc:
            if give_up is None or not is_outage(exc):
                raise
            time.sleep(outage.failed(exc))
