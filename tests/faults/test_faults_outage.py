"""`ledger run` through store outages: a real PostgreSQL server
restarted under it (`pg_ctl restart -m fast` and `-m immediate`), and a TCP
proxy that cuts, refuses or stalls its connections (SQLite's lock held past
the busy timeout: tests/faults/test_faults_outage_sqlite.py).

Each task's command appends `start KEY FENCE T` and `end KEY FENCE T` (T: the
wall clock) to a log, so the test sees every run of every command, and when
it ran. Outages shorter than the lease: every task completes exactly once and
no command runs twice. An outage longer than the lease: the command is stopped
before its lease (as the store recorded it) runs out, and no two runs of one
task's command overlap. Workers exit 0 at the end, stderr holds only
`ledger: …` lines, and `ledger doctor` is clean.

Every wait is for a state (a log line, a warning, an exit); the only
durations are derived from the lease under test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.outage_runs import (
    Ledger,
    Runs,
    admit,
    assert_clean,
    assert_each_once,
    assert_ours,
    lease_end,
    state,
)
from tests.outage_support import PgServer, Proxy, pg_server
from tests.timing_support import wait_until


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    with pg_server() as pg:
        yield pg


@pytest.fixture
def pg_url(server: PgServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh schema on the throwaway server for each test (a postgresql:// URL)."""
    import psycopg

    schema = f"outage_{abs(hash(request.node.name)) % 10**9}_{os.getpid()}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    yield f"{server.url}&options=-c%20search_path%3D{schema}"


def via(url: str, proxy: Proxy) -> str:
    """`url` through the proxy."""
    return url.replace(f":{proxy.target_port}/", f":{proxy.port}/", 1)


# -- PostgreSQL: restarts and cuts -----------------------------------------------------


def test_drain_workers_ride_out_restarts_and_cuts(
    server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """4 drain workers over 60 tasks through a proxy; `restart -m fast`, a cut
    of every connection, `restart -m immediate`, each once the log shows more
    progress: every task completed once, no command ran twice."""
    lease = 4.0
    keys = [f"t{i:02d}" for i in range(60)]
    admit(pg_url, *keys)
    runs = Runs(tmp_path)
    with Proxy(server.port) as proxy:
        url = via(pg_url, proxy)
        args = ("run", "--next", "--drain", "--lease", f"{lease:g}s", "--wait", f"{lease * 1.5:g}s")
        workers = [Ledger(url, *args, "--owner", f"w{i}", *runs.command("0.05")) for i in range(4)]
        for at, outage in ((10, "fast"), (25, "cut"), (40, "immediate")):
            wait_until(lambda at=at: runs.starts() >= at, f"{at} commands started")
            if outage == "cut":
                proxy.cut()
            else:
                server.restart(outage)
        codes = [w.wait() for w in workers]
    assert all(code in (0, 7) for code in codes), [
        (c, w.stderr) for c, w in zip(codes, workers, strict=True)
    ]
    assert_ours(*workers)
    assert_each_once(pg_url, runs, keys)
    assert_clean(pg_url)
    print(
        f"\n4 workers, {len(keys)} tasks: {server.restarts} restarts, {proxy.cuts} cut, "
        f"{len(runs.lines()) // 2} runs, 0 double runs, "
        f"{sum(w.saw('trying again') for w in workers)} workers warned"
    )


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_run_rides_out_a_restart(
    server: PgServer, pg_url: str, tmp_path: Path, mode: str
) -> None:
    """The server restarts while the command runs: it runs once, the outcome lands, exit 0."""
    admit(pg_url, "solo")
    runs = Runs(tmp_path)
    run = Ledger(pg_url, "run", "solo", "--owner", "o", "--lease", "3s", *runs.command("flag"))
    wait_until(lambda: runs.starts() == 1, "the command started")
    server.restart(mode)
    runs.finish()
    assert run.wait() == 0, run.stderr
    assert_ours(run)
    assert_each_once(pg_url, runs, ["solo"])
    assert_clean(pg_url)


def test_the_outcome_outlives_an_outage_shorter_than_the_lease(
    server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """The command ends while the store is unreachable: the completion is tried
    again (one warning) and lands when it is back, before the lease runs out."""
    lease = 3.0
    admit(pg_url, "k")
    runs = Runs(tmp_path)
    with Proxy(server.port) as proxy:
        run = Ledger(
            via(pg_url, proxy), "run", "k", "--owner", "o", "--lease", f"{lease:g}s",
            *runs.command("flag"),
        )  # fmt: skip
        wait_until(lambda: runs.starts() == 1, "the command started")
        proxy.down()
        runs.finish()
        wait_until(lambda: run.saw("recording k as completed"), "the completion failed")
        proxy.up()
        assert run.wait() == 0, run.stderr
    assert [line for line in run.stderr if "recording k" in line] == run.stderr[-1:]
    assert_ours(run)
    assert_each_once(pg_url, runs, ["k"])
    assert_clean(pg_url)


def test_a_stall_longer_than_the_lease_stops_the_command_in_time(
    server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """The connection stalls past the lease: the command is stopped before the
    lease the store recorded runs out (exit 5); once the lease has run out a
    second runner takes the task, and the two runs never overlap."""
    lease = 2.0
    admit(pg_url, "k")
    runs = Runs(tmp_path)
    with Proxy(server.port) as proxy:
        first = Ledger(
            via(pg_url, proxy), "run", "k", "--owner", "a", "--lease", f"{lease:g}s",
            *runs.command("600"),
        )  # fmt: skip
        wait_until(lambda: runs.starts() == 1, "the command started")
        proxy.stall()
        assert first.wait() == 5, first.stderr
        stopped = runs.by_key()["k"][0][1]
        proxy.resume()
    assert stopped is not None, "the command was not stopped"
    assert_ours(first)
    assert any("could not renew the lease on k" in line for line in first.stderr), first.stderr
    assert stopped < lease_end(pg_url, "k"), "the command outlived its lease"
    second = Ledger(
        pg_url, "run", "--next", "--owner", "b", "--lease", f"{lease:g}s",
        "--wait", f"{lease * 4:g}s", *runs.command("0"),
    )  # fmt: skip
    assert second.wait() == 0, second.stderr
    runs.assert_no_overlap()
    assert len(runs.by_key()["k"]) == 2
    assert state(pg_url, "k")["Status"] == "completed"
    assert_clean(pg_url)


def test_give_up_after_bounds_the_wait(server: PgServer, pg_url: str, tmp_path: Path) -> None:
    """Past --give-up-after of failures a drain exits 9: one warning, one error."""
    admit(pg_url, "a")
    with Proxy(server.port) as proxy:
        proxy.down()
        drain = Ledger(
            via(pg_url, proxy), "run", "--next", "--drain", "--owner", "o", "--lease", "10s",
            "--give-up-after", "1s", "--", "true",
        )  # fmt: skip
        assert drain.wait() == 9, drain.stderr
    assert len(drain.stderr) == 2 and "giving up" in drain.stderr[-1], drain.stderr
    assert_ours(drain)
    assert state(pg_url, "a")["Status"] == "pending"


def test_a_drain_claim_stalled_past_its_lease_is_cut_and_gives_up(
    server: PgServer, pg_url: str
) -> None:
    """A drain worker polling an empty queue meets a stalled connection: its
    claim is cut once the lease it asks for would be over (less the margin),
    fails as an outage, and past --give-up-after (shorter than that) the
    worker exits 9 with one line, instead of hanging while the stall lasts."""
    lease = 2.0
    admit(pg_url, "a")
    with Proxy(server.port) as proxy:
        drain = Ledger(
            via(pg_url, proxy), "run", "--next", "--drain", "--owner", "o",
            "--lease", f"{lease:g}s", "--wait", "1h", "--give-up-after", f"{lease / 4:g}s",
            "--", "true",
        )  # fmt: skip
        wait_until(lambda: state(pg_url, "a")["Status"] == "completed", "the worker ran a")
        proxy.stall()  # it polls for the next task
        assert drain.wait() == 9, drain.stderr  # (a hang here: the claim waited the stall out)
        proxy.resume()
    assert len(drain.stderr) == 1 and "giving up" in drain.stderr[0], drain.stderr
    assert_ours(drain)


def test_claim_next_wait_rides_out_an_outage(server: PgServer, pg_url: str) -> None:
    """`claim --next --wait` meets a store that refuses connections: one
    warning, then the claim once it is back (exit 0, the key and its fence)."""
    admit(pg_url, "a")
    with Proxy(server.port) as proxy:
        proxy.down()
        claim = Ledger(
            via(pg_url, proxy), "claim", "--next", "--wait", "1s", "--owner", "o", "--lease", "5s"
        )
        wait_until(lambda: claim.saw("trying again"), "the claim met the outage")
        proxy.up()
        assert claim.wait() == 0, claim.stderr
    assert len(claim.stderr) == 1, claim.stderr
    assert_ours(claim)
    assert state(pg_url, "a")["Status"] == "claimed"


def test_a_completion_stalled_past_the_lease_gives_up(
    server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """The connection stalls as the command ends: the completion, blocked on
    it, is cut when the lease is over and `run` exits 5 while the stall lasts."""
    lease = 2.0
    admit(pg_url, "k")
    runs = Runs(tmp_path)
    with Proxy(server.port) as proxy:
        run = Ledger(
            via(pg_url, proxy), "run", "k", "--owner", "o", "--lease", f"{lease:g}s",
            *runs.command("flag"),
        )  # fmt: skip
        wait_until(lambda: runs.starts() == 1, "the command started")
        proxy.stall()
        runs.finish()
        assert run.wait() == 5, run.stderr  # (a hang here: the stall was waited out)
        proxy.resume()
    assert any("could not record the outcome of k" in line for line in run.stderr), run.stderr
    assert_ours(run)


# -- the library: an outage is StoreUnavailableError, and PostgreSQL reconnects ------------


def test_postgres_store_reconnects_after_its_connection_is_killed() -> None:
    """The server ends the store's connection: the next call fails with
    StoreUnavailableError (outside a batch or inside), the one after opens a
    new connection and succeeds."""
    import psycopg

    from ledger_cli.engine.record import TaskState
    from ledger_cli.errors import StoreUnavailableError
    from ledger_cli.stores.sql.postgres import PostgresStore
    from tests.sql_support import fresh_schema, postgres_url

    with fresh_schema("ledger_outage") as conninfo, PostgresStore(conninfo) as store:
        rec = TaskState(key="k", status="pending", sequence=1)
        assert store.compare_and_swap("k", None, rec)
        for inside_batch in (False, True):
            pid = store._conn.info.backend_pid
            with psycopg.connect(postgres_url(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            with pytest.raises(StoreUnavailableError):
                if inside_batch:
                    with store.batch():
                        store.load("k")
                else:
                    store.load("k")
            loaded = store.load("k")
            assert loaded is not None and loaded.status == "pending"
            assert store._conn.info.backend_pid != pid
