"""The arguments of an admission follow one rule on every store (engine/record.py,
docs/design.md §2.11): a sequence is Go's uint64 (an int, not a bool, from 0 to
2**64-1), a priority an int from -1000 to 1000, a queue name 1 to 64 bytes of
UTF-8. Anything else is a ValidationError (exit 8) raised before any store is
touched, so nothing is written and the store stays whole (a priority out of
range used to break the JSON store's ready index)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.store import Store
from ledger_cli.errors import ValidationError
from tests.stores import KINDS, fresh_store

T = Instant.parse("2026-01-02T03:04:05Z")


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with fresh_store(str(request.param), tmp_path, lambda: T) as opened:
        yield opened


def _untouched(store: Store) -> None:
    """Nothing written, and the store still admits and hands out work."""
    assert list(store.range()) == []
    led = Ledger(store)
    assert led.admit_outcome("me", "after", 1, {}, T, priority=5, queue="q").admitted
    assert led.admit("me", "plain", 1, {}, T)
    assert [r.key for r in store.range()] == ["after", "plain"]


@pytest.mark.parametrize(
    ("seq", "message"),
    [
        (-1, "ledger: Sequence -1 is outside the uint64 range"),
        (2**64, f"ledger: Sequence {2**64} is outside the uint64 range"),
        (float("nan"), "ledger: Sequence must be an int, not float"),
        (1.0, "ledger: Sequence must be an int, not float"),
        (True, "ledger: Sequence must be an int, not bool"),
        ("1", "ledger: Sequence must be an int, not str"),
    ],
)
def test_a_sequence_outside_uint64_is_one_validation_error(
    store: Store, seq: Any, message: str
) -> None:
    led = Ledger(store)
    for admit in (
        lambda: led.admit("me", "k", seq, {"a": 1}, T),
        lambda: led.admit_outcome("me", "k", seq, {"a": 1}, T),
        lambda: led.admit_outcome("me", "k", seq, {"a": 1}, T, "need"),
    ):
        with pytest.raises(ValidationError) as caught:
            admit()
        assert str(caught.value) == message
        assert caught.value.exit_code == 8
    _untouched(store)


@pytest.mark.parametrize(
    ("priority", "message"),
    [
        (1001, "ledger: priority 1001 is outside -1000..1000"),
        (-1001, "ledger: priority -1001 is outside -1000..1000"),
        (2**63, f"ledger: priority {2**63} is outside -1000..1000"),
        (float("nan"), "ledger: priority must be an int, not float"),
        (True, "ledger: priority must be an int, not bool"),
    ],
)
def test_a_priority_out_of_range_is_one_validation_error(
    store: Store, priority: Any, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Ledger(store).admit_outcome("me", "k", 1, {"a": 1}, T, priority=priority)
    assert str(caught.value) == message
    assert caught.value.exit_code == 8
    _untouched(store)


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        ("", 'ledger: queue "" is 0 bytes long; a queue name is 1 to 64 bytes of UTF-8'),
        (
            "q" * 65,
            f'ledger: queue "{"q" * 65}" is 65 bytes long; a queue name is 1 to 64 bytes of UTF-8',
        ),
        ("a\udc80", 'ledger: queue "a\\ufffd" is not valid Unicode'),
        (5, "ledger: queue must be a str, not int"),
    ],
)
def test_a_bad_queue_name_is_one_validation_error(store: Store, queue: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Ledger(store).admit_outcome("me", "k", 1, {"a": 1}, T, queue=queue)
    assert str(caught.value) == message
    assert caught.value.exit_code == 8
    _untouched(store)


def test_the_edges_of_each_range_are_admitted(store: Store) -> None:
    led = Ledger(store)
    assert led.admit_outcome("me", "lo", 0, {}, T, priority=-1000, queue="q" * 64).admitted
    assert led.admit_outcome("me", "hi", 2**63 - 1, {}, T, priority=1000).admitted
