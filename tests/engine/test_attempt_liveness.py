"""The rule that tells a running attempt from an abandoned one (docs/design.md §7.1):
an attempt with no end recorded is live only while its task is claimed under
the attempt's fence with a lease that has not run out; judged from the record
alone, so it holds whether or not anyone writes after the runner died."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ledger_cli.engine.attempts import RUNNER_GRACE_NS, Attempt, is_live, judge
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState

NOW = Instant.parse("2026-01-02T03:04:05Z")
HELD = TaskState(key="job", status="claimed", owner="w", fence=3, lease_until=NOW + timedelta(1))


def _attempt(fence: int = 3, ended: str | None = None) -> Attempt:
    return Attempt("job", n=1, fence=fence, owner="w", started="2026-01-02T03:04:00Z", ended=ended)


def test_an_attempt_under_a_live_lease_of_its_fence_runs() -> None:
    att = _attempt()
    assert is_live(att, HELD, NOW)
    judge([att], HELD, NOW)
    assert not att.abandoned and att.outcome() == "running"


@pytest.mark.parametrize(
    "rec",
    [
        HELD.replace(lease_until=NOW),  # the lease ran out at this instant
        HELD.replace(lease_until=NOW - timedelta(seconds=1)),
        HELD.replace(fence=4),  # taken over: another runner's lease
        HELD.replace(status="completed", owner="", lease_until=Instant.ZERO),
        HELD.replace(status="pending", owner="", lease_until=Instant.ZERO),  # released
        HELD.replace(status="failed", owner="", lease_until=Instant.ZERO),
        None,  # no record read
    ],
    ids=["lease-ends-now", "lease-over", "taken-over", "completed", "released", "failed", "none"],
)
def test_an_attempt_with_no_end_whose_lease_is_over_is_abandoned(rec: TaskState | None) -> None:
    att = _attempt()
    assert not is_live(att, rec, NOW)
    judge([att], rec, NOW)
    assert att.abandoned and att.outcome() == "abandoned"
    assert att.shown_obj()["abandoned"] is True
    assert "abandoned" not in att.to_obj()  # a reader's judgement, never stored


def test_an_ended_attempt_keeps_its_outcome() -> None:
    ended = _attempt(fence=2, ended="2026-01-02T03:04:01Z")
    ended.exit = 1
    running = _attempt()
    judge([ended, running], HELD, NOW)
    assert not is_live(ended, HELD, NOW)
    assert (ended.abandoned, ended.outcome()) == (False, "exit 1")
    assert (running.abandoned, running.outcome()) == (False, "running")
    later = NOW + timedelta(days=2)
    judge([ended, running], HELD, later)  # judged again, from the record alone
    assert (ended.abandoned, running.abandoned) == (False, True)
    assert running.copy().abandoned and running.copy() == running


@pytest.mark.parametrize(
    "rec",
    [
        HELD.replace(status="pending", owner="", lease_until=Instant.ZERO),  # rebased
        HELD.replace(status="failed", fence=4, owner="", lease_until=Instant.ZERO),  # cancelled
    ],
    ids=["rebased", "cancelled"],
)
def test_a_taken_attempt_runs_until_the_lease_taken_and_the_runner_s_grace(
    rec: TaskState,
) -> None:
    """Its runner learns of it at its next renewal, stops its command by the
    end of the lease taken (kept as the task's not-before), then records the end."""
    att = _attempt()
    held = NOW + timedelta(seconds=10)
    assert is_live(att, rec, NOW, held)
    grace = timedelta(microseconds=RUNNER_GRACE_NS // 1000)
    assert is_live(att, rec, held + grace - timedelta(microseconds=1), held)
    assert not is_live(att, rec, held + grace, held)  # its runner is gone by now
    assert not is_live(att, rec, NOW, None)  # no lease was taken from it
    started_later = Attempt("job", n=2, fence=3, started=str(held + timedelta(seconds=1)))
    assert not is_live(started_later, rec, NOW, held)  # not its lease
    judge([att], rec, NOW, held)
    assert not att.abandoned and att.outcome() == "running"
