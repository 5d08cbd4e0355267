"""`ledger run --next --drain`: one long-lived worker claims, runs and
completes task after task over one store connection, until nothing is ready.
Through the CLI, as real processes, on every store a second process can see
(the memory store lives in one process). The multi-process DAG drain is in
tests/storage/test_ready_index.py. Waits are for states (a file, an exit), never times.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.timing_support import HANGUP, alive, wait_for_file

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion


def _events(url: str, key: str) -> list[str]:
    res = run_ledger(url, "log", key, "--json")
    assert res.returncode == 0, res.stderr
    return [e["event"] for e in json.loads(res.stdout)]


def _state(url: str, key: str) -> dict[str, object]:
    res = run_ledger(url, "state", key, "--json")
    assert res.returncode == 0, res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def _start_drain(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ledger_cmd(), "--store", url, "run", "--next", "--drain", *args],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_drain_runs_every_ready_task_in_order_then_exits(url: str, tmp_path: Path) -> None:
    """Exit 1 when one command failed, every other task completed, each task
    with its own history; a second drain finds nothing (exit 7)."""
    for key in ("a", "b", "c"):
        assert run_ledger(url, "admit", key).returncode == 0
    assert run_ledger(url, "admit", "d", "--needs", "a").returncode == 0
    log = tmp_path / "ran"
    res = run_ledger(
        url, "--json", "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--",
        "sh", "-c", f'echo $LEDGER_KEY >> {log}; [ "$LEDGER_KEY" != b ]',
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert log.read_text().split() == ["a", "b", "c", "d"]  # Ready order; d once a completed
    docs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(d["key"], d["status"]) for d in docs] == [
        ("a", "completed"),
        ("b", "failed"),
        ("c", "completed"),
        ("d", "completed"),
    ]
    for key in ("a", "b", "c", "d"):
        assert _events(url, key) == ["ledger.admitted", "ledger.claimed", "ledger.completed"]
    again = run_ledger(
        url, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true"
    )
    assert again.returncode == 7 and again.stderr == "ledger: nothing is ready to claim\n"


def test_drain_exits_0_when_every_task_completed(url: str) -> None:
    for key in ("a", "b"):
        assert run_ledger(url, "admit", key).returncode == 0
    res = run_ledger(url, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true")
    assert res.returncode == 0, res.stderr
    assert {_state(url, k)["Status"] for k in ("a", "b")} == {"completed"}


def test_drain_with_a_key_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    for args in (["a"], []):  # with a KEY; without --next
        res = run_ledger(
            store, "run", *args, "--drain", "--owner", "w", "--lease", "1m", "--", "true"
        )
        assert res.returncode == 2
        assert len(res.stderr.splitlines()) == 1 and "--drain goes with --next" in res.stderr
    assert _state(str(store), "a")["Status"] == "pending"
    assert _events(str(store), "a") == ["ledger.admitted"]


def test_drain_retries_apply_per_task(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    res = run_ledger(
        store, "--json", "run", "--next", "--drain", "--owner", "w", "--lease", "1m",
        "--retries", "1", "--backoff", "10ms", "--", "sh", "-c", '[ "$LEDGER_ATTEMPT" = 2 ]',
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    docs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(d["key"], d["status"], d["attempts"]) for d in docs] == [
        ("a", "completed", 2),
        ("b", "completed", 2),
    ]
    for key in ("a", "b"):
        assert _events(str(store), key) == [
            "ledger.admitted",
            "ledger.claimed",
            "ledger.attempt_failed",
            "ledger.completed",
        ]


def test_drain_stops_at_once_when_a_lease_is_lost(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    pidfile = tmp_path / "pid"
    run = _start_drain(
        str(store), "--owner", "w", "--lease", "1s", "--",
        "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60",
    )  # fmt: skip
    child = int(wait_for_file(pidfile, 30))
    took = run_ledger(
        store,
        "takeover",
        "a",
        "--owner",
        "thief",
        "--lease",
        "1m",
        LEDGER_NOW="2099-01-01T00:00:00Z",
    )
    assert took.returncode == 0, took.stderr
    _, err = run.communicate(timeout=EXIT_TIMEOUT)
    assert run.returncode == 5, err
    assert "lost the lease on a" in err
    assert not alive(child)
    assert _state(str(store), "b")["Status"] == "pending"  # nothing more was claimed


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, HANGUP])
def test_drain_signal_stops_the_child_releases_and_exits(
    tmp_path: Path, sig: signal.Signals
) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    pidfile = tmp_path / "pid"
    run = _start_drain(
        str(store), "--owner", "w", "--lease", "1m", "--",
        "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60",
    )  # fmt: skip
    child = int(wait_for_file(pidfile, 30))
    run.send_signal(sig)
    assert run.wait(timeout=EXIT_TIMEOUT) == 128 + sig
    assert not alive(child)
    for key in ("a", "b"):
        state = _state(str(store), key)
        assert state["Status"] == "pending" and state["Owner"] == "", key


def test_drain_waiting_for_work_stops_on_a_signal(tmp_path: Path) -> None:
    """Between tasks, polling --wait: a signal ends the drain (nothing is held)."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    done = tmp_path / "done"
    run = _start_drain(
        str(store), "--owner", "w", "--lease", "1m", "--wait", "1h", "--",
        "sh", "-c", f"echo $LEDGER_KEY > {done}",
    )  # fmt: skip
    wait_for_file(done, 30)
    deadline = time.monotonic() + EXIT_TIMEOUT
    while _state(str(store), "a")["Status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=EXIT_TIMEOUT) == 128 + signal.SIGTERM


def test_drain_stops_when_the_command_cannot_start(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    missing = str(tmp_path / "no-such-command")
    res = run_ledger(
        store, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", missing
    )
    assert res.returncode == 127
    assert len(res.stderr.splitlines()) == 1
    for key in ("a", "b"):
        assert _state(str(store), key)["Status"] == "pending"


# The command of every task in the DAG tests: it checks the state its task
# needs (its parents' outputs; for the sink, that every worker is still
# running) and writes its own output. argv: the directory, the worker pids file.
_DAG_TASK = r"""
import os, sys, time
d, key = sys.argv[1], os.environ["LEDGER_KEY"]
def ours(name):
    return os.path.exists(os.path.join(d, name))
if key == "root":
    open(os.path.join(d, "root.started"), "w").write(str(os.getpid()))
    while not ours("go"):  # the test says when: a state, not a time
        time.sleep(0.01)
elif key.startswith("m"):
    if not ours("root.out"):
        sys.exit("ran before root")
elif key == "sink":
    missing = [m for m in sys.argv[3:] if not ours(m + ".out")]
    if missing:
        sys.exit(f"ran before {missing}")
    for pid in open(sys.argv[2]).read().split():
        with open(f"/proc/{pid}/stat") as fh:  # a zombie has exited: not running
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                sys.exit(f"worker {pid} stopped before the graph was done")
open(os.path.join(d, key + ".out"), "w").write(os.environ["LEDGER_OWNER_NAME"])
"""


def _drain_worker(
    url: str, name: str, script: Path, pids: Path, *extra: str
) -> subprocess.Popen[str]:
    import sys

    return subprocess.Popen(
        [*ledger_cmd(), "--store", url, "--json", "run", "--next", "--drain", "--owner", name,
         "--lease", "1m", "--", sys.executable, str(script), str(script.parent), str(pids), *extra],
        env=subprocess_env(LEDGER_OWNER_NAME=name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _wait_state(url: str, key: str, status: str) -> None:
    deadline = time.monotonic() + EXIT_TIMEOUT
    while _state(url, key)["Status"] != status:
        assert time.monotonic() < deadline, f"{key} never became {status}"
        time.sleep(0.02)


def test_three_drain_workers_finish_a_fan_out_fan_in_graph(url: str, tmp_path: Path) -> None:
    """root → m01…m16 → sink, and x1, x2 beside them: 20 tasks. Worker A holds
    root until the test says go, which it does only once B and C have run x1
    and x2: each of them has then found nothing ready while A held a live
    lease (before this, they stopped there). Every worker goes on until the
    graph is done: the sink's command finds all three still running, every
    task ran once, after its needs, and each worker exits 0 (7 if it ran none)."""
    middles = [f"m{i:02d}" for i in range(1, 17)]
    assert run_ledger(url, "admit", "root").returncode == 0
    for key in ("x1", "x2"):
        assert run_ledger(url, "admit", key).returncode == 0
    for key in middles:
        assert run_ledger(url, "admit", key, "--needs", "root").returncode == 0
    sink = run_ledger(url, "admit", "sink", *(a for m in middles for a in ("--needs", m)))
    assert sink.returncode == 0, sink.stderr
    work = tmp_path / "work"
    work.mkdir()
    script = work / "task.py"
    script.write_text(_DAG_TASK)
    pids = tmp_path / "pids"
    workers = [_drain_worker(url, "A", script, pids, *middles)]
    try:
        wait_for_file(work / "root.started", EXIT_TIMEOUT)
        workers += [_drain_worker(url, n, script, pids, *middles) for n in ("B", "C")]
        pids.write_text(" ".join(str(w.pid) for w in workers))
        for key in ("x1", "x2"):
            _wait_state(url, key, "completed")
        (work / "go").touch()
        outs = []
        for w in workers:
            out, err = w.communicate(timeout=EXIT_TIMEOUT * 4)
            lines = [json.loads(line) for line in out.splitlines()]
            ran = [r["key"] for r in lines if "error" not in r]
            if ran:
                assert w.returncode == 0 and len(ran) == len(lines), (out, err)
            else:  # a worker that ran none says so (exit 7), as `claim --next` does
                assert w.returncode == 7, err
                assert [r["error"]["code"] for r in lines] == ["nothing_ready"], out
            outs.append(ran)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    ran_all = sorted(k for ran in outs for k in ran)
    assert ran_all == sorted(["root", "x1", "x2", *middles, "sink"]), "each task ran once"
    for key in ran_all:
        assert _state(url, key)["Status"] == "completed", key


def test_drain_waits_for_a_lease_another_holds_then_runs_what_it_unblocks(url: str) -> None:
    """A task held by another worker (a live lease) keeps the drain going: its
    completion makes `after` ready, and the drain runs it before stopping."""
    for key in ("held", "free"):
        assert run_ledger(url, "admit", key).returncode == 0
    assert run_ledger(url, "admit", "after", "--needs", "held").returncode == 0
    fence = run_ledger(url, "claim", "held", "--owner", "other", "--lease", "1h")
    assert fence.returncode == 0, fence.stderr
    run = _start_drain(url, "--owner", "w", "--lease", "1m", "--", "true")
    _wait_state(url, "free", "completed")
    assert run.poll() is None, run.communicate()  # it went on after `free`
    done = run_ledger(url, "complete", "held", "--owner", "other", "--fence", fence.stdout.strip())
    assert done.returncode == 0, done.stderr
    _, err = run.communicate(timeout=EXIT_TIMEOUT)
    assert run.returncode == 0, err
    assert _state(url, "after")["Status"] == "completed"
    assert _state(url, "after")["Owner"] == "w"


def test_until_idle_stops_while_another_worker_holds_a_lease(url: str) -> None:
    for key in ("held", "free"):
        assert run_ledger(url, "admit", key).returncode == 0
    assert run_ledger(url, "admit", "after", "--needs", "held").returncode == 0
    assert run_ledger(url, "claim", "held", "--owner", "other", "--lease", "1h").returncode == 0
    res = run_ledger(
        url, "run", "--next", "--drain", "--until-idle", "--owner", "w", "--lease", "1m", "--",
        "true",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert _state(url, "free")["Status"] == "completed"
    assert _state(url, "after")["Status"] == "pending"


def test_until_idle_without_drain_is_a_usage_error(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    res = run_ledger(
        store, "run", "--next", "--until-idle", "--owner", "w", "--lease", "1m", "--", "true"
    )
    assert res.returncode == 2
    assert res.stderr == "ledger: --until-idle goes with --drain\n"
    assert _state(str(store), "a")["Status"] == "pending"


def test_drain_takes_a_task_whose_holder_died_once_its_lease_runs_out(url: str) -> None:
    """A holder that never comes back keeps the drain polling only until its
    lease runs out: then the task is ready, and the drain runs it and what
    it unblocks."""
    assert run_ledger(url, "admit", "orphan").returncode == 0
    assert run_ledger(url, "admit", "after", "--needs", "orphan").returncode == 0
    took = run_ledger(url, "claim", "orphan", "--owner", "dead", "--lease", "1s")
    assert took.returncode == 0, took.stderr
    res = run_ledger(
        url, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true",
        timeout=EXIT_TIMEOUT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    for key in ("orphan", "after"):
        state = _state(url, key)
        assert (state["Status"], state["Owner"]) == ("completed", "w"), key


def test_drain_does_not_wait_for_a_task_not_due_yet(url: str) -> None:
    assert run_ledger(url, "admit", "now").returncode == 0
    assert run_ledger(url, "admit", "later", "--not-before", "2999-01-01T00:00:00Z").returncode == 0
    res = run_ledger(
        url, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true",
        timeout=EXIT_TIMEOUT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert _state(url, "now")["Status"] == "completed"
    assert _state(url, "later")["Status"] == "pending"


def test_an_outage_while_waiting_for_a_held_lease_counts_against_give_up(
    tmp_path: Path,
) -> None:
    """SQLite's write lock held past the busy timeout while the drain waits on
    another worker's lease: an outage like any other, given up on at once
    with --give-up-after 0s (exit 9, one line)."""
    from tests.outage_runs import lock_sqlite

    db = tmp_path / "s.db"
    url = str(db)
    for key in ("held", "free"):
        assert run_ledger(url, "admit", key).returncode == 0
    assert run_ledger(url, "claim", "held", "--owner", "other", "--lease", "1h").returncode == 0
    run = _start_drain(url, "--owner", "w", "--lease", "1m", "--give-up-after", "0s", "--", "true")
    _wait_state(url, "free", "completed")
    holder = lock_sqlite(db)
    try:
        _, err = run.communicate(timeout=EXIT_TIMEOUT)
    finally:
        holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    assert run.returncode == 9, err
    assert len(err.splitlines()) == 1 and "giving up" in err, err


def test_a_drain_waits_out_a_claim_in_flight_on_postgresql(url: str) -> None:
    """A ready row another transaction holds locked (a claim in flight) is no
    end of the graph: the drain's stop check reads it, ready, without locking
    it, and the drain polls until the lock goes, then runs the task. (Read
    with FOR UPDATE SKIP LOCKED, the check skipped the row and the drain
    stopped at once with exit 7.) The test holds the lock until the worker has
    committed a good many transactions: its polls, each a claim and a check."""
    if not url.startswith("postgresql"):
        pytest.skip("a row lock held by another transaction is PostgreSQL's case")
    import psycopg

    assert run_ledger(url, "admit", "t1").returncode == 0
    with psycopg.connect(url) as conn:
        commits = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        with psycopg.connect(url, autocommit=True) as watch:
            watch.execute("SELECT pg_stat_clear_snapshot()")
            base = watch.execute(commits).fetchone()
            assert base is not None
            conn.execute("SELECT key FROM ledger_tasks WHERE key = 't1' FOR UPDATE")
            worker = _start_drain(url, "--owner", "w", "--lease", "1m", "--", "true")
            try:
                deadline = time.monotonic() + EXIT_TIMEOUT
                while True:
                    assert worker.poll() is None, f"the drain stopped: {worker.communicate()}"
                    watch.execute("SELECT pg_stat_clear_snapshot()")
                    now = watch.execute(commits).fetchone()
                    assert now is not None
                    if now[0] - base[0] >= 40:
                        break
                    assert time.monotonic() < deadline, "the worker never polled"
                    time.sleep(0.05)
            finally:
                conn.rollback()  # the lock goes
            _, err = worker.communicate(timeout=EXIT_TIMEOUT)
    assert worker.returncode == 0, err
    assert _state(url, "t1")["Status"] == "completed"
