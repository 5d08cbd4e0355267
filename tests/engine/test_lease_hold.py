"""A write that dispossesses a live lease keeps the task from `--next` until
that lease ends (docs/design.md §2.2, §6.2, §6.3, §8.1; engine/schedule.py
`wait_out`), when the Ledger is made with `hold_leases` (the command line's);
without it every operation is Go's and writes no schedule. In process on
MemStore; tests/cli/test_rebase_hold.py runs the commands, and
tests/faults/test_rebase_overlap.py real workers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ledger_cli.engine import schedule
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.memstore import MemStore

T = Instant.parse("2026-01-02T03:04:05Z")
LEASE = timedelta(seconds=30)
END = T.add_ns(30 * 10**9)  # the lease's end


def _at(seconds: int) -> Instant:
    return T.add_ns(seconds * 10**9)


def _claimed(hold: bool = True) -> Ledger:
    led = Ledger(MemStore(), hold_leases=hold)
    led.admit_outcome("a", "job", 1, {"v": 1}, T)
    assert led.claim("a", "job", "w1", LEASE, T) == 1
    return led


def test_a_rebase_of_a_live_claim_waits_out_its_lease() -> None:
    led = _claimed()
    assert led.admit_outcome("a", "job", 2, {"v": 2}, _at(1)).admitted
    assert schedule.of(led.store, "job") == (END, 0)
    rec = led.store.load("job")
    assert rec is not None and rec.status == "pending"
    assert not schedule.is_due(rec, schedule.of(led.store, "job"), _at(29))
    assert schedule.is_due(rec, schedule.of(led.store, "job"), END)


def test_a_rebase_of_an_expired_claim_does_not() -> None:
    led = _claimed()
    assert led.admit_outcome("a", "job", 2, {"v": 2}, END).admitted  # LeaseUntil <= now
    assert schedule.of(led.store, "job") is None


def test_the_users_schedule_is_kept_and_raised_to_the_lease_end() -> None:
    led = _claimed()
    later = _at(3600)
    led.admit_outcome("a", "job", 2, None, _at(1), not_before=later, priority=4)
    assert schedule.of(led.store, "job") == (later, 4)  # later than the lease: as given
    led.claim("a", "job", "w2", LEASE, _at(2))  # by key: Go's, not due or not
    led.admit_outcome("a", "job", 3, None, _at(3), not_before=_at(4), priority=4)
    assert schedule.of(led.store, "job") == (_at(32), 4)  # raised to w2's lease end


def test_cancel_keeps_the_lease_end_and_retry_leaves_it() -> None:
    led = _claimed()
    led.cancel("a", "job", _at(1))
    assert schedule.of(led.store, "job") == (END, 0)
    led.retry("a", "job", _at(2))
    rec = led.store.load("job")
    assert rec is not None and rec.status == "pending"
    assert schedule.of(led.store, "job") == (END, 0)


def test_cancel_of_a_pending_task_or_an_expired_claim_keeps_no_schedule() -> None:
    led = Ledger(MemStore(), hold_leases=True)
    led.admit_outcome("a", "p", 1, None, T)
    led.cancel("a", "p", _at(1))
    led = _claimed()
    led.cancel("a", "job", END)
    assert schedule.of(led.store, "p") is None and schedule.of(led.store, "job") is None


def test_an_unblock_of_a_task_blocked_while_claimed_waits_out_its_lease() -> None:
    led = Ledger(MemStore(), hold_leases=True)
    led.admit_outcome("a", "need", 1, None, T)
    led.admit_outcome("a", "job", 1, None, T, "need")
    led.claim("a", "job", "w1", LEASE, T)  # a pending need does not stop a claim by key
    led.cancel("a", "need", _at(1))  # blocks job, which keeps its owner and lease
    blocked = led.store.load("job")
    assert blocked is not None and blocked.status == "blocked"
    assert led.retry("a", "need", _at(2)) == ["job"]
    assert schedule.of(led.store, "job") == (END, 0)


@pytest.mark.parametrize("op", ["rebase", "cancel"])
def test_without_hold_leases_the_engine_is_gos(op: str) -> None:
    led = _claimed(hold=False)
    if op == "rebase":
        led.admit_outcome("a", "job", 2, None, _at(1))
    else:
        led.cancel("a", "job", _at(1))
        led.retry("a", "job", _at(2))
    assert schedule.of(led.store, "job") is None
