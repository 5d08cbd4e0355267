"""Every time the library is given (each `Ledger` method's `now`, and
`not_before`) is refused when its UTC offset is not a whole minute, on every
store and before anything is written (`Instant.coerce`; docs/design.md §2.11
departure 6): RFC 3339, the text every store writes, has no seconds in an
offset, so the store would keep another instant than the one given (a JSON
store's ready index then missed the task, and a lease ended 30 seconds apart
on two stores). Whole-minute offsets, and a fraction of a second beyond one,
are kept at their instant on every store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.store import Store
from ledger_cli.errors import ValidationError
from tests.stores import KINDS, fresh_store

T = Instant.parse("2026-01-02T03:04:05Z")
LEASE = timedelta(minutes=5)
KEEP = "is not a time a store can keep (RFC 3339, an offset of whole minutes)"

ODD: list[tuple[Any, str]] = [
    (
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(seconds=30))),
        f"ledger: time 2026-01-02T03:04:05+00:00:30 {KEEP}",
    ),
    (  # zoneinfo's Africa/Monrovia before 1972
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(-timedelta(minutes=44, seconds=30))),
        f"ledger: time 2026-01-02T03:04:05-00:44:30 {KEEP}",
    ),
    (Instant.from_unix_ns(T.unix_ns, -30), f"ledger: time 2026-01-02T03:03:35-00:00:30 {KEEP}"),
]
"""A `now` whose offset has seconds, and the one message every store gives."""

CALLS: dict[str, Callable[[Ledger, Any], object]] = {
    "admit": lambda led, now: led.admit("me", "new", 1, {}, now),
    "admit_outcome": lambda led, now: led.admit_outcome("me", "new", 1, {}, now),
    "admit_outcome-not_before": lambda led, now: led.admit_outcome(
        "me", "new", 1, {}, T, not_before=now
    ),
    "claim": lambda led, now: led.claim("me", "p", "w", LEASE, now),
    "renew": lambda led, now: led.renew("me", "c", "w", 1, LEASE, now),
    "release": lambda led, now: led.release("me", "c", "w", 1, now),
    "takeover": lambda led, now: led.takeover("me", "c", "v", LEASE, now),
    "complete": lambda led, now: led.complete("me", "c", "w", 1, "completed", now),
    "retry": lambda led, now: led.retry("me", "f", now),
    "cancel": lambda led, now: led.cancel("me", "p", now),
    "prune": lambda led, now: led.prune(timedelta(0), now),
}
"""Each method that takes a time, called where it would otherwise write."""


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store of each kind holding a pending `p`, a claimed `c` (owner w,
    fence 1) and a failed `f`."""
    with fresh_store(str(request.param), tmp_path, lambda: T) as opened:
        led = Ledger(opened)
        for key in ("p", "c", "f"):
            assert led.admit("me", key, 1, {}, T)
        assert led.claim("me", "c", "w", timedelta(days=1), T) == 1
        assert led.claim("me", "f", "w", LEASE, T) == 1
        led.complete("me", "f", "w", 1, "failed", T)
        yield opened


@pytest.mark.parametrize(("now", "message"), ODD)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_time_with_an_offset_of_seconds_is_refused_before_any_write(
    store: Store, name: str, now: Any, message: str
) -> None:
    """ValidationError (exit 8, bad input), the same message on every store,
    and every record as it was: the call that would have written (a claim,
    a completion, a prune of the failed task) wrote nothing."""
    before = list(store.range())
    with pytest.raises(ValidationError) as caught:
        CALLS[name](Ledger(store), now)
    assert str(caught.value) == message
    assert caught.value.exit_code == 8
    assert list(store.range()) == before
    assert Ledger(store).claim("me", "p", "w", LEASE, T) == 1  # the store still works


@pytest.mark.parametrize(
    "offset",
    [
        timedelta(0),
        timedelta(hours=-5, minutes=-30),
        timedelta(hours=23, minutes=59),
        timedelta(minutes=1, microseconds=500_000),  # a fraction of a second beyond a minute
        timedelta(microseconds=-250),
    ],
)
def test_a_time_in_any_whole_minute_offset_is_kept_at_its_instant(
    store: Store, offset: timedelta
) -> None:
    """The claim's time and lease end are the instant given on every store (the
    stored RFC 3339 text names it again), so a lease ends at the same moment
    whichever store holds it."""
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(offset))
    at = Instant.from_datetime(now.astimezone(UTC))
    led = Ledger(store)
    assert led.claim("me", "p", "w", LEASE, now) == 1
    rec = led.state("p")
    assert rec is not None
    assert rec.updated_at == at
    assert rec.lease_until == at + LEASE
    assert Instant.parse(str(rec.lease_until)) == at + LEASE


def test_a_memstore_clock_in_an_offset_of_seconds_still_evicts() -> None:
    """The eviction clock of a bounded MemStore is compared, never written, so
    an offset of seconds there is no error: the write that evicts succeeds, a
    claimed record under a live lease is kept, and the oldest other record goes."""
    from ledger_cli.engine.memstore import MemStore, MemStoreOptions

    clock = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(seconds=30)))
    store = MemStore(MemStoreOptions(max_entries=2, now=lambda: clock))
    led = Ledger(store)
    assert led.admit("me", "held", 1, {}, T)
    assert led.claim("me", "held", "w", timedelta(hours=1), T) == 1
    assert led.admit("me", "old", 1, {}, T)
    assert led.admit("me", "new", 1, {}, T)
    assert [rec.key for rec in store.range()] == ["held", "new"]
