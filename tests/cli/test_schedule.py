"""When, and in what order (docs/design.md §8.1, §8.2) through the command line:
`admit --not-before | --delay`, `--priority`, batch members, rebases, bad
input, snapshot/restore of the extensions; and, as real processes on every
durable store, claimers that hand out every task once in the Ready order."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from tests.cli_support import Cli, ledger_cmd, make_cli, run_ledger, subprocess_env
from tests.schedule_support import brute_ready
from tests.stores import KINDS

T0 = "2026-01-02T03:04:05Z"
T1 = "2026-01-02T03:04:06Z"
T2 = "2026-01-02T03:04:07Z"
LATER = "2026-01-02T05:00:00Z"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return make_cli(monkeypatch)


def _next(cli: Cli, now: str) -> str:
    res = cli("claim", "--next", "--owner", "w", "--lease", "1d", now=now)
    return res.stdout.split()[0] if res.code == 0 else f"exit {res.code}"


def test_without_priorities_or_delays_the_order_is_createdat_then_key(cli: Cli) -> None:
    cli.ok("admit", "b", now=T0)
    cli.ok("admit", "a", now=T0)
    cli.ok("admit", "0", now=T1)
    assert [_next(cli, T2) for _ in range(4)] == ["a", "b", "0", "exit 7"]


def test_priority_then_due_then_key(cli: Cli) -> None:
    cli.ok("admit", "old", now=T0)
    cli.ok("admit", "urgent", "--priority", "10", now=T1)
    cli.ok("admit", "bulk", "--priority", "-5", now=T0)
    cli.ok("admit", "later", "--priority", "10", "--delay", "1h", now=T0)
    cli.ok("admit", "nightly", "--not-before", "2026-01-02T04:00:00Z", now=T0)
    assert [_next(cli, T2) for _ in range(3)] == ["urgent", "old", "bulk"]
    assert _next(cli, T2) == "exit 7"  # later and nightly are not due
    # A claim by key does not wait (the caller's decision, as in Go).
    assert cli.ok("claim", "nightly", "--owner", "w", "--lease", "1m", now=T2).stdout == "1\n"
    assert _next(cli, LATER) == "later"


def test_due_orders_within_a_priority(cli: Cli) -> None:
    cli.ok("admit", "a", "--not-before", "2026-01-02T03:30:00Z", now=T0)
    cli.ok("admit", "b", now=T1)  # due at T1, earlier than a's 03:30
    assert [_next(cli, LATER) for _ in range(2)] == ["b", "a"]


def test_a_rebase_takes_new_values_and_clears_missing_ones(cli: Cli) -> None:
    cli.ok("admit", "r", "--priority", "7", "--delay", "1h", now=T0)
    cli.ok("admit", "s", "--priority", "1", now=T0)
    state = json.loads(cli.ok("--json", "state", "r").stdout)
    assert (state["Priority"], state["NotBefore"]) == (7, "2026-01-02T04:04:05Z")
    cli.ok("admit", "r", "--seq", "2", now=T1)  # cleared: due now, priority 0
    state = json.loads(cli.ok("--json", "state", "r").stdout)
    assert "Priority" not in state and "NotBefore" not in state
    assert [_next(cli, T2) for _ in range(2)] == ["s", "r"]


def test_duplicates_and_conflicts_write_no_schedule(cli: Cli) -> None:
    cli.ok("admit", "d", now=T0)
    assert cli.ok("admit", "d", "--priority", "9").stdout == "duplicate\n"
    assert "Priority" not in json.loads(cli.ok("--json", "state", "d").stdout)


def test_batch_members(cli: Cli) -> None:
    lines = (
        '{"key":"x","priority":-1}\n'
        '{"key":"y","not_before":"2026-01-02T04:00:00Z"}\n'
        '{"key":"z","priority":1000}\n'
    )
    assert cli.ok("admit", "--batch", "-", input=lines, now=T0).stdout == (
        "admitted x\nadmitted y\nadmitted z\n"
    )
    assert [_next(cli, T2) for _ in range(3)] == ["z", "x", "exit 7"]


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (["admit", "k", "--priority", "1001"], None, "--priority 1001"),
        (["admit", "k", "--priority", "1.5"], None, '--priority "1.5"'),
        (["admit", "k", "--priority", "x"], None, '--priority "x"'),
        (["admit", "k", "--not-before", "tomorrow"], None, '--not-before "tomorrow"'),
        (["admit", "k", "--delay", "0s"], None, '--delay "0s" must be positive'),
        (["admit", "k", "--delay", "-5m"], None, "--delay"),
        (["admit", "k", "--delay", "1m", "--not-before", T0], None, "not both"),
        (["admit", "--batch", "-"], '{"key":"a"}\n{"key":"k","priority":2000}\n', "line 2:"),
        (["admit", "--batch", "-"], '{"key":"a"}\n{"key":"k","priority":true}\n', "line 2:"),
        (["admit", "--batch", "-"], '{"key":"a"}\n{"key":"k","not_before":5}\n', "line 2:"),
        (["admit", "--batch", "-"], '{"key":"a"}\n{"key":"k","not_before":"x"}\n', "line 2:"),
        (["admit", "--batch", "-", "--priority", "1"], '{"key":"a"}\n', "--batch takes no"),
    ],
)
def test_bad_input_exits_2_naming_it_and_writes_nothing(
    cli: Cli, args: list[str], stdin: str | None, says: str
) -> None:
    res = cli(*args, input=stdin)
    assert res.code == 2, res
    assert says in res.stderr
    assert list(cli.store.range()) == []


def test_snapshot_carries_the_extensions_and_restore_reads_them(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli.ok("admit", "plain", now=T0)
    cli.ok("admit", "p", "--priority", "4", now=T0)
    cli.ok("admit", "n", "--not-before", "2026-01-02T04:00:00.5Z", "--priority", "-2", now=T0)
    data = cli.ok("snapshot").stdout
    doc = json.loads(data)
    by_key = {r["Key"]: r for r in doc["Tasks"]}
    assert list(by_key["n"])[-2:] == ["NotBefore", "Priority"]
    assert (by_key["n"]["NotBefore"], by_key["n"]["Priority"]) == ("2026-01-02T04:00:00.5Z", -2)
    assert list(by_key["p"])[14:] == ["Priority"]
    assert len(by_key["plain"]) == 14
    # A record without extensions is byte-identical to the Go encoding.
    from ledger_cli.engine.snapshot import Snapshot
    from ledger_cli.engine.wire.encode import record_to_json

    plain = cli.store.load("plain")
    assert plain is not None and record_to_json(plain) in data
    assert Snapshot.decode(data).encode().decode() != data  # the extras are extra
    other = make_cli(monkeypatch)
    other.ok("restore", "-", input=data)
    assert other.ok("snapshot").stdout == data
    assert [_next(other, LATER) for _ in range(3)] == ["p", "plain", "n"]


def test_stats_counts_scheduled_tasks(cli: Cli) -> None:
    cli.ok("admit", "a", now=T0)
    cli.ok("admit", "b", "--delay", "1h", now=T0)
    cli.ok("admit", "c", "--priority", "3", now=T0)
    body = cli.ok("--json", "stats", now=T1).json()
    assert (body["ready"], body["scheduled"]) == (2, 1)
    assert "ledger_scheduled_tasks 1.0" in cli.ok("stats", "--prometheus", now=T1).stdout
    body = cli.ok("--json", "stats", now=LATER).json()
    assert (body["ready"], body["scheduled"]) == (3, 0)


# -- claimers as processes on every durable store ----------------------------------

SHARED = sorted(k for k in KINDS if k != "memory")
CLAIMERS = 4
NOW = "2026-03-01T12:00:00Z"


@pytest.mark.parametrize("kind", SHARED)
def test_claimers_hand_out_every_task_once_in_the_ready_order(kind: str, tmp_path: Path) -> None:
    import random

    rng = random.Random(8)
    lines = []
    for i in range(60):
        item: dict[str, object] = {"key": f"t{i:02d}", "priority": rng.choice((0, 0, 5, -5, 20))}
        if rng.random() < 0.3:  # some not due at NOW, some due already
            item["not_before"] = rng.choice(("2026-03-01T11:00:00Z", "2026-03-02T00:00:00Z"))
        lines.append(json.dumps(item) + "\n")
    with KINDS[kind].place(tmp_path) as location:
        url = KINDS[kind].url(location)
        res = run_ledger(
            url,
            "--now",
            "2026-03-01T10:00:00Z",
            "admit",
            "--batch",
            "-",
            input="".join(lines).encode(),
        )
        assert res.returncode == 0, res.stderr
        store = KINDS[kind].open(location, lambda: Instant.parse(NOW))
        try:
            order = brute_ready(store, Instant.parse(NOW))
        finally:
            store.close()
        loop = (
            "import subprocess, sys\n"
            "got = []\n"
            "while True:\n"
            "    p = subprocess.run(sys.argv[2:], capture_output=True, text=True)\n"
            "    if p.returncode == 7: break\n"
            "    assert p.returncode == 0, p.stderr\n"
            "    got.append(p.stdout.split()[0])\n"
            "open(sys.argv[1], 'w').write('\\n'.join(got))\n"
        )
        procs = [
            subprocess.Popen(
                [
                    ledger_cmd()[0],
                    "-c",
                    loop,
                    str(tmp_path / f"got{n}"),
                    *ledger_cmd(),
                    "--store",
                    url,
                    "--now",
                    NOW,
                    "claim",
                    "--next",
                    "--owner",
                    f"w{n}",
                    "--lease",
                    "1h",
                ],
                env=subprocess_env(),
            )
            for n in range(CLAIMERS)
        ]
        assert [p.wait(timeout=300) for p in procs] == [0] * CLAIMERS
        got = [(tmp_path / f"got{n}").read_text().split() for n in range(CLAIMERS)]
        claimed = [key for keys in got for key in keys]
        assert sorted(claimed) == sorted(order)  # every ready task once, nothing not due
        history = run_ledger(url, "log", "--jsonl")
        sequence = [
            e["key"]
            for e in map(json.loads, history.stdout.splitlines())
            if e["event"] == "ledger.claimed"
        ]
        # In commit order, each claim took one of the first CLAIMERS still unclaimed
        # in the Ready order (the others may be in flight in the other claimers).
        left = list(order)
        for key in sequence:
            assert left.index(key) < CLAIMERS, (key, left[:CLAIMERS])
            left.remove(key)
        # Each claimer's own claims follow the Ready order.
        for keys in got:
            assert keys == sorted(keys, key=order.index)


# -- the SQLite index in the Ready order (stores/sql/sqlite_schema.py) ---------------------


def test_sqlite_due_index_go_rows_older_index_and_doctor(tmp_path: Path) -> None:
    import sqlite3

    from ledger_cli.stores.sql import sqlite_schema

    db = tmp_path / "l.db"
    url = f"sqlite:{db}"
    for key, args in (("hi", ["--priority", "1"]), ("lo", ["--priority", "-1"])):
        assert run_ledger(url, "--now", T0, "admit", key, *args).returncode == 0
    conn = sqlite3.connect(db)
    # A row the Go service writes with plain SQL: priority 0, due at CreatedAt.
    conn.execute(
        "INSERT INTO ledger_tasks (key, status, sequence, created_at, updated_at,"
        " created_by, updated_by) VALUES ('go', 'pending', 1, ?, ?, 'go', 'go')",
        (T1, T1),
    )
    # An index built by an older release: no ledger_due.
    for name in sqlite_schema.DUE_OBJECTS[2:]:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DROP TABLE ledger_due")
    conn.commit()
    conn.close()
    got = [
        run_ledger(url, "--now", T2, "claim", "--next", "--owner", "w", "--lease", "1h").stdout
        for _ in range(3)
    ]
    assert [g.split()[0] for g in got] == ["hi", "go", "lo"]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM ledger_due").fetchone()[0] == 3
    conn.execute("UPDATE ledger_due SET rank = 7 WHERE key = 'lo'")
    conn.commit()
    conn.close()
    bad = run_ledger(url, "doctor")
    assert bad.returncode == 9 and "ledger_due" in bad.stdout + bad.stderr
    assert run_ledger(url, "doctor", "--fix").returncode == 0
    assert run_ledger(url, "doctor").returncode == 0


def test_postgres_due_index_go_rows_older_index_and_doctor(tmp_path: Path) -> None:
    import psycopg

    from ledger_cli.stores.sql.postgres import PostgresStore
    from tests.sql_support import fresh_schema

    with fresh_schema("ledger_due") as conninfo:
        store = PostgresStore(conninfo)
        try:
            from ledger_cli.engine.ledger import Ledger

            led = Ledger(store)
            with store.batch():
                led.admit_outcome("t", "hi", 1, None, Instant.parse(T0), priority=1)
                led.admit_outcome("t", "lo", 1, None, Instant.parse(T0), priority=-1)
        finally:
            store.close()
        with psycopg.connect(conninfo, autocommit=True) as conn:
            # A row the Go service writes with plain SQL: priority 0, due at CreatedAt.
            conn.execute(
                "INSERT INTO ledger_tasks (key, status, sequence, created_at, updated_at,"
                " created_by, updated_by) VALUES ('go', 'pending', 1, %s, %s, 'go', 'go')",
                (T1, T1),
            )
            # An index built by an older release: no ledger_due.
            conn.execute("DROP TABLE ledger_due")
            conn.execute("DROP FUNCTION ledger_due_sync() CASCADE")
        store = PostgresStore(conninfo)  # the first opener builds it
        try:
            from ledger_cli.engine import ready

            now = Instant.parse(T2)
            with store.batch():
                order = [r.key for r in ready.ready_iter(store, store.load, now)]
            assert order == ["hi", "go", "lo"]
            assert store.check_ready_index() == []
        finally:
            store.close()
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("UPDATE ledger_due SET rank = 7 WHERE key = 'lo'")
        store = PostgresStore(conninfo)
        try:
            problems = store.check_ready_index()
            assert problems and "ledger_due" in problems[0]
            store.rebuild_ready_index()
            assert store.check_ready_index() == []
        finally:
            store.close()


def test_json_ready_index_of_an_older_release_is_rebuilt_in_the_new_order(tmp_path: Path) -> None:
    store = tmp_path / "store"
    url = f"json:{store}"
    for key, args in (("a", []), ("b", ["--priority", "2"]), ("c", ["--delay", "1h"])):
        assert run_ledger(url, "--now", T0, "admit", key, *args).returncode == 0
    manifest = store / "ready" / "manifest"
    head, _, rest = manifest.read_text().partition("\n")
    assert head.startswith("ledger_cli.ready 5 ")
    manifest.write_text(head.replace("ready 5", "ready 1") + "\n" + rest)  # an older release's
    got = [
        run_ledger(url, "--now", T2, "claim", "--next", "--owner", "w", "--lease", "1d").stdout
        for _ in range(3)
    ]
    assert [g.split()[0] if g else None for g in got] == ["b", "a", None]  # c is not due
    assert manifest.read_text().startswith("ledger_cli.ready 5 ")
    assert run_ledger(url, "doctor").returncode == 0
