"""A lease taken from its holder keeps its queue slot until it would have run
out (docs/design.md §8.7): `cancel`, a rebase and a block of a claimed task
take a live lease away, but its runner stops its command only at its next
renewal, so the queue counts that lease as held until its old LeaseUntil.
Through the installed CLI as fresh processes, on the JSON store, SQLite and
PostgreSQL (tests/conftest.py's `url`). `--now` stands for the clock where a
test needs exact instants; the one test on the real clock waits for states,
its pauses derived from the lease.
"""

from __future__ import annotations

import json
import subprocess
import time

from ledger_cli.engine.instant import Instant
from tests.cli_support import ledger_ok as ok
from tests.cli_support import run_ledger

HANG = 120.0  # a bound for a hung test, never a timing assertion
T0 = "2026-01-02T03:04:05Z"  # a's 1m lease, claimed at T0, ends at END
MID = "2026-01-02T03:04:35Z"
JUST_BEFORE = "2026-01-02T03:05:04.999999999Z"
END = "2026-01-02T03:05:05Z"


def claim_next(url: str, queue: str, now: str | None = None) -> subprocess.CompletedProcess[str]:
    clock = ("--now", now) if now is not None else ()
    args = ("claim", "--next", "--queue", queue, "--owner", "w2", "--lease", "1m")
    return run_ledger(url, *clock, *args)


def held(url: str, now: str, queue: str = "q") -> int:
    rows = json.loads(ok(url, "--now", now, "--json", "limit"))
    return next(int(r["held"]) for r in rows if r["queue"] == queue)


def claim_a_in_full_queue(url: str) -> None:
    """a and b in queue q (limit 1); a claimed at T0 for 1m."""
    ok(url, "--now", T0, "admit", "a", "--queue", "q")
    ok(url, "--now", T0, "admit", "b", "--queue", "q")
    ok(url, "limit", "q", "1")
    ok(url, "--now", T0, "claim", "a", "--owner", "w1", "--lease", "1m")


def assert_full_until_end(url: str) -> None:
    """b waits for a's revoked lease in q until END (`claim --next`, `claim b`,
    `run --next`), then is claimed."""
    full = "queue q is at its limit (1 of 1 held)"
    for now in (MID, JUST_BEFORE):
        res = claim_next(url, "q", now)
        assert res.returncode == 7, res.stderr
        assert res.stderr == f"ledger: nothing is ready to claim; {full}\n"
        by_key = run_ledger(url, "--now", now, "claim", "b", "--owner", "w2", "--lease", "1m")
        assert by_key.returncode == 4, by_key.stderr
        assert by_key.stderr == f"ledger: {full}\n"
    runs = ("run", "--next", "--queue", "q", "--owner", "w2", "--lease", "1m", "--", "true")
    res = run_ledger(url, "--now", MID, *runs)
    assert res.returncode == 7, res.stderr
    assert res.stderr == f"ledger: nothing is ready to claim; {full}\n"
    idle = run_ledger(url, "--now", MID, *runs[:2], "--drain", "--until-idle", *runs[2:])
    assert (idle.returncode, idle.stderr) == (7, f"ledger: nothing is ready to claim; {full}\n")
    assert held(url, JUST_BEFORE) == 1
    assert held(url, END) == 0
    assert ok(url, "doctor").endswith("no problems found\n")
    res = claim_next(url, "q", END)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == "b"


def test_a_cancelled_lease_holds_its_slot_until_its_old_end(url: str) -> None:
    claim_a_in_full_queue(url)
    ok(url, "--now", MID, "cancel", "a")
    assert_full_until_end(url)


def test_a_rebased_lease_holds_its_slot_in_its_old_queue(url: str) -> None:
    claim_a_in_full_queue(url)
    ok(url, "--now", MID, "admit", "a", "--seq", "2", "--queue", "other")  # moves it too
    assert held(url, MID, "other") == 0
    assert_full_until_end(url)


def test_a_lease_blocked_then_unblocked_holds_one_slot(url: str) -> None:
    ok(url, "--now", T0, "admit", "n")
    ok(url, "--now", T0, "admit", "a", "--queue", "q", "--needs", "n")
    ok(url, "--now", T0, "admit", "b", "--queue", "q")
    ok(url, "limit", "q", "1")
    ok(url, "--now", T0, "claim", "a", "--owner", "w1", "--lease", "1m")  # by key: n not done
    fence = ok(url, "--now", MID, "claim", "n", "--owner", "w3", "--lease", "1m").strip()
    ok(url, "--now", MID, "complete", "n", "--owner", "w3", "--fence", fence, "--failed")
    assert json.loads(ok(url, "--json", "state", "a"))["Status"] == "blocked"
    ok(url, "--now", MID, "retry", "n")  # un-blocks a: the same lease, counted once
    assert json.loads(ok(url, "--json", "state", "a"))["Status"] == "pending"
    assert_full_until_end(url)


def test_on_the_real_clock_claim_next_waits_out_a_cancelled_lease(url: str) -> None:
    lease = 2.0
    for round_ in range(6):  # a slow machine gets a longer lease, never a false failure
        q = f"q{round_}"
        ok(url, "limit", q, "1")
        ok(url, "admit", f"a{round_}", "--queue", q)
        ok(url, "admit", f"b{round_}", "--queue", q)
        got = ok(url, "--json", "claim", f"a{round_}", "--owner", "w1", "--lease", f"{lease}s")
        until = Instant.parse(json.loads(got)["record"]["LeaseUntil"])
        ok(url, "cancel", f"a{round_}")
        res = claim_next(url, q)
        if Instant.now() >= until:  # the refusal was not forced before the lease ended
            lease *= 2
            continue
        assert res.returncode == 7, (res.stdout, res.stderr)
        assert f"queue {q} is at its limit (1 of 1 held)" in res.stderr
        break
    else:
        raise AssertionError("never saw the queue before the cancelled lease ended")
    deadline = time.monotonic() + HANG
    while True:
        res = claim_next(url, q)
        if res.returncode == 0:
            break
        assert res.returncode == 7, res.stderr
        assert f"queue {q} is at its limit" in res.stderr
        assert time.monotonic() < deadline, "the slot never came back"
        time.sleep(lease / 10)
    # The claim read its clock before it returned: at or after the old lease's end.
    assert Instant.now() >= until
    assert res.stdout.split()[0] == f"b{round_}"
