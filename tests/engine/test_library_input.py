"""The library refuses what the command line refuses, on every store, before
writing (engine/arguments.py; docs/design.md §2.11 departure 6): a key or need
that is not valid Unicode, a not-before no store can keep, a queue name the
command line could never name, and a snapshot `Ledger.restore` would write
records of that no store reads back. Each is a ValidationError (exit 8) with
the same message on every store, and the store is left as it was. The
sequence, priority and queue length are tests/engine/test_admission_arguments.py's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.engine.store import Store
from ledger_cli.errors import ValidationError
from tests.stores import KINDS, fresh_store

T = Instant.parse("2026-01-02T03:04:05Z")
GOOD = TaskState(key="good", status="pending", sequence=1, created_at=T, updated_at=T)


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with fresh_store(str(request.param), tmp_path, lambda: T) as opened:
        yield opened


def _refused(store: Store, call: Callable[[Ledger], object], message: str) -> None:
    """`call` raises ValidationError (exit 8) with `message`, and writes nothing:
    the store holds what it held, and still admits."""
    before = list(store.range())
    with pytest.raises(ValidationError) as caught:
        call(Ledger(store))
    assert str(caught.value) == message
    assert caught.value.exit_code == 8
    assert list(store.range()) == before
    assert Ledger(store).admit_outcome("me", "after", 1, {}, T, queue="q").admitted


FAR = Instant.from_unix_ns(300_000_000_000_000_000_000)  # the year 11476
ODD_OFFSET = Instant.from_unix_ns(T.unix_ns, 30)  # +00:00:30: RFC 3339 has no seconds there
KEEP = "(RFC 3339, from the year 0000 to 9999, an offset of whole minutes)"
MINUTES = "is not a time a store can keep (RFC 3339, an offset of whole minutes)"


@pytest.mark.parametrize(
    ("not_before", "message"),
    [
        (FAR, f"ledger: not_before 11476-08-15T05:20:00Z is not a time a store can keep {KEEP}"),
        # an offset of seconds: Instant.coerce's refusal, as of every time given
        (ODD_OFFSET, f"ledger: time 2026-01-02T03:04:35+00:00:30 {MINUTES}"),
        (
            datetime(2026, 1, 2, tzinfo=timezone(timedelta(seconds=30))),
            f"ledger: time 2026-01-02T00:00:00+00:00:30 {MINUTES}",
        ),
    ],
)
def test_a_not_before_no_store_can_keep_is_refused(
    store: Store, not_before: Any, message: str
) -> None:
    _refused(
        store, lambda led: led.admit_outcome("me", "k", 1, {}, T, not_before=not_before), message
    )
    # the edges of what a store keeps are admitted
    led = Ledger(store)
    last = Instant.parse("9999-12-31T23:59:59.999999999Z")
    assert led.admit_outcome("me", "a", 1, {}, T, not_before=last).admitted
    zoned = datetime(2026, 1, 2, tzinfo=timezone(timedelta(hours=-5, minutes=-30)))
    assert led.admit_outcome("me", "b", 1, {}, T, not_before=zoned).admitted
    assert led.admit_outcome("me", "c", 1, {}, T, not_before=datetime.now(UTC)).admitted


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        ("a\nb", 'ledger: queue "a\\nb" contains a control character'),
        ("db\x7f", 'ledger: queue "db\\x7f" contains a control character'),
        (
            "a,b",
            'ledger: queue "a,b" has a comma or a space at its ends (--queue a,b names two queues)',
        ),
        (
            " db",
            'ledger: queue " db" has a comma or a space at its ends (--queue a,b names two queues)',
        ),
    ],
)
def test_a_queue_name_the_command_line_cannot_name_is_refused(
    store: Store, queue: str, message: str
) -> None:
    _refused(store, lambda led: led.admit_outcome("me", "k", 1, {}, T, queue=queue), message)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda led: led.admit("me", "a\udc80", 1, {}, T),
            'ledger: key "a\\ufffd" is not valid Unicode',
        ),
        (
            lambda led: led.admit_outcome("me", "k", 1, {}, T, "n\udc80"),
            'ledger: need "n\\ufffd" is not valid Unicode',
        ),
        (
            lambda led: led.admit_outcome("me", "\udcff", 1, {}, T),
            'ledger: key "\\ufffd" is not valid Unicode',
        ),
    ],
)
def test_a_key_that_is_not_valid_unicode_is_one_validation_error(
    store: Store, call: Callable[[Ledger], object], message: str
) -> None:
    """Not the JSON store's StoreError nor PostgreSQL's (exit 9, a healthy store
    blamed), nor a row SQLite keeps that `doctor` then reports. A key beyond
    ASCII that is valid Unicode is admitted."""
    _refused(store, call, message)
    led = Ledger(store)
    assert led.admit("me", "café", 1, {}, T)
    assert led.admit_outcome("me", "東京", 1, {}, T, "café").admitted


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            TaskState(key="x", status="bogus"),
            'ledger: snapshot entry 1: ledger: task "x" has an unknown status "bogus"',
        ),
        (
            TaskState(key="", status="pending"),
            "ledger: snapshot entry 1: ledger: task key must not be empty",
        ),
        (
            TaskState(key="x", status="claimed", lease_until=T),
            'ledger: snapshot entry 1: ledger: claimed task "x" has no Owner',
        ),
        (
            TaskState(key="x", status="pending", blocked_by="y"),
            'ledger: snapshot entry 1: ledger: task "x" names BlockedBy "y" outside StatusBlocked',
        ),
    ],
)
def test_restore_validates_every_record_before_writing_any(
    store: Store, bad: TaskState, message: str
) -> None:
    """The good record before the bad one is not written either; valid records
    are restored as before."""
    _refused(store, lambda led: led.restore(Snapshot((GOOD, bad))), message)
    Ledger(store).restore(Snapshot((GOOD, GOOD.replace(key="other"))))
    assert [r.key for r in store.range()] == ["after", "good", "other"]
