"""The stores' `dependents(keys)` hook (the records naming any of `keys` in
their needs) gives the engine's dependents walk exactly what one Range would,
on every store that has it, through admits, rebases, prunes and (MemStore)
evictions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.dependencies import dependents_walk
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.store import Store
from tests.stores import KINDS

T0 = Instant.parse("2026-01-01T00:00:00Z")


class RangeOnly:
    """A store seen without its hook: the walk falls back to one Range."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def range(self) -> Iterator[Any]:
        return self.inner.range()


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location, kind.open(location, lambda: T0) as s:
        yield s


def walks(store: Store, roots: list[str]) -> tuple[list[str], list[str]]:
    hooked = dependents_walk(store, roots)
    ranged = dependents_walk(RangeOnly(store), roots)
    assert hooked == ranged
    return sorted(hooked), sorted(ranged)


def test_the_hook_walks_what_a_range_walks(store: Store) -> None:
    if not callable(getattr(store, "dependents", None)):
        pytest.skip("no dependents hook: the engine reads one Range")
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    ledger.admit("t", "c", 1, None, T0, "b", "a")
    ledger.admit("t", "d", 1, None, T0, "c")
    ledger.admit("t", "x", 1, None, T0, "y")  # a need admitted later
    ledger.admit("t", "y", 1, None, T0, "x")  # a cycle
    ledger.admit("t", "z", 1, None, T0)
    assert walks(store, ["a"])[0] == ["b", "c", "d"]
    assert walks(store, ["x"])[0] == ["x", "y"]
    assert walks(store, ["z", "nothing"])[0] == []
    ledger.admit("t", "d", 2, None, T0, "z")  # a rebase changes the needs
    assert walks(store, ["a"])[0] == ["b", "c"]
    assert walks(store, ["z"])[0] == ["d"]
    assert walks(store, ["b", "y"])[0] == ["c", "x", "y"]
