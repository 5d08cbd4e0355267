"""A live lease that a cancel, a rebase or a block takes away keeps its queue
slot until it would have run out (docs/design.md §8.7; engine/revoked.py),
when the Ledger is made with `hold_leases` (the command line's); once per
lease; without `hold_leases` the slot frees at once. In process on MemStore;
tests/cli/test_queue_revoked.py runs the commands on every durable store."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ledger_cli.engine import queues
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.memstore import MemStore

T = Instant.parse("2026-01-02T03:04:05Z")
LEASE = timedelta(seconds=30)
END = T.add_ns(30 * 10**9)  # the lease's end
JUST_BEFORE = END.add_ns(-1)


def _at(seconds: int) -> Instant:
    return T.add_ns(seconds * 10**9)


def _claimed(hold: bool = True, *needs: str) -> Ledger:
    led = Ledger(MemStore(), hold_leases=hold)
    for need in needs:
        led.admit_outcome("a", need, 1, None, T)
    led.admit_outcome("a", "job", 1, None, T, *needs, queue="q")
    queues.set_limit(led.store, "q", 1)
    assert led.claim("a", "job", "w1", LEASE, T) == 1
    return led


def _held(led: Ledger, now: Instant, queue: str = "q") -> int:
    return queues.held_by_queue(led.store, now).get(queue, 0)


def _revoke(led: Ledger, op: str) -> None:
    if op == "cancel":
        led.cancel("a", "job", _at(1))
    else:
        queue = "other" if op == "rebase-elsewhere" else "q"
        assert led.admit_outcome("a", "job", 2, None, _at(1), queue=queue).admitted
        assert _held(led, _at(1), "other") == 0  # the slot stays in the old queue


@pytest.mark.parametrize("op", ["cancel", "rebase", "rebase-elsewhere"])
def test_a_revoked_lease_holds_its_slot_until_its_end(op: str) -> None:
    led = _claimed()
    _revoke(led, op)
    for now in (_at(1), JUST_BEFORE):
        assert _held(led, now) == 1
        slots = queues.Slots(led.store, now)
        assert slots.full("q") and slots.describe("q") == "queue q is at its limit (1 of 1 held)"
    assert _held(led, END) == 0
    # Without hold_leases (the library's default, Go's behaviour) it frees at once.
    go = _claimed(hold=False)
    _revoke(go, op)
    assert _held(go, _at(1)) == 0


def test_a_block_and_its_unblock_keep_one_slot() -> None:
    led = _claimed(True, "need")
    led.cancel("a", "need", _at(1))  # blocks job, which keeps its owner and lease
    job = led.store.load("job")
    assert job is not None and job.status == "blocked"
    assert _held(led, _at(1)) == 1
    assert led.retry("a", "need", _at(2)) == ["job"]  # un-blocks it: the same lease
    assert _held(led, _at(2)) == 1
    assert _held(led, END) == 0


def test_a_claim_by_key_after_a_retry_holds_a_second_slot() -> None:
    led = _claimed()
    queues.set_limit(led.store, "q", 2)
    led.cancel("a", "job", _at(1))
    led.retry("a", "job", _at(2))
    led.claim("a", "job", "w2", LEASE, _at(3))  # two runners now: w1's may still run
    assert _held(led, _at(3)) == 2
    led.cancel("a", "job", _at(4))  # a second revoked lease of the same key
    assert _held(led, _at(4)) == 2
    assert _held(led, END) == 1  # w1's ended; w2's runs to T+33s
    assert _held(led, _at(33)) == 0


def test_ended_entries_are_dropped_by_the_next_revocation() -> None:
    led = _claimed()
    led.cancel("a", "job", _at(1))
    led.admit_outcome("a", "other", 1, None, T, queue="q")
    led.claim("a", "other", "w2", LEASE, _at(40))
    led.cancel("a", "other", _at(41))
    assert [k for k, _, _ in led.store.revoked_leases()] == ["other"]  # type: ignore[attr-defined]


def test_an_expired_or_pending_task_keeps_no_slot() -> None:
    led = _claimed()
    led.cancel("a", "job", END)  # LeaseUntil <= now: no runner left
    assert led.store.revoked_leases() == []  # type: ignore[attr-defined]
    led.admit_outcome("a", "p", 1, None, T, queue="q")
    led.cancel("a", "p", _at(1))
    assert led.store.revoked_leases() == []  # type: ignore[attr-defined]
