"""Every recorded Go trace replays exactly on MemStore (bounded ones with the
eviction clock tied to each op's `now`)."""

from __future__ import annotations

import pytest

from ledger_cli.engine.memstore import MemStore, MemStoreOptions
from tests.conformance import load_trace, replay, trace_names

ALL = trace_names()


def test_every_trace_file_is_collected() -> None:
    # 300 random, 75 bounded random and 15 scripted traces were recorded.
    assert len(trace_names("rand-")) == 300
    assert len(trace_names("evict-")) == 75
    assert len(trace_names("scenario-")) == 15


@pytest.mark.parametrize("name", ALL)
def test_trace_replays_on_memstore(name: str) -> None:
    trace = load_trace(name)
    cap = trace["max_entries"]
    replay(trace, lambda clock: MemStore(MemStoreOptions(max_entries=cap, now=clock)))
