"""`cli/chunks.chunked`: blocks sized to a lock-hold target, on a simulated clock.

The clock is fake: each item's work and each commit advance it by a fixed
cost, so the block sizes are exact and the test is independent of the
machine. The real stores are in tests/faults/test_lock_hold.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from ledger_cli.cli.chunks import BUSY_SLEEPS, GAP, MIN_ITEMS, TARGET_HOLD, chunked


class FakeStore:
    """Blocks that commit what their work appended; time spent on a fake clock."""

    def __init__(self, per_item: float, commit_fixed: float, commit_per_item: float) -> None:
        self.now = 0.0
        self.per_item = per_item
        self.commit_fixed = commit_fixed
        self.commit_per_item = commit_per_item
        self.committed: list[list[int]] = []
        self.holds: list[float] = []
        self.sleeps: list[float] = []
        self._open: list[int] | None = None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    @contextlib.contextmanager
    def block(self) -> Iterator[None]:
        started = self.now
        self._open = []
        try:
            yield
        except BaseException:
            self._open = None  # discarded
            raise
        self.now += self.commit_fixed + self.commit_per_item * len(self._open)
        self.committed.append(self._open)
        self.holds.append(self.now - started)
        self._open = None

    def work(self, item: int) -> None:
        assert self._open is not None
        self.now += self.per_item
        self._open.append(item)


@pytest.mark.parametrize(
    ("per_item", "fixed", "commit_per_item"),
    [
        (20e-6, 0.005, 0.0),  # SQLite-like: cheap commit
        (50e-6, 0.05, 200e-6),  # JSON-like: commit grows with the block
        (50e-6, 0.6, 100e-6),  # a sync slower than the target itself
        (50e-6, 0.005, 10e-3),  # an fsync a record file on a busy disk (no syncfs)
    ],
)
def test_every_item_once_in_order_and_holds_near_the_target(
    per_item: float, fixed: float, commit_per_item: float
) -> None:
    store = FakeStore(per_item, fixed, commit_per_item)
    items = list(range(100_000))
    holds = chunked(items, store.block, store.work, clock=store.clock, sleep=store.sleep)
    assert [i for block in store.committed for i in block] == items
    assert holds.items == len(items) and holds.blocks == len(store.committed) > 1
    assert all(len(b) >= MIN_ITEMS for b in store.committed[:-1])
    bound = max(TARGET_HOLD, fixed + TARGET_HOLD / 2) * 1.25
    assert max(store.holds) <= bound, (max(store.holds), bound)
    assert len(store.sleeps) == holds.blocks - 1  # the lock is left free between blocks


def test_an_error_discards_its_block_only() -> None:
    store = FakeStore(0.01, 0.0, 0.0)

    def work(item: int) -> None:
        if item == 500:
            raise RuntimeError("refused")
        store.work(item)

    with pytest.raises(RuntimeError):
        chunked(range(1000), store.block, work, clock=store.clock, sleep=store.sleep)
    landed = [i for block in store.committed for i in block]
    assert landed == list(range(len(landed))) and len(landed) < 500


def test_nothing_to_do_opens_no_block() -> None:
    store = FakeStore(0.0, 0.0, 0.0)
    assert chunked([], store.block, store.work, clock=store.clock).blocks == 0
    assert store.committed == []


def _asleep_at(waited: float) -> float:
    """The busy-handler sleep a SQLite writer is in after waiting `waited` s."""
    start = 0.0
    for pause in BUSY_SLEEPS:
        if start + pause > waited:
            return pause
        start += pause
    return BUSY_SLEEPS[-1]


def test_each_pause_outlasts_the_sleep_of_a_writer_that_waited_out_the_block() -> None:
    """A short block is followed by a short pause, yet longer than the sleep of
    any writer that began waiting during it; long blocks get the full GAP."""
    store = FakeStore(20e-6, 0.001, 0.0)
    chunked(range(20_000), store.block, store.work, clock=store.clock, sleep=store.sleep)
    pauses = list(zip(store.holds, store.sleeps, strict=False))
    assert pauses[0][1] < GAP  # the first blocks are short, and so are their pauses
    for hold, pause in pauses:
        assert pause > _asleep_at(hold), (hold, pause)
        assert pause == GAP or hold < sum(BUSY_SLEEPS)
    long_hold = FakeStore(0.01, 0.0, 0.0)
    chunked(
        range(200), long_hold.block, long_hold.work, clock=long_hold.clock, sleep=long_hold.sleep
    )
    assert set(long_hold.sleeps) == {GAP}
