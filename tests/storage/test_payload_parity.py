"""`memory:` refuses and gives back what the durable stores refuse and give
back (engine/memstore.py `as_stored`; docs/design.md §3.1): a program tried
on MemStore fails where it would fail on a real store, with the same
EncodeError (exit 8), and reads its payload back as a real store returns it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.store import Store
from ledger_cli.errors import EncodeError
from tests.stores import KINDS

T = Instant.parse("2026-01-02T03:04:05Z")


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[dict[str, Store]]:
    """One fresh store of every kind, `memory` among them: each test compares them."""
    with contextlib.ExitStack() as stack:
        opened: dict[str, Store] = {}
        for name, kind in sorted(KINDS.items()):
            (tmp_path / name).mkdir()
            location = stack.enter_context(kind.place(tmp_path / name))
            opened[name] = kind.open(location, lambda: T)
            stack.callback(opened[name].close)
        yield opened


@pytest.mark.parametrize(
    "payload",
    [
        float("nan"),
        float("inf"),
        {"x": float("-inf")},
        {1, 2},
        b"bytes",
        {1: 2},
        object(),
        [2**1100],
    ],
    ids=["nan", "inf", "nested-inf", "set", "bytes", "int-keys", "object", "huge-int"],
)
def test_a_payload_go_cannot_marshal_is_refused_by_every_store(
    stores: dict[str, Store], payload: Any
) -> None:
    """One message on every store: Go's `json.Marshal` text, never a SQL
    store's own wording of it."""
    messages = {}
    for name, store in stores.items():
        with pytest.raises(EncodeError) as caught:
            Ledger(store).admit("me", "k", 1, payload, T)
        assert caught.value.exit_code == 8, name
        assert list(store.range()) == [], name
        messages[name] = str(caught.value)
    assert len(set(messages.values())) == 1, messages
    assert messages["memory"].startswith("json: unsupported "), messages


def test_a_lease_ending_past_the_year_9999_is_refused_by_every_store(
    stores: dict[str, Store],
) -> None:
    for name, store in stores.items():
        led = Ledger(store)
        assert led.admit("me", "k", 1, None, T)
        with pytest.raises(EncodeError) as caught:
            led.claim("me", "k", "w", timedelta.max, T)
        assert str(caught.value) == (  # Go's json.Marshal text, on every store
            "json: error calling MarshalJSON for type time.Time: "
            "Time.MarshalJSON: year outside of range [0,9999]"
        ), name
        rec = store.load("k")
        assert rec is not None and rec.status == "pending", name


@pytest.mark.parametrize(
    ("payload", "back"),
    [
        ({"n": 2**70}, {"n": float(2**70)}),
        ({"n": 2**64 - 1, "m": -(2**63)}, {"m": -(2**63), "n": 2**64 - 1}),
        ((1, "a", (2.5,)), [1, "a", [2.5]]),
        ({"f": 1.0}, {"f": 1}),
        ("a\udc80", "a\ufffd"),
    ],
    ids=["beyond-64-bits", "within-64-bits", "tuples", "whole-float", "lone-surrogate"],
)
def test_every_store_gives_a_payload_back_as_the_json_store_does(
    stores: dict[str, Store], payload: Any, back: Any
) -> None:
    for name, store in stores.items():
        assert Ledger(store).admit("me", "k", 1, payload, T)
        rec = store.load("k")
        assert rec is not None
        # the types too: 2**70 a float, 1.0 an int, a tuple a list
        assert repr(rec.task) == repr(back), name
