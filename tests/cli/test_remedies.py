"""`retry` and `cancel` on every store (docs/design.md §6.2, §6.3): the library methods and
the commands (in process, over the same store), JSON shapes, exit codes,
history lines with actor and reason, and errors that write nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli import errors
from ledger_cli.engine.events import Recorder
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.store import Store
from tests.cli_support import T0 as CLI_T0
from tests.cli_support import Cli
from tests.stores import KINDS

T0 = Instant.parse("2026-01-01T00:00:00Z")
T1 = Instant.parse("2026-01-01T00:05:00Z")
LEASE = timedelta(minutes=1)


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        st = kind.open(location, lambda: T0)
        try:
            yield st
        finally:
            st.close()


def fail(ledger: Ledger, key: str, now: Instant = T0) -> int:
    fence = ledger.claim("w", key, "w", LEASE, now)
    ledger.complete("w", key, "w", fence, "failed", now)
    return fence


def statuses(ledger: Ledger) -> dict[str, tuple[str, str]]:
    return {r.key: (r.status, r.blocked_by) for r in ledger.snapshot().tasks or ()}


# -- retry (library) ---------------------------------------------------------------------


def test_retry_reopens_with_the_fence_carried_forward(store: Store) -> None:
    bus = Recorder()
    ledger = Ledger(store, bus)
    ledger.admit("a", "up", 1, {"n": 1}, T0)
    ledger.admit("a", "job", 1, {"n": 2}, T0, "up")
    up = ledger.claim("w", "up", "w", LEASE, T0)
    ledger.complete("w", "up", "w", up, "completed", T0)
    old = fail(ledger, "job")
    before = ledger.state("job")
    assert before is not None
    assert ledger.retry("ops", "job", T1, "flaky disk") == []
    after = ledger.state("job")
    assert after is not None
    assert (after.status, after.owner, after.lease_until, after.blocked_by) == (
        "pending",
        "",
        Instant.ZERO,
        "",
    )
    kept = ("fence", "sequence", "task", "needs", "created_by", "created_at")
    assert all(getattr(after, f) == getattr(before, f) for f in kept)
    assert (after.updated_by, after.updated_at) == ("ops", T1)
    assert bus.events[-1].name == "ledger.retried"
    assert bus.events[-1].data == "key job retried by ops (reason: flaky disk)"
    # The next claim hands out Fence+1; the earlier holder stays fenced off.
    assert ledger.claim("w2", "job", "w2", LEASE, T1) == old + 1
    with pytest.raises(errors.FencedError):
        ledger.complete("w", "job", "w", old, "completed", T1)


def test_retry_unblocks_everything_its_failure_blocked(store: Store) -> None:
    bus = Recorder()
    ledger = Ledger(store, bus)
    ledger.admit("a", "root", 1, None, T0)
    ledger.admit("a", "b", 1, None, T0, "root")
    ledger.admit("a", "c", 1, None, T0, "b")
    ledger.admit("a", "d", 1, None, T0, "root", "c")
    fail(ledger, "root")
    ledger.admit("a", "late", 1, None, T0, "root")  # blocked at admission
    assert {k for k, (s, _) in statuses(ledger).items() if s == "blocked"} == {
        "b",
        "c",
        "d",
        "late",
    }
    mark = len(bus.events)
    assert ledger.retry("ops", "root", T1) == ["b", "c", "d", "late"]
    assert all(s == ("pending", "") for k, s in statuses(ledger).items())
    names = [(e.name, e.key) for e in bus.events[mark:]]
    assert names[0] == ("ledger.retried", "root")
    assert sorted(names[1:]) == [("ledger.unblocked", k) for k in ("b", "c", "d", "late")]
    assert bus.events[-1].data.endswith("unblocked by retry of root")


def test_retry_leaves_blocked_what_another_failure_blocks(store: Store) -> None:
    ledger = Ledger(store)
    for key in ("r1", "r2"):
        ledger.admit("a", key, 1, None, T0)
    ledger.admit("a", "both", 1, None, T0, "r1", "r2")
    ledger.admit("a", "after", 1, None, T0, "both")
    fail(ledger, "r1")
    fail(ledger, "r2")
    assert statuses(ledger)["both"] == ("blocked", "r1")
    assert ledger.retry("ops", "r1", T1) == []
    # Still blocked, now naming the failure that remains.
    assert statuses(ledger)["both"] == ("blocked", "r2")
    assert statuses(ledger)["after"][0] == "blocked"
    assert ledger.retry("ops", "r2", T1) == ["after", "both"]


def test_retry_of_a_task_whose_need_failed_blocks_it(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("a", "up", 1, None, T0)
    ledger.admit("a", "job", 1, None, T0, "up")
    ledger.admit("a", "next", 1, None, T0, "job")
    fail(ledger, "job")  # Go's claim: needs block only on failure
    fail(ledger, "up")  # job is final: the walk leaves it failed
    assert ledger.retry("ops", "job", T1) == []
    assert statuses(ledger)["job"] == ("blocked", "up")
    assert statuses(ledger)["next"][0] == "blocked"
    assert ledger.retry("ops", "up", T1) == ["job", "next"]


def test_retry_frees_a_dependency_cycle(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("a", "x", 1, None, T0, "y")  # y not admitted yet
    ledger.admit("a", "y", 1, None, T0, "x")
    ledger.admit("a", "z", 1, None, T0, "x")
    fail(ledger, "y")
    assert statuses(ledger)["x"] == ("blocked", "y")
    assert ledger.retry("ops", "y", T1) == ["x", "z"]
    assert statuses(ledger) == {k: ("pending", "") for k in ("x", "y", "z")}


def test_retry_refusals_write_nothing(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("a", "root", 1, None, T0)
    ledger.admit("a", "mid", 1, None, T0, "root")
    ledger.admit("a", "leaf", 1, None, T0, "mid")
    ledger.admit("a", "done", 1, None, T0)
    fence = ledger.claim("w", "done", "w", LEASE, T0)
    ledger.complete("w", "done", "w", fence, "completed", T0)
    fail(ledger, "root")
    before = ledger.snapshot()
    with pytest.raises(errors.NoKeyError):
        ledger.retry("ops", "nope", T1)
    with pytest.raises(errors.NotFailedError) as info:
        ledger.retry("ops", "done", T1)
    assert str(info.value) == "ledger: done is not failed (it is completed)"
    assert info.value.exit_code == 6
    with pytest.raises(errors.NotFailedError) as info:
        ledger.retry("ops", "leaf", T1)
    assert str(info.value) == "ledger: leaf is blocked by root; retry root"
    assert ledger.snapshot() == before


def test_a_pruned_failure_is_not_retried(store: Store) -> None:
    # Prune keeps every failure that still blocks something, and a pruned
    # record has lost its task and needs: there is nothing to reopen.
    ledger = Ledger(store)
    ledger.admit("a", "gone", 1, {"n": 1}, T0)
    fail(ledger, "gone")
    assert ledger.prune(timedelta(0), T1) == 1
    before = ledger.snapshot()
    with pytest.raises(errors.NotFailedError) as info:
        ledger.retry("ops", "gone", T1)
    assert str(info.value) == "ledger: gone is pruned (its task is gone); admit a new key"
    assert info.value.exit_code == 6
    with pytest.raises(errors.AlreadyFinishedError):
        ledger.cancel("ops", "gone", T1)
    assert ledger.snapshot() == before


# -- cancel (library) ----------------------------------------------------------------------


@pytest.mark.parametrize("start", ["pending", "claimed", "expired", "blocked"])
def test_cancel_fails_the_task_and_blocks_its_dependents(store: Store, start: str) -> None:
    bus = Recorder()
    ledger = Ledger(store, bus)
    ledger.admit("a", "up", 1, None, T0)
    ledger.admit("a", "job", 1, None, T0, "up")
    ledger.admit("a", "d2", 1, None, T0, "d1")
    ledger.admit("a", "d1", 1, None, T0, "job")
    holder = 0
    if start in ("claimed", "expired"):
        holder = ledger.claim("w", "job", "w", LEASE, T0)
    if start == "blocked":
        fail(ledger, "up")
    now = T0 + (LEASE * 2 if start == "expired" else timedelta(seconds=1))
    before = ledger.state("job")
    assert before is not None
    blocked = ledger.cancel("ops", "job", now, "wrong input")
    after = ledger.state("job")
    assert after is not None
    assert (after.status, after.fence, after.owner, after.lease_until, after.blocked_by) == (
        "failed",
        before.fence + 1,
        "",
        Instant.ZERO,
        "",
    )
    cancelled = [e for e in bus.events if e.name == "ledger.cancelled"]
    assert [e.data for e in cancelled] == ["key job cancelled by ops (reason: wrong input)"]
    if start == "blocked":  # its dependents were already blocked by the first failure
        assert blocked == []
    else:
        assert blocked == ["d1", "d2"]
        assert statuses(ledger)["d1"] == ("blocked", "job")
    if holder:
        with pytest.raises(errors.NotClaimedError):
            ledger.renew("w", "job", "w", holder, LEASE, now)
        with pytest.raises(errors.FencedError):
            ledger.complete("w", "job", "w", holder, "completed", now)
        with pytest.raises(errors.FencedError):
            ledger.release("w", "job", "w", holder, now)
    # A cancelled task can be retried like any failure.
    if start != "blocked":
        assert ledger.retry("ops", "job", now) == ["d1", "d2"]


def test_cancel_refusals_write_nothing(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("a", "f", 1, None, T0)
    ledger.admit("a", "c", 1, None, T0)
    fail(ledger, "f")
    fence = ledger.claim("w", "c", "w", LEASE, T0)
    ledger.complete("w", "c", "w", fence, "completed", T0)
    before = ledger.snapshot()
    with pytest.raises(errors.NoKeyError):
        ledger.cancel("ops", "nope", T1)
    for key, status in (("f", "failed"), ("c", "completed")):
        with pytest.raises(errors.AlreadyFinishedError) as info:
            ledger.cancel("ops", key, T1)
        assert str(info.value) == f"ledger: {key} is already {status}"
        assert info.value.exit_code == 6
    assert ledger.snapshot() == before


# -- the commands, over the same stores ------------------------------------------------------


def test_commands_print_json_and_history(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = Cli(store, monkeypatch)
    cli.ok("admit", "root")
    cli.ok("admit", "dep", "--needs", "root")
    fence = cli.ok("claim", "root", "--owner", "w", "--lease", "1m").stdout.strip()
    cli.ok("complete", "root", "--owner", "w", "--fence", fence, "--failed")

    out = cli.ok("retry", "root", "--reason", "disk replaced")
    assert out.stdout.splitlines() == ["retried root", "unblocked dep"]
    assert out.stderr == ""
    log = cli.ok("log", "--json").json()
    assert [(e["event"], e["key"], e["actor"]) for e in log[-2:]] == [
        ("ledger.retried", "root", "tester"),
        ("ledger.unblocked", "dep", "tester"),
    ]
    assert all("(reason: disk replaced)" in e["data"] for e in log[-2:])
    assert log[-2]["time"] == CLI_T0

    res = cli.ok("cancel", "root", "--json", "--reason", "not needed")
    body = res.json()
    assert set(body) == {"key", "record", "blocked"}
    assert body["key"] == "root" and body["blocked"] == ["dep"]
    assert body["record"]["Status"] == "failed" and body["record"]["Fence"] == int(fence) + 1

    body = cli.ok("retry", "root", "--json").json()
    assert set(body) == {"key", "record", "unblocked"}
    assert body["unblocked"] == ["dep"] and body["record"]["Status"] == "pending"

    res = cli.ok("cancel", "root")
    assert res.stdout.splitlines() == ["cancelled root", "blocked dep"]


def test_command_errors_are_one_line_with_exit_codes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = Cli(store, monkeypatch)
    cli.ok("admit", "root")
    cli.ok("admit", "dep", "--needs", "root")
    cli.ok("cancel", "root")
    before = cli.dump()
    cases = [
        (("retry", "nope"), 3, "ledger: key has no record: nope"),
        (("cancel", "nope"), 3, "ledger: key has no record: nope"),
        (("retry", "dep"), 6, "ledger: dep is blocked by root; retry root"),
        (("cancel", "root"), 6, "ledger: root is already failed"),
    ]
    for args, code, message in cases:
        res = cli(*args)
        assert (res.code, res.stdout, res.stderr) == (code, "", message + "\n"), args
        res = cli(*args, "--json")
        assert res.code == code
        assert res.json()["error"]["exit"] == code and res.json()["error"]["message"] == message
    assert cli("retry", "root", "--reason", "bad\x07").code == 2
    assert cli.dump() == before
