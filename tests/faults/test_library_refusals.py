"""Hostile input through the library leaves every durable store whole: each call
below used to write something that made a later `ledger` command exit 8 or 9
(a restored record of an unknown status, a not-before past the year 9999, a
key no JSON file can name); now each is refused before anything is written
(docs/design.md §2.11 departure 6), and the installed `ledger`, a fresh
process, reads the store as before. A JSON store whose ready index an older
release broke with a priority out of range is mended by `doctor --fix`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ledger_cli import Ledger, Snapshot, TaskState, open_store
from ledger_cli.engine.instant import Instant
from ledger_cli.errors import LedgerError
from ledger_cli.stores.jsonfile import readyindex
from tests.cli_support import run_ledger

T = Instant.parse("2026-01-02T03:04:05Z")
FAR = Instant.from_unix_ns(300_000_000_000_000_000_000)  # the year 11476

CALLS: dict[str, tuple[Callable[[Ledger], Any], str]] = {
    "unknown-status": (
        lambda led: led.restore(Snapshot((TaskState(key="x", status="bogus"),))),
        'ledger: snapshot entry 0: ledger: task "x" has an unknown status "bogus"',
    ),
    "claimed-no-owner": (
        lambda led: led.restore(Snapshot((TaskState(key="x", status="claimed", lease_until=T),))),
        'ledger: snapshot entry 0: ledger: claimed task "x" has no Owner',
    ),
    "far-not-before": (
        lambda led: led.admit_outcome("me", "x", 1, {}, T, not_before=FAR),
        "ledger: not_before 11476-08-15T05:20:00Z is not a time a store can keep"
        " (RFC 3339, from the year 0000 to 9999, an offset of whole minutes)",
    ),
    "lone-surrogate": (
        lambda led: led.admit("me", "x\udc80", 1, {}, T),
        'ledger: key "x\\ufffd" is not valid Unicode',
    ),
}
"""Each call, and its one message on every store."""


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_refused_library_call_leaves_the_store_readable(url: str, name: str) -> None:
    with open_store(url) as store:
        led = Ledger(store)
        assert led.admit("me", "before", 1, {"n": 1}, T)
        call, message = CALLS[name]
        with pytest.raises(LedgerError) as caught:
            call(led)
        assert caught.value.exit_code == 8  # bad input, not a store failure (9)
        assert str(caught.value) == message  # the same on every store
        assert [r.key for r in store.range()] == ["before"]
    for args in (("list",), ("stats",), ("snapshot",), ("doctor",)):
        res = run_ledger(url, *args)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        assert "problem" not in res.stdout


def _unclamped(rec: TaskState, value: tuple[Instant, int] | None = None) -> readyindex.Entry:
    """The ready-index entry an older release made: its priority not clamped."""
    priority = value[1] if value is not None else 0
    due = rec.created_at.unix_ns
    if value is not None and value[0].unix_ns > due:
        due = value[0].unix_ns
    order = (1000 - priority) * readyindex.RANK + readyindex.DUE_OFFSET + due
    return (order, rec.key.encode().hex())


@pytest.mark.parametrize("priority", [1001, -(10**40)])
def test_doctor_fix_mends_a_ready_index_a_priority_out_of_range_broke(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, priority: int
) -> None:
    root = tmp_path / "store"
    monkeypatch.setattr(readyindex, "entry_of", _unclamped)
    with open_store(str(root)) as store:
        assert Ledger(store).admit("me", "k", 1, {}, T)
        store.set_schedule("k", (Instant.ZERO, priority))  # type: ignore[attr-defined]
    monkeypatch.undo()
    res = run_ledger(root, "doctor")
    assert res.returncode == 9, res.stdout
    assert f"note: k: priority {priority} is outside -1000..1000" in res.stdout
    fixed = run_ledger(root, "doctor", "--fix")
    assert fixed.returncode == 0, (fixed.stdout, fixed.stderr)
    assert "fixed: rebuilt the ready index" in fixed.stdout
    claimed = run_ledger(root, "claim", "--next", "--owner", "w", "--lease", "60s")
    assert claimed.returncode == 0, claimed.stderr
    assert claimed.stdout.split()[0] == "k"
    again = run_ledger(root, "doctor")
    assert again.returncode == 0, again.stdout
