"""`ledger run` through store outages (issue 22): a real PostgreSQL server
restarted under it (`pg_ctl restart -m fast` and `-m immediate`), a TCP proxy
that cuts or stalls its connections, and SQLite's write lock held by a second
connection past the busy timeout.

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

import itertools
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.go_support import go_connect
from tests.outage_support import PgServer, Proxy, pg_server
from tests.timing_support import HANG, wait_until

JOB = """\
log="$1"; secs="$2"
exec 2>>"$log.err"  # the command's own stderr is not ledger's
now() { date +%s.%N; }
echo "start $LEDGER_KEY $LEDGER_FENCE $(now)" >> "$log"
trap 'echo "end $LEDGER_KEY $LEDGER_FENCE $(now) stopped" >> "$log"; exit 143' TERM
if [ "$secs" = flag ]; then
  while [ ! -e "$log.go" ]; do sleep 0.02; done
else
  sleep "$secs" & wait $!
fi
echo "end $LEDGER_KEY $LEDGER_FENCE $(now)" >> "$log"
"""


class Ledger:
    """A `ledger` process whose stderr is read as it comes (to wait for a warning)."""

    def __init__(self, url: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*ledger_cmd(), "--store", url, *args],
            env=subprocess_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.stderr)

    def wait(self) -> int:
        try:
            rc = self.proc.wait(timeout=HANG)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # a hang is a failure: leave no process behind
            self.proc.wait()
            raise
        self._reader.join(HANG)
        return rc


class Runs:
    """The log the commands write: every run of every task's command."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "runs.log"
        self.path.touch()
        self.script = tmp_path / "job.sh"
        self.script.write_text(JOB)

    def command(self, secs: str) -> list[str]:
        return ["--", "sh", str(self.script), str(self.path), secs]

    def lines(self) -> list[list[str]]:
        return [line.split() for line in self.path.read_text().splitlines() if line.strip()]

    def starts(self) -> int:
        return sum(1 for parts in self.lines() if parts[0] == "start")

    def finish(self) -> None:
        (self.path.parent / (self.path.name + ".go")).touch()

    def by_key(self) -> dict[str, list[tuple[float, float | None]]]:
        """Each key's runs as (start, end) in start order (end None: still running)."""
        runs: dict[tuple[str, str], list[float | None]] = {}
        for parts in self.lines():
            kind, key, fence, at = parts[:4]
            slot = runs.setdefault((key, fence), [None, None])
            slot[0 if kind == "start" else 1] = float(at)
        out: dict[str, list[tuple[float, float | None]]] = {}
        for (key, _), (start, end) in runs.items():
            assert start is not None, f"{key}: an end without a start"
            out.setdefault(key, []).append((start, end))
        return {key: sorted(spans) for key, spans in out.items()}

    def assert_no_overlap(self) -> None:
        for key, spans in self.by_key().items():
            for (_, end), (start, _) in itertools.pairwise(spans):
                assert end is not None and end <= start, f"{key}: two runs at once: {spans}"


def admit(url: str, *keys: str) -> None:
    lines = "".join(json.dumps({"key": key}) + "\n" for key in keys)
    done = subprocess.run(
        [*ledger_cmd(), "--store", url, "admit", "--batch", "-"],
        input=lines,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def state(url: str, key: str) -> dict[str, object]:
    res = run_ledger(url, "state", key, "--json")
    assert res.returncode == 0, res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def lease_end(url: str, key: str) -> float:
    """The record's lease_until as a POSIX time (the store's clock is this host's)."""
    text = str(state(url, key)["LeaseUntil"]).removesuffix("Z")
    whole, _, frac = text.partition(".")
    at = datetime.fromisoformat(whole + "+00:00").timestamp()
    return at + float(f"0.{frac or 0}")


def assert_ours(*workers: Ledger) -> None:
    """stderr holds our own one-line messages only: no psycopg noise, no traceback."""
    for worker in workers:
        for line in worker.stderr:
            assert line.startswith("ledger: "), worker.stderr


def assert_clean(url: str) -> None:
    res = run_ledger(url, "doctor")
    assert res.returncode == 0, res.stdout + res.stderr


def assert_each_once(url: str, runs: Runs, keys: list[str]) -> None:
    """Each task's command ran once, and each task was completed once."""
    spans = runs.by_key()
    twice = {key: s for key, s in spans.items() if len(s) != 1}
    assert not twice, f"commands ran twice: {twice}"
    assert sorted(spans) == sorted(keys)
    listed = run_ledger(url, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {r["Key"]: r["Status"] for r in json.loads(listed.stdout)} == dict.fromkeys(
        keys, "completed"
    )
    log = run_ledger(url, "log", "--json")
    assert log.returncode == 0, log.stderr
    done = [e["key"] for e in json.loads(log.stdout) if e["event"] == "ledger.completed"]
    assert sorted(done) == sorted(keys), "a task was completed twice, or not at all"


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


# -- SQLite: the write lock held past the busy timeout ----------------------------------


def _lock(db: Path) -> object:
    conn = go_connect(db)
    conn.execute("BEGIN IMMEDIATE")  # the write lock, as a Go writer holds it
    return conn


def test_sqlite_lock_past_the_busy_timeout_is_ridden_out(tmp_path: Path) -> None:
    """A second connection holds the write lock past the busy timeout (5 s),
    once during the command (a renewal fails) and once as it ends (the
    completion fails): both are tried again and land; the command ran once."""
    db = tmp_path / "s.db"
    lease = 15.0  # the busy timeout (5 s) well inside a third of it and the margin
    admit(str(db), "k")
    runs = Runs(tmp_path)
    run = Ledger(
        str(db), "run", "k", "--owner", "o", "--lease", f"{lease:g}s", *runs.command("flag")
    )
    wait_until(lambda: runs.starts() == 1, "the command started")
    first = lease_end(str(db), "k")
    holder = _lock(db)
    wait_until(lambda: run.saw("renewing k"), "a renewal failed")
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    wait_until(lambda: lease_end(str(db), "k") > first, "a renewal landed")
    holder.execute("BEGIN IMMEDIATE")  # type: ignore[attr-defined]
    runs.finish()
    wait_until(lambda: run.saw("recording k"), "the completion failed")
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    assert run.wait() == 0, run.stderr
    assert len(run.stderr) == 2, run.stderr  # one line per outage
    assert_ours(run)
    assert_each_once(str(db), runs, ["k"])
    assert_clean(str(db))


def test_sqlite_lock_longer_than_the_lease_stops_the_command(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    lease = 4.0  # shorter than the busy timeout: the first renewal cannot land in time
    admit(str(db), "k")
    runs = Runs(tmp_path)
    run = Ledger(
        str(db), "run", "k", "--owner", "o", "--lease", f"{lease:g}s", *runs.command("600")
    )
    wait_until(lambda: runs.starts() == 1, "the command started")
    holder = _lock(db)
    assert run.wait() == 5, run.stderr
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    stopped = runs.by_key()["k"][0][1]
    assert stopped is not None and stopped < lease_end(str(db), "k")
    assert_ours(run)


def test_sqlite_drain_waits_out_the_lock(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    keys = ["a", "b", "c"]
    admit(str(db), *keys)
    runs = Runs(tmp_path)
    holder = _lock(db)
    drain = Ledger(
        str(db), "run", "--next", "--drain", "--owner", "o", "--lease", "10s", *runs.command("0")
    )
    wait_until(lambda: drain.saw("trying again"), "the drain met the lock")
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    assert drain.wait() == 0, drain.stderr
    assert len(drain.stderr) == 1, drain.stderr
    assert_ours(drain)
    assert_each_once(str(db), runs, keys)


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
    from ledger_cli.stores.postgres import PostgresStore
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


def test_sqlite_lock_past_the_busy_timeout_is_an_outage(tmp_path: Path) -> None:
    from ledger_cli.errors import StoreUnavailableError
    from ledger_cli.stores.sqlite import SQLiteStore

    db = tmp_path / "s.db"
    with SQLiteStore(db, busy_timeout=0.05) as store:
        holder = _lock(db)
        with pytest.raises(StoreUnavailableError, match="locked"), store.batch():
            pass
        holder.execute("ROLLBACK")  # type: ignore[attr-defined]
        with store.batch():
            pass
