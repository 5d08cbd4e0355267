"""Queues and limits held by leases: `admit --queue`, `claim` /
`run --next --queue`, `ledger limit`. Through the installed CLI as fresh
processes, on the JSON store, SQLite and PostgreSQL (tests/conftest.py's
`url`). Waits are for states (a file, a status, a lease that ran out), never
times; `--now` stands for a later clock
where a test needs a lease to be stale.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from tests.cli_support import T0, ledger_cmd, run_ledger, subprocess_env
from tests.cli_support import ledger_ok as ok
from tests.timing_support import wait_for_file

HANG = 120.0  # a bound for a hung test, never a timing assertion
LATER = "2026-01-02T03:06:05Z"  # T0 + 2m: a 1m lease taken at T0 is stale


def admit(url: str, *args: str) -> str:
    return ok(url, "--now", T0, "admit", *args)


def claim_next(url: str, *args: str, now: str = T0) -> subprocess.CompletedProcess[str]:
    return run_ledger(url, "--now", now, "claim", "--next", "--owner", "w", "--lease", "1m", *args)


def test_claim_next_takes_only_the_named_queues_in_ready_order(url: str) -> None:
    admit(url, "a1", "--queue", "a")
    admit(url, "b1", "--queue", "b")
    admit(url, "d1")
    admit(url, "b2", "--queue", "b", "--priority", "5")
    assert claim_next(url, "--queue", "b").stdout.split()[0] == "b2"  # priority first
    assert claim_next(url, "--queue", "b").stdout.split()[0] == "b1"
    res = claim_next(url, "--queue", "b")
    assert res.returncode == 7, res.stderr
    assert claim_next(url, "--queue", "x,default").stdout.split()[0] == "d1"
    assert claim_next(url, "--queue", "x", "--queue", "a").stdout.split()[0] == "a1"


def test_without_queue_claim_next_takes_every_queue(url: str) -> None:
    admit(url, "a1", "--queue", "a")
    admit(url, "d1")
    got = {claim_next(url).stdout.split()[0] for _ in range(2)}
    assert got == {"a1", "d1"}


def test_changing_the_queue_needs_a_higher_seq(url: str) -> None:
    admit(url, "k", "--queue", "a")
    assert admit(url, "k", "--queue", "a").strip() == "duplicate"
    # The same sequence in another queue is a conflict, as another payload is.
    res = run_ledger(url, "--now", T0, "admit", "k", "--queue", "b")
    assert res.returncode == 8, res.stderr
    assert res.stdout.strip() == "conflict"
    assert res.stderr.strip().splitlines() == [
        "ledger: k is already admitted at sequence 1 with a different queue"
    ]
    res = run_ledger(url, "--now", T0, "admit", "k")  # default is a queue too
    assert res.returncode == 8, res.stderr
    assert claim_next(url, "--queue", "b").returncode == 7  # still in a
    assert admit(url, "k", "--queue", "b", "--seq", "2").strip() == "admitted"
    assert claim_next(url, "--queue", "a").returncode == 7
    assert claim_next(url, "--queue", "b").stdout.split()[0] == "k"


def test_a_batch_line_takes_a_queue(url: str, tmp_path: Path) -> None:
    batch = tmp_path / "jobs.jsonl"
    batch.write_text('{"key": "m1", "queue": "mail"}\n{"key": "d1"}\n')
    admit(url, "--batch", str(batch))
    assert claim_next(url, "--queue", "mail").stdout.split()[0] == "m1"
    assert claim_next(url, "--queue", "mail").returncode == 7
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "x", "queue": 7}\n')
    res = run_ledger(url, "admit", "--batch", str(bad))
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert '"queue" must be a string' in res.stderr


def test_at_the_limit_claim_next_passes_over_and_claim_key_exits_4(url: str) -> None:
    for key in ("q1", "q2", "q3"):
        admit(url, key, "--queue", "q", "--priority", "9")
    admit(url, "d1")
    assert json.loads(ok(url, "--json", "limit", "q", "2")) == {
        "queue": "q",
        "limit": 2,
        "held": 0,
    }
    assert claim_next(url).stdout.split()[0] == "q1"
    assert claim_next(url).stdout.split()[0] == "q2"
    assert claim_next(url).stdout.split()[0] == "d1"  # q is full: the next queue
    nothing = claim_next(url)
    assert nothing.returncode == 7  # says what a ready task of q waits for
    full = "queue q is at its limit (2 of 2 held)"
    assert nothing.stderr == f"ledger: nothing is ready to claim; {full}\n"
    res = run_ledger(url, "--now", T0, "claim", "q3", "--owner", "w", "--lease", "1m")
    assert res.returncode == 4
    assert res.stderr == "ledger: queue q is at its limit (2 of 2 held)\n"
    rows = json.loads(ok(url, "--now", T0, "--json", "limit"))
    assert rows == [
        {"queue": "default", "limit": None, "held": 1},
        {"queue": "q", "limit": 2, "held": 2},
    ]
    # a lease that ran out frees its slot with no one's help
    assert claim_next(url, now=LATER).stdout.split()[0] == "q1"
    ok(url, "limit", "q", "--clear")
    assert json.loads(ok(url, "--now", LATER, "--json", "limit"))[1]["limit"] is None


def test_limit_prints_a_queue_the_same_way_setting_showing_and_listing(url: str) -> None:
    """`limit QUEUE N`, `limit QUEUE --clear`, `limit QUEUE` and the listing
    print one line format, `QUEUE limit=N held=H`; `limit QUEUE` shows that
    queue's line (a queue with neither limit nor task too)."""
    admit(url, "a", "--queue", "q")
    ok(url, "--now", T0, "claim", "a", "--owner", "w", "--lease", "1h")
    assert ok(url, "--now", T0, "limit", "q", "2") == "q limit=2 held=1\n"
    assert ok(url, "--now", T0, "limit", "q") == "q limit=2 held=1\n"
    assert ok(url, "--now", T0, "limit") == "q limit=2 held=1\n"
    assert json.loads(ok(url, "--now", T0, "--json", "limit", "q")) == {
        "queue": "q",
        "limit": 2,
        "held": 1,
    }
    assert ok(url, "limit", "other") == "other limit=- held=0\n"
    assert ok(url, "--now", T0, "limit", "q", "--clear") == "q limit=- held=1\n"
    assert ok(url, "--now", T0, "limit") == "q limit=- held=1\n"


def test_takeover_of_a_stale_lease_reuses_its_own_slot(url: str) -> None:
    admit(url, "a", "--queue", "q")
    admit(url, "b", "--queue", "q")
    ok(url, "limit", "q", "1")
    ok(url, "--now", T0, "claim", "a", "--owner", "dead", "--lease", "1m")
    took = run_ledger(url, "--now", LATER, "takeover", "a", "--owner", "w2", "--lease", "1m")
    assert took.returncode == 0, took.stderr
    res = claim_next(url, now=LATER)
    assert res.returncode == 7, res.stderr  # the one slot is a's again


BAD_N = "N must be a whole number from 1 to 1000000 (--clear removes the limit), got "


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("admit", "k", "--queue", "x" * 65), "a queue name is at most 64 bytes"),
        (("admit", "k", "--queue", ""), "queue must not be empty"),
        (("limit", "q", "0"), f'{BAD_N}"0"'),
        (("limit", "q", "-1"), f'{BAD_N}"-1"'),  # an argument, not an unknown option
        (("limit", "q", "-1", "--json"), f'{BAD_N}"-1"'),
        (("limit", "q", "--", "-1"), f'{BAD_N}"-1"'),
        (("limit", "q", "1000001"), f'{BAD_N}"1000001"'),
        (("limit", "q", "x"), f'{BAD_N}"x"'),
        (("limit", "q", "2", "--clear"), "give N or --clear, not both"),
        (("limit", "x" * 65, "2"), "a queue name is at most 64 bytes"),
        (("admit", "k", "--queue", "x" * 2000), "a queue name is at most 64 bytes"),
        (("admit", "k", "--queue", "a,b"), "no comma"),  # --queue a,b selects a and b
        (("admit", "k", "--queue", " a"), "no space at its ends"),
        (("limit", "a,b", "1"), "no comma"),
        (("claim", "k", "--owner", "w", "--lease", "1m", "--queue", "q"), "--queue goes with"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    url: str, args: tuple[str, ...], message: str
) -> None:
    res = run_ledger(url, *args)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.splitlines()) == 1 and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    listing = run_ledger(url, "--json", "limit")  # nothing written, often not even the store
    assert listing.stdout.strip() == "[]" or "no store" in listing.stderr, listing
    assert run_ledger(url, "state", "k").returncode != 0


# Each task's command records when it ran: start and end instants (the
# system-wide monotonic clock) in DIR/KEY, written once it has ended.
_RECORD = r"""
import os, sys, time
d, key = sys.argv[1], os.environ["LEDGER_KEY"]
start = time.monotonic_ns()
time.sleep(float(sys.argv[2]))  # long enough for workers to overlap if they could
end = time.monotonic_ns()
with open(os.path.join(d, key + ".tmp"), "w") as fh:
    fh.write(f"{start} {end}")
os.rename(os.path.join(d, key + ".tmp"), os.path.join(d, key))
"""

# Holds its slot until the test kills it: says it started, then waits.
_HANG = r"""
import os, sys, time
open(os.path.join(sys.argv[1], os.environ["LEDGER_KEY"] + ".started"), "w").write(str(os.getpid()))
while True:
    time.sleep(1)
"""


def _kill_started(marker: Path) -> None:
    """Kill the command that wrote its pid into `marker`: `ledger run` starts
    it in a process group of its own, which killing the worker's group leaves
    running."""
    if not marker.exists():
        return
    deadline = time.monotonic() + HANG
    while not (pid := marker.read_text()):  # created, its pid not yet written
        assert time.monotonic() < deadline, "the command never wrote its pid"
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pid), signal.SIGKILL)


def _max_overlap(intervals: list[tuple[int, int]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    live = peak = 0
    for _, step in events:  # an end sorts before a start at the same instant
        live += step
        peak = max(peak, live)
    return peak


def _limited_worker(
    url: str, owner: str, lease: float, script: Path, work: Path
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ledger_cmd(), "--store", url, "run", "--next", "--drain", "--queue", "q",
         "--owner", owner, "--lease", f"{lease}s", "--",
         sys.executable, str(script), str(work), str(lease / 8)],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def test_five_drain_workers_never_hold_more_than_the_limit(url: str, tmp_path: Path) -> None:
    lease = 2.0
    keys = [f"t{i}" for i in range(10)]
    for key in keys:
        admit(url, key, "--queue", "q")
    ok(url, "limit", "q", "2")
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "record.py"
    script.write_text(_RECORD)
    workers = [_limited_worker(url, f"w{i}", lease, script, work) for i in range(5)]
    try:
        for w in workers:
            _, err = w.communicate(timeout=HANG)
            assert w.returncode in (0, 7), err
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    intervals = []
    for key in keys:
        start, end = (work / key).read_text().split()
        intervals.append((int(start), int(end)))
    assert _max_overlap(intervals) <= 2
    for key in keys:
        assert json.loads(ok(url, "--json", "state", key))["Status"] == "completed"

    # A worker holding the one slot is killed: the slot stays held until its
    # lease runs out, then comes back by itself.
    ok(url, "limit", "q", "1")
    admit(url, "hung", "--queue", "q", "--priority", "9")
    admit(url, "next", "--queue", "q")
    hang = tmp_path / "hang.py"
    hang.write_text(_HANG)
    dead = subprocess.Popen(
        [*ledger_cmd(), "--store", url, "run", "--next", "--queue", "q", "--owner", "dead",
         "--lease", f"{lease}s", "--", sys.executable, str(hang), str(work)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_file(work / "hung.started", HANG)
    finally:
        os.killpg(dead.pid, signal.SIGKILL)
        dead.wait()
        _kill_started(work / "hung.started")
    until = Instant.parse(json.loads(ok(url, "--json", "state", "hung"))["LeaseUntil"])
    before = str(Instant.from_unix_ns(until.unix_ns - 1_000_000))
    held = claim_next(url, "--queue", "q", now=before)
    assert held.returncode == 7, held.stderr  # still held by the dead worker's lease
    deadline = time.monotonic() + HANG
    while True:
        res = run_ledger(
            url, "--json", "claim", "--next", "--queue", "q", "--owner", "w", "--lease", "1m"
        )
        if res.returncode == 0:
            break
        assert res.returncode == 7, res.stderr
        assert time.monotonic() < deadline, "the slot never came back"
        time.sleep(lease / 10)
    got = json.loads(res.stdout)
    # the dead worker's own task, first in priority, is ready again with its slot
    assert (got["key"], got["fence"]) == ("hung", 2)
    taken = Instant.parse(got["record"]["UpdatedAt"])
    assert taken.unix_ns > until.unix_ns  # only once the dead lease had run out


def test_stats_json_gives_each_queue_its_figures(url: str) -> None:
    admit(url, "q1", "--queue", "q")
    admit(url, "q2", "--queue", "q")
    admit(url, "d1")
    admit(url, "d2", "--needs", "d1")
    ok(url, "limit", "q", "1")
    ok(url, "limit", "idle", "3")
    ok(url, "--now", T0, "claim", "q1", "--owner", "w", "--lease", "1m")
    body = json.loads(ok(url, "--now", T0, "--json", "stats"))
    assert body["queues"] == {
        "default": {"pending": 2, "claimed": 0, "ready": 1, "limit": None, "held": 0},
        "idle": {"pending": 0, "claimed": 0, "ready": 0, "limit": 3, "held": 0},
        "q": {"pending": 1, "claimed": 1, "ready": 1, "limit": 1, "held": 1},
    }
    later = json.loads(ok(url, "--now", LATER, "--json", "stats"))["queues"]["q"]
    assert (later["ready"], later["held"]) == (2, 0)  # q1's lease ran out
    from prometheus_client.parser import text_string_to_metric_families

    text = ok(url, "--now", T0, "stats", "--prometheus")
    got = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("ledger_queue_")
    }
    assert got[("ledger_queue_tasks", (("queue", "q"), ("status", "claimed")))] == 1
    assert got[("ledger_queue_tasks", (("queue", "default"), ("status", "pending")))] == 2
    assert got[("ledger_queue_ready_tasks", (("queue", "default"),))] == 1
    assert got[("ledger_queue_held_slots", (("queue", "q"),))] == 1
    assert got[("ledger_queue_limit", (("queue", "idle"),))] == 3
    assert ("ledger_queue_limit", (("queue", "default"),)) not in got  # no limit, no sample


def test_a_drained_queue_stays_in_stats_with_zeros(url: str) -> None:
    """A queue whose tasks all finished (and were pruned) is still listed, its
    figures 0: a dashboard's gauges read 0 rather than go missing."""
    admit(url, "z1", "--queue", "z")
    admit(url, "y1", "--queue", "y")
    fence = ok(url, "--now", T0, "claim", "z1", "--owner", "w", "--lease", "1m").strip()
    ok(url, "--now", T0, "complete", "z1", "--owner", "w", "--fence", fence)
    fence = ok(url, "--now", T0, "claim", "y1", "--owner", "w", "--lease", "1m").strip()
    ok(url, "--now", T0, "complete", "y1", "--owner", "w", "--fence", fence, "--failed")
    ok(url, "--now", LATER, "prune", "--older-than", "0s", "--status", "failed")
    zeros = {"pending": 0, "claimed": 0, "ready": 0, "limit": None, "held": 0}
    body = json.loads(ok(url, "--now", LATER, "--json", "stats"))
    assert body["queues"] == {"default": zeros, "y": zeros, "z": zeros}
    assert (body["counts"]["completed"], body["pruned"]) == (1, 1)  # y1 pruned
    prom = ok(url, "--now", LATER, "stats", "--prometheus")
    for queue in ("y", "z"):
        for line in (
            f'ledger_queue_tasks{{queue="{queue}",status="pending"}} 0.0',
            f'ledger_queue_tasks{{queue="{queue}",status="claimed"}} 0.0',
            f'ledger_queue_ready_tasks{{queue="{queue}"}} 0.0',
            f'ledger_queue_held_slots{{queue="{queue}"}} 0.0',
        ):
            assert line in prom.splitlines(), (line, prom)


def test_stats_help_says_what_no_queue_gives(url: str) -> None:
    """`stats --help`: without --queue the table has no queue rows, which it says."""
    admit(url, "a", "--queue", "db")
    assert "queue db" not in ok(url, "--now", T0, "stats")
    text = " ".join(ok(url, "stats", "--help").split())
    assert "Without it, --json and --prometheus give every queue in use and the table none" in text
    assert "default: every queue" not in text


def test_stats_queue_narrows_the_figures_to_the_named_queues(url: str) -> None:
    admit(url, "a", "--queue", "db")
    admit(url, "b", "--queue", "mail")
    admit(url, "c")
    ok(url, "limit", "db", "2")
    body = json.loads(ok(url, "--now", T0, "--json", "stats", "--queue", "db,none"))
    assert body["queues"] == {
        "db": {"pending": 1, "claimed": 0, "ready": 1, "limit": 2, "held": 0},
        "none": {"pending": 0, "claimed": 0, "ready": 0, "limit": None, "held": 0},
    }
    assert body["counts"]["pending"] == 3  # the store's counts stay whole
    text = ok(url, "--now", T0, "stats", "--queue", "db")
    assert "queue db" in text and "held 0 of 2" in text and "queue mail" not in text
    prom = ok(url, "--now", T0, "stats", "--prometheus", "--queue", "mail")
    assert 'queue="mail"' in prom and 'queue="db"' not in prom
    bad = run_ledger(url, "stats", "--queue", "")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr


def test_snapshot_and_restore_carry_queues(url: str, tmp_path: Path) -> None:
    admit(url, "a", "--queue", "q")
    admit(url, "b")
    snap = tmp_path / "snap.json"
    ok(url, "snapshot", "-o", str(snap))
    tasks = json.loads(snap.read_text())["Tasks"]
    by_key = {t["Key"]: t for t in tasks}
    assert by_key["a"]["Queue"] == "q"
    assert list(by_key["b"]) == [  # a record in default: the 14 Go fields only
        "Key", "Status", "Sequence", "Owner", "Fence", "LeaseUntil", "Needs",
        "BlockedBy", "Task", "Rev", "CreatedBy", "CreatedAt", "UpdatedBy", "UpdatedAt",
    ]  # fmt: skip
    other = tmp_path / "other"
    other.mkdir()
    target = f"json:{other / 'store'}"
    ok(target, "restore", str(snap))
    assert claim_next(target, "--queue", "q").stdout.split()[0] == "a"
    assert claim_next(target, "--queue", "q").returncode == 7
    bad = tmp_path / "bad.json"
    bad.write_text(snap.read_text().replace('"Queue":"q"', '"Queue":""'))
    fresh = f"json:{other / 'fresh'}"
    res = run_ledger(fresh, "restore", str(bad))
    assert res.returncode == 8 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "Queue is not a queue name" in res.stderr
    assert run_ledger(fresh, "stats").returncode == 9  # "no store": the refusal wrote nothing


def test_list_takes_queue_and_shows_the_queue_member(url: str) -> None:
    admit(url, "a", "--queue", "q")
    admit(url, "b")
    rows = [json.loads(line) for line in ok(url, "list", "--jsonl", "--queue", "q").splitlines()]
    assert [(r["Key"], r["Queue"]) for r in rows] == [("a", "q")]
    rows = json.loads(ok(url, "--json", "list", "--queue", "default"))
    assert [r["Key"] for r in rows] == ["b"] and "Queue" not in rows[0]


def test_wait_all_queue_waits_for_that_queue_only(url: str) -> None:
    admit(url, "a", "--queue", "q")
    admit(url, "b")  # pending in default: not waited for
    fence = ok(url, "--now", T0, "claim", "a", "--owner", "w", "--lease", "1m").strip()
    ok(url, "--now", T0, "complete", "a", "--owner", "w", "--fence", fence, "--failed")
    res = run_ledger(url, "wait", "--all", "--queue", "q", "--timeout", "1m")
    assert res.returncode == 1, res.stderr  # q settled, and its one task failed
    assert "a" in res.stderr
    res = run_ledger(url, "wait", "--all", "--queue", "default", "--timeout", "0.1s")
    assert res.returncode == 124, res.stderr
    res = run_ledger(url, "wait", "a", "--queue", "q")
    assert res.returncode == 2 and "--queue goes with --all" in res.stderr


def test_state_shows_the_queue_and_a_wait_for_a_slot(url: str) -> None:
    admit(url, "a", "--queue", "q")
    admit(url, "b", "--queue", "q")
    ok(url, "limit", "q", "1")
    ok(url, "--now", T0, "claim", "a", "--owner", "w", "--lease", "1m")
    text = ok(url, "--now", T0, "state", "b")
    assert "queue: q\n" in text
    assert "waiting for a slot in q (1 of 1 held)\n" in text
    assert "waiting" not in ok(url, "--now", LATER, "state", "b")  # a's lease ran out
    assert json.loads(ok(url, "--json", "state", "b"))["Queue"] == "q"
    # Not due yet: its not-before, not the slot, is what it waits for.
    ok(url, "--now", T0, "admit", "c", "--queue", "q", "--delay", "1h")
    assert "waiting" not in ok(url, "--now", T0, "state", "c")


def test_takeover_is_refused_when_others_took_the_slot_meanwhile(url: str) -> None:
    admit(url, "a", "--queue", "q")
    admit(url, "b", "--queue", "q")
    ok(url, "limit", "q", "1")
    ok(url, "--now", T0, "claim", "a", "--owner", "dead", "--lease", "1m")
    # a's lease ran out: its slot is free, and b takes it
    ok(url, "--now", LATER, "claim", "b", "--owner", "w", "--lease", "1m")
    res = run_ledger(url, "--now", LATER, "takeover", "a", "--owner", "w2", "--lease", "1m")
    assert res.returncode == 4, res.stderr
    assert res.stderr == "ledger: queue q is at its limit (1 of 1 held)\n"
    assert json.loads(ok(url, "--json", "state", "a"))["Owner"] == "dead"  # nothing written
