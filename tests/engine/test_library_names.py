"""The names a library call gives (key, need, actor, owner) follow one rule on
every store, checked before any store is read (engine/ledger.py `_names`,
engine/admission.py `check_names`, engine/arguments.py; docs/design.md §2.11,
departures 5 and 6): each a str, a need not empty, and valid Unicode, as the
command line's own checks (exit 2) ask. A key an operation names but does not
create may also be a key the Go service wrote with bytes that are not UTF-8,
as the command line reads them (U+DC80..U+DCFF). Anything else is one
ValidationError (exit 8) with one message on every store, and the store is
left as it was: no memory-only EncodeError, no JSON AttributeError, no
PostgreSQL TypeError, no row SQLite writes as "123" or as a BLOB.
`Ledger.prune` refuses a negative age, and `Ledger.restore` a snapshot naming
a key twice, before writing, as `ledger prune` and `ledger restore` do."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.engine.store import Store
from ledger_cli.errors import (
    LedgerError,
    NoKeyError,
    RestoreConflictError,
    ValidationError,
)
from tests.stores import KINDS, fresh_store

T = Instant.parse("2026-01-02T03:04:05Z")
LEASE = timedelta(minutes=5)
BAD_OWNER = os.fsdecode(b"worker-\xff")  # os.fsdecode's lone surrogate: U+DCFF
BAD_ACTOR = os.fsdecode(b"actor-\xfe")


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store of each kind holding "k" pending and "c" claimed by "w" (fence 1)."""
    with fresh_store(str(request.param), tmp_path, lambda: T) as opened:
        led = Ledger(opened)
        assert led.admit("me", "k", 1, {"n": 1}, T)
        assert led.admit("me", "c", 1, {"n": 2}, T)
        assert led.claim("me", "c", "w", LEASE, T) == 1
        yield opened


def _refused(
    store: Store,
    call: Callable[[Ledger], object],
    message: str,
    error: type[LedgerError] = ValidationError,
) -> None:
    """`call` raises `error` (exit 8) with `message`, and the store holds
    exactly what it held (every field of every record)."""
    before = list(store.range())
    with pytest.raises(LedgerError) as caught:
        call(Ledger(store))
    assert type(caught.value) is error
    assert str(caught.value) == message
    assert caught.value.exit_code == 8
    assert list(store.range()) == before


TYPES: dict[str, tuple[Callable[[Ledger], object], str]] = {
    "admit-bytes-key": (
        lambda led: led.admit("me", b"job", 1, None, T),  # type: ignore[arg-type]
        "ledger: key must be a str, not bytes",
    ),
    "admit-int-actor": (
        lambda led: led.admit(123, "k2", 1, None, T),  # type: ignore[arg-type]
        "ledger: actor must be a str, not int",
    ),
    "admit-bytes-need": (
        lambda led: led.admit("me", "k2", 1, None, T, b"k"),  # type: ignore[arg-type]
        "ledger: need must be a str, not bytes",
    ),
    "outcome-int-key": (
        lambda led: led.admit_outcome("me", 7, 1, None, T),  # type: ignore[arg-type]
        "ledger: key must be a str, not int",
    ),
    "outcome-none-need": (
        lambda led: led.admit_outcome("me", "k2", 1, None, T, "k", None),  # type: ignore[arg-type]
        "ledger: need must be a str, not NoneType",
    ),
    "claim-bytes-owner": (
        lambda led: led.claim("me", "k", b"w", LEASE, T),  # type: ignore[arg-type]
        "ledger: owner must be a str, not bytes",
    ),
    "claim-int-owner": (
        lambda led: led.claim("me", "k", 7, LEASE, T),  # type: ignore[arg-type]
        "ledger: owner must be a str, not int",
    ),
    "claim-bytes-key": (
        lambda led: led.claim("me", b"k", "w", LEASE, T),  # type: ignore[arg-type]
        "ledger: key must be a str, not bytes",
    ),
    "renew-int-actor": (
        lambda led: led.renew(1, "c", "w", 1, LEASE, T),  # type: ignore[arg-type]
        "ledger: actor must be a str, not int",
    ),
    "release-bytes-owner": (
        lambda led: led.release("me", "c", b"w", 1, T),  # type: ignore[arg-type]
        "ledger: owner must be a str, not bytes",
    ),
    "takeover-none-owner": (
        lambda led: led.takeover("me", "c", None, LEASE, T),  # type: ignore[arg-type]
        "ledger: owner must be a str, not NoneType",
    ),
    "complete-bytes-key": (
        lambda led: led.complete("me", b"c", "w", 1, "completed", T),  # type: ignore[arg-type]
        "ledger: key must be a str, not bytes",
    ),
    "cancel-int-key": (
        lambda led: led.cancel("me", 1, T),  # type: ignore[arg-type]
        "ledger: key must be a str, not int",
    ),
    "retry-bytes-actor": (
        lambda led: led.retry(b"me", "k", T),  # type: ignore[arg-type]
        "ledger: actor must be a str, not bytes",
    ),
    "state-int": (
        lambda led: led.state(1),  # type: ignore[arg-type]
        "ledger: key must be a str, not int",
    ),
    "blocked-none": (
        lambda led: led.blocked(None),  # type: ignore[arg-type]
        "ledger: key must be a str, not NoneType",
    ),
}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_a_name_that_is_not_a_str_is_one_validation_error(store: Store, name: str) -> None:
    call, message = TYPES[name]
    _refused(store, call, message)


UNICODE: dict[str, tuple[Callable[[Ledger], object], str]] = {
    "admit-actor": (
        lambda led: led.admit("a\ud800", "k2", 1, None, T),
        'ledger: actor "a\\ufffd" is not valid Unicode',
    ),
    "outcome-actor": (
        lambda led: led.admit_outcome(BAD_ACTOR, "k2", 1, None, T, queue="q"),
        'ledger: actor "actor-\\ufffd" is not valid Unicode',
    ),
    "claim-owner": (
        lambda led: led.claim(BAD_ACTOR, "k", BAD_OWNER, LEASE, T),
        'ledger: actor "actor-\\ufffd" is not valid Unicode',
    ),
    "claim-owner-only": (
        lambda led: led.claim("me", "k", BAD_OWNER, LEASE, T),
        'ledger: owner "worker-\\ufffd" is not valid Unicode',
    ),
    "takeover-owner": (
        lambda led: led.takeover("me", "c", "w\udfff", LEASE, T),
        'ledger: owner "w\\ufffd" is not valid Unicode',
    ),
    "complete-actor": (
        lambda led: led.complete(BAD_ACTOR, "c", "w", 1, "completed", T),
        'ledger: actor "actor-\\ufffd" is not valid Unicode',
    ),
    "cancel-actor": (
        lambda led: led.cancel("\ud83d", "k", T),
        'ledger: actor "\\ufffd" is not valid Unicode',
    ),
}


@pytest.mark.parametrize("name", sorted(UNICODE))
def test_an_actor_or_owner_that_is_not_valid_unicode_is_one_validation_error(
    store: Store, name: str
) -> None:
    """Not kept as a lone surrogate (memory), U+FFFD (JSON), a StoreError (PostgreSQL)
    or bytes `doctor` calls damage (SQLite)."""
    call, message = UNICODE[name]
    _refused(store, call, message)


UNNAMEABLE: dict[str, Callable[[Ledger], object]] = {
    "state": lambda led: led.state("a\ud800"),
    "blocked": lambda led: led.blocked("a\ud800"),
    "claim": lambda led: led.claim("me", "a\ud800", "w", LEASE, T),
    "renew": lambda led: led.renew("me", "a\ud800", "w", 1, LEASE, T),
    "release": lambda led: led.release("me", "a\ud800", "w", 1, T),
    "complete": lambda led: led.complete("me", "a\ud800", "w", 1, "failed", T),
    "cancel": lambda led: led.cancel("me", "a\ud800", T),
    "retry": lambda led: led.retry("me", "a\ud800", T),
    "escaped-pair": lambda led: led.state("\udcc3\udca9"),  # would be the bytes of "é"
}


@pytest.mark.parametrize("name", sorted(UNNAMEABLE))
def test_a_key_no_store_can_hold_is_refused_on_every_call(store: Store, name: str) -> None:
    """A lone surrogate that stands for no byte (`a\\ud800`): not SQLite's
    StoreError (exit 9) while the others said there is no record."""
    shown = '"\\ufffd\\ufffd"' if name == "escaped-pair" else '"a\\ufffd"'
    _refused(store, UNNAMEABLE[name], f"ledger: key {shown} is not valid Unicode")


def test_a_key_of_go_bytes_is_still_named_as_the_command_line_reads_it(store: Store) -> None:
    """`ledger claim $'key-\\xff'` reads the key as U+DCFF: the library takes it
    for what it is, a key no record of these stores holds."""
    led = Ledger(store)
    key = os.fsdecode(b"key-\xff")
    assert led.state(key) is None
    assert led.blocked(key) is None
    with pytest.raises(NoKeyError):
        led.claim("me", key, "w", LEASE, T)
    with pytest.raises(NoKeyError):
        led.cancel("me", key, T)
    # and the ASCII and Unicode names of every call still work
    assert led.claim("me", "k", "wörker", LEASE, T) == 1
    led.complete("ąctor", "k", "wörker", 1, "completed", T)
    assert led.state("k") is not None


def test_an_empty_need_is_refused_as_the_command_line_refuses_it(store: Store) -> None:
    for call in (
        lambda led: led.admit("me", "x", 1, None, T, ""),
        lambda led: led.admit_outcome("me", "x", 1, None, T, "k", ""),
    ):
        _refused(store, call, "ledger: need must not be empty")


@pytest.mark.parametrize(
    ("older_than", "message"),
    [
        (timedelta(seconds=-1), "ledger: older_than -1s is negative"),
        (timedelta(days=-2), "ledger: older_than -172800s is negative"),
        (3600, "ledger: older_than must be a timedelta, not int"),
    ],
)
def test_prune_refuses_an_age_the_command_line_refuses(
    store: Store, older_than: Any, message: str
) -> None:
    """A negative age would prune records updated after `now` (`ledger prune
    --older-than -1s` is exit 2); an age of zero prunes as before."""
    led = Ledger(store)
    led.complete("me", "c", "w", 1, "completed", T)
    tail = " (a prune takes records last updated at least that long before now)"
    full = message + tail if "negative" in message else message
    _refused(store, lambda led: led.prune(older_than, T), full)
    assert led.prune(timedelta(0), T, dry_run=True) == 1


def test_restore_of_a_key_twice_writes_nothing(store: Store) -> None:
    """As `ledger restore` says it (RestoreConflictError, exit 8), before the
    first copy is written."""
    rec = TaskState(key="z", status="pending", sequence=1, created_at=T, updated_at=T)
    other = rec.replace(key="y")
    twice = Snapshot((rec, other, rec.replace(sequence=2)))
    message = 'ledger: restore: key "z" appears twice in the snapshot (entries 0 and 2)'
    _refused(store, lambda led: led.restore(twice), message, RestoreConflictError)
    Ledger(store).restore(Snapshot((rec, other)))
    assert [r.key for r in store.range()] == ["c", "k", "y", "z"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"key": b"z"},
            "ledger: snapshot entry 1: ledger: key must be a str, not bytes",
        ),
        (
            {"status": "claimed", "owner": BAD_OWNER, "fence": 1, "lease_until": T},
            'ledger: snapshot entry 1: ledger: owner "worker-\\ufffd" is not valid Unicode',
        ),
        (
            {"updated_by": "a\ud800"},
            'ledger: snapshot entry 1: ledger: updated_by "a\\ufffd" is not valid Unicode',
        ),
        (
            {"needs": ("y", 3)},
            "ledger: snapshot entry 1: ledger: need must be a str, not int",
        ),
        (
            {"key": "z\udcff"},
            'ledger: snapshot entry 1: ledger: key "z\\ufffd" is not valid Unicode',
        ),
    ],
)
def test_restore_of_a_record_with_a_name_no_store_keeps_writes_nothing(
    store: Store, bad: dict[str, Any], message: str
) -> None:
    """The good record before it is not written either: a restored owner of
    bytes was kept by SQLite as bytes `doctor` calls damage."""
    rec = TaskState(key="z", status="pending", sequence=1, created_at=T, updated_at=T)
    snap = Snapshot((rec.replace(key="y"), rec.replace(**bad)))
    _refused(store, lambda led: led.restore(snap), message)
