"""PostgresStore against a real PostgreSQL server (skipped with the reason when
none is reachable, failing instead when CI is set): schema and types, the CAS
contract, uint64 range, NUL keys, batches, the server clock, history,
injection-proofness, errors. (The replay of every
unbounded trace on this store is in tests/storage/test_store_conformance.py.)"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli import errors
from ledger_cli.engine import gojson
from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.stores.sql.postgres import PostgresStore
from tests.sql_support import HOSTILE_TEXTS, fresh_schema, require_postgres

T0 = Instant.parse("2024-01-01T00:00:00Z")
HOUR = timedelta(hours=1)
A = "test-actor"
UINT64_MAX = 2**64 - 1


@pytest.fixture
def conninfo() -> Iterator[str]:
    with fresh_schema() as info:
        yield info


@pytest.fixture
def store(conninfo: str) -> Iterator[PostgresStore]:
    with PostgresStore(conninfo) as s:
        yield s


def raw(conninfo: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


# -- schema ---------------------------------------------------------------------------


def test_schema_types_and_collation(store: PostgresStore, conninfo: str) -> None:
    cols = raw(
        conninfo,
        "SELECT column_name, data_type, numeric_precision, is_nullable, column_default,"
        " collation_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = 'ledger_tasks'"
        " ORDER BY ordinal_position",
    )
    assert [c[0] for c in cols] == [
        "key",
        "status",
        "sequence",
        "owner",
        "fence",
        "lease_until",
        "needs",
        "blocked_by",
        "task",
        "rev",
        "created_at",
        "updated_at",
        "created_by",
        "updated_by",
    ]
    types = {c[0]: c[1] for c in cols}
    assert types["key"] == "text" and types["task"] == "bytea"
    assert {types[c] for c in ("sequence", "fence", "rev")} == {"numeric"}
    assert {c[2] for c in cols if c[1] == "numeric"} == {20}
    assert {c[0] for c in cols if c[3] == "YES"} == {"task"}
    assert dict((c[0], c[5]) for c in cols)["key"] == "C"
    assert dict((c[0], c[4]) for c in cols)["needs"] == "'[]'::text"
    indexes = {
        r[0]
        for r in raw(
            conninfo, "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
        )
    }
    assert {"ledger_tasks_claimable", "ledger_history_key"} <= indexes


def test_claimable_scan_can_use_the_index(store: PostgresStore, conninfo: str) -> None:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = " ".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT key FROM ledger_tasks WHERE status = ANY(%s)",
                (["pending", "claimed"],),
            )
        )
    assert "ledger_tasks_claimable" in plan


def test_concurrent_openers_of_an_empty_schema_all_succeed(conninfo: str) -> None:
    failures: list[BaseException] = []

    def open_one() -> None:
        try:
            PostgresStore(conninfo).close()
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


# -- CAS contract and encodings ----------------------------------------------------------


def test_cas_insert_if_absent_and_rev(store: PostgresStore) -> None:
    rec = TaskState(key="k", status="pending", sequence=1, created_at=T0, updated_at=T0)
    assert store.compare_and_swap("k", None, rec.replace(rev=9))
    assert not store.compare_and_swap("k", None, rec.replace(sequence=2))
    cur = store.load("k")
    assert cur == rec and cur is not None and cur.rev == 0
    nxt = cur.replace(status="claimed", owner="o", fence=1, lease_until=T0 + HOUR, rev=77)
    assert store.compare_and_swap("k", cur, nxt)
    assert store.load("k") == nxt.replace(rev=1)
    assert not store.compare_and_swap("k", cur, nxt)


@pytest.mark.parametrize("field", ["sequence", "status", "fence", "rev"])
def test_cas_compares_the_four_fields(store: PostgresStore, field: str) -> None:
    store.compare_and_swap("k", None, TaskState(key="k", status="pending", sequence=1))
    cur = store.load("k")
    assert cur is not None
    wrong = {"sequence": 2, "status": "claimed", "fence": 1, "rev": 1}[field]
    assert not store.compare_and_swap("k", cur.replace(**{field: wrong}), cur.replace(owner="x"))
    assert store.load("k") == cur
    other = cur.replace(owner="o", task={"t": 1}, needs=("n",), updated_by="zz")
    assert store.compare_and_swap("k", other, cur.replace(owner="y"))


def test_cas_against_a_missing_key_fails(store: PostgresStore) -> None:
    old = TaskState(key="k", status="pending", sequence=1)
    assert not store.compare_and_swap("k", old, old)
    assert store.load("k") is None


def test_uint64_values_round_trip(store: PostgresStore, conninfo: str) -> None:
    rec = TaskState(key="k", status="pending", sequence=UINT64_MAX, fence=UINT64_MAX - 1)
    assert store.compare_and_swap("k", None, rec)
    got = store.load("k")
    assert got == rec and got is not None and type(got.sequence) is int
    ledger = Ledger(store)
    assert ledger.claim(A, "k", "o", HOUR, T0) == UINT64_MAX  # fence + 1, compared in SQL
    assert raw(conninfo, "SELECT sequence::text, fence::text, rev::text FROM ledger_tasks") == [
        (str(UINT64_MAX), str(UINT64_MAX), "1")
    ]
    cur = store.load("k")
    assert cur is not None
    with pytest.raises(errors.StoreError, match="uint64"):
        store.compare_and_swap("k", cur, cur.replace(fence=UINT64_MAX + 1))
    with pytest.raises(errors.StoreError, match="uint64"):
        store.compare_and_swap("n", None, TaskState(key="n", status="pending", sequence=-1))
    assert not store.compare_and_swap("k", cur.replace(sequence=UINT64_MAX + 5), cur)
    assert store.load("k") == cur and store.load("n") is None


@pytest.mark.parametrize(
    ("needs", "column"), [(None, "null"), ((), "[]"), (("a", "x<y"), '["a","x\\u003cy"]')]
)
def test_needs_kinds_round_trip(
    store: PostgresStore, conninfo: str, needs: tuple[str, ...] | None, column: str
) -> None:
    rec = TaskState(key="k", status="pending", sequence=1, needs=needs)
    assert store.compare_and_swap("k", None, rec)
    got = store.load("k")
    assert got == rec and got is not None and (got.needs is None) == (needs is None)
    assert raw(conninfo, "SELECT needs FROM ledger_tasks") == [(column,)]


def test_rows_use_go_encodings(store: PostgresStore, conninfo: str) -> None:
    task = {"z": [1, 2.5, None, True, "<&>"], "a": {"b": 1e21}, "n": 2**60}
    rec = TaskState(
        key="k",
        status="claimed",
        sequence=9,
        owner="o",
        fence=3,
        lease_until=Instant.parse("2024-01-01T03:00:00.000000001+02:00"),
        task=task,
        created_by="c",
        created_at=Instant.parse("0000-12-31T23:00:00Z"),
        updated_by="u",
        updated_at=T0,
    )
    assert store.compare_and_swap("k", None, rec)
    row = raw(conninfo, "SELECT lease_until, task, created_at, updated_at FROM ledger_tasks")[0]
    assert row == (
        "2024-01-01T03:00:00.000000001+02:00",
        gojson.encode_value(task).encode(),
        "0000-12-31T23:00:00Z",
        "2024-01-01T00:00:00Z",
    )
    got = store.load("k")
    assert got == rec.replace(task={**task, "n": float(2**60)})


def test_nul_cannot_be_stored(store: PostgresStore) -> None:
    ledger = Ledger(store)
    with pytest.raises(errors.StoreError, match="NUL"):
        ledger.admit(A, "a\x00b", 1, None, T0)
    with pytest.raises(errors.StoreError, match="NUL"):
        store.load("a\x00b")
    ledger.admit(A, "k", 1, {"payload": "nul \x00 is fine inside JSON"}, T0)
    with pytest.raises(errors.StoreError, match="NUL"):
        ledger.claim(A, "k", "own\x00er", HOUR, T0)
    with pytest.raises(errors.StoreError, match="NUL"):
        ledger.admit("act\x00or", "k2", 1, None, T0)
    rec = store.load("k")
    assert rec is not None and rec.task == {"payload": "nul \x00 is fine inside JSON"}
    assert rec.status == "pending" and store.load("k2") is None


def test_range_is_sorted_by_utf8_bytes(store: PostgresStore) -> None:
    keys = ["z", "a", "B", "é", "\uffff", "𝄞", "a/b", "a b", "_x", "aa", "~", "A"]
    for key in keys:
        assert store.compare_and_swap(key, None, TaskState(key=key, status="pending"))
    assert [r.key for r in store.range()] == sorted(keys, key=byte_order)


def test_by_status_orders_by_created_at_instant_then_key(store: PostgresStore) -> None:
    times = {
        "k1": "2024-01-01T00:00:00.5Z",
        "k2": "2024-01-01T00:00:00Z",
        "k3": "2024-01-01T01:00:00+02:00",
        "k0": "2024-01-01T00:00:00Z",
    }
    for key, text in times.items():
        store.compare_and_swap(
            key,
            None,
            TaskState(key=key, status="pending", created_at=Instant.parse(text)),
        )
    store.compare_and_swap("done", None, TaskState(key="done", status="failed"))
    assert [r.key for r in store.by_status(["pending", "claimed"])] == ["k3", "k0", "k2", "k1"]
    assert [r.key for r in store.by_status(["failed"])] == ["done"]


def test_two_connections_racing_one_cas_have_one_winner(conninfo: str) -> None:
    with PostgresStore(conninfo) as a, PostgresStore(conninfo) as b:
        a.compare_and_swap("k", None, TaskState(key="k", status="pending"))
        cur = a.load("k")
        assert cur is not None
        results: list[bool] = []
        with a.batch():
            assert a.compare_and_swap("k", cur, cur.replace(owner="a"))
            thread = threading.Thread(
                target=lambda: results.append(b.compare_and_swap("k", cur, cur.replace(owner="b")))
            )
            thread.start()
            time.sleep(0.3)  # b waits on the row lock, then re-checks against a's row
            assert results == []
        thread.join()
        assert results == [False]
        got = b.load("k")
        assert got is not None and (got.owner, got.rev) == ("a", 1)


# -- batch ---------------------------------------------------------------------------------


def test_batch_commits_together(store: PostgresStore, conninfo: str) -> None:
    ledger = Ledger(store)
    with store.batch():
        for i in range(20):
            ledger.admit(A, f"k{i}", 1, i, T0)
        assert store.load("k3") is not None
        assert raw(conninfo, "SELECT count(*) FROM ledger_tasks") == [(0,)]
    assert raw(conninfo, "SELECT count(*) FROM ledger_tasks") == [(20,)]


def test_batch_rolls_back_and_nests(store: PostgresStore) -> None:
    ledger = Ledger(store)
    ledger.admit(A, "keep", 1, None, T0)
    with pytest.raises(RuntimeError), store.batch():
        ledger.admit(A, "gone", 1, None, T0)
        ledger.claim(A, "keep", "o", HOUR, T0)
        raise RuntimeError
    assert store.load("gone") is None
    with store.batch():
        ledger.admit(A, "outer", 1, None, T0)
        with pytest.raises(ValueError), store.batch():
            ledger.admit(A, "inner-failed", 1, None, T0)
            raise ValueError
        with store.batch(), store.batch():
            ledger.admit(A, "deep", 1, None, T0)
    assert [r.key for r in store.range()] == ["deep", "keep", "outer"]
    keep = store.load("keep")
    assert keep is not None and keep.status == "pending"


def test_a_failed_statement_in_a_batch_rolls_it_back(store: PostgresStore) -> None:
    ledger = Ledger(store)
    with pytest.raises(errors.StoreError), store.batch():
        ledger.admit(A, "first", 1, None, T0)
        ledger.admit(A, "bad\x00", 1, None, T0)
    assert store.load("first") is None
    assert ledger.admit(A, "first", 1, None, T0)


# -- clock, history -------------------------------------------------------------------------


def test_now_is_the_server_clock(store: PostgresStore) -> None:
    first = store.now()
    second = store.now()
    local = Instant.now()
    assert first < second  # clock_timestamp() moves within a transaction too
    assert abs((local - second).total_seconds()) < 60
    assert first.offset_seconds == 0
    with store.batch():
        a, b = store.now(), store.now()
    assert a < b


def test_history_round_trip_filter_and_pages(store: PostgresStore) -> None:
    entries = [
        HistoryEntry(
            f"2024-01-01T00:00:{i % 60:02d}Z",
            f"actor{i}",
            "ledger.claimed",
            f"k{i % 3}",
            UINT64_MAX if i == 7 else i,
            f"key k{i % 3} claimed by x",
        )
        for i in range(2100)
    ]
    store.append_history(entries[:5])
    with pytest.raises(RuntimeError), store.batch():
        store.append_history([entries[5]])
        raise RuntimeError
    store.append_history(entries[5:])
    assert list(store.read_history()) == entries
    assert list(store.read_history("k1")) == [e for e in entries if e.key == "k1"]
    assert list(store.read_history("nope")) == []


# -- injection ---------------------------------------------------------------------------


def test_hostile_text_round_trips_verbatim_through_every_operation(
    store: PostgresStore, conninfo: str
) -> None:
    ledger = Ledger(store)
    keys = list(HOSTILE_TEXTS)
    for i, text in enumerate(keys):
        needs = (keys[i - 1],) if i else ()
        assert ledger.admit(text, text, 1, {text: [text]}, T0, *needs)
        assert ledger.claim(text, text, text, HOUR, T0) == 1
        ledger.renew(text, text, text, 1, HOUR, T0 + HOUR)
        ledger.release(text, text, text, 1, T0 + HOUR)
        assert ledger.claim(text, text, text, HOUR, T0 + HOUR) == 2
        assert ledger.takeover(text, text, text, HOUR, T0 + 3 * HOUR) == 3
        ledger.complete(text, text, text, 3, "completed", T0 + 3 * HOUR)
        store.append_history([HistoryEntry(str(T0), text, "ledger.completed", text, 3, text)])
    for i, text in enumerate(keys):
        rec = ledger.state(text)
        assert rec is not None
        assert (rec.key, rec.owner, rec.created_by, rec.updated_by) == (text, text, text, text)
        assert rec.task == {text: [text]}
        assert rec.needs == ((keys[i - 1],) if i else None)
        assert [e.data for e in store.read_history(text)] == [text]
    assert sorted(r.key for r in store.range()) == sorted(keys)
    assert {r.key for r in store.by_status(["completed"])} == set(keys)
    bad, child = keys[0] + " failed", keys[1] + " child"
    ledger.admit(bad, bad, 1, None, T0)
    ledger.admit(child, child, 1, None, T0, bad)
    ledger.complete(bad, bad, bad, ledger.claim(bad, bad, bad, HOUR, T0), "failed", T0)
    assert ledger.blocked(child) == bad
    assert raw(conninfo, "SELECT count(*) FROM ledger_tasks") == [(len(keys) + 2,)]
    assert raw(conninfo, "SELECT count(*) FROM ledger_history") == [(len(keys),)]


# -- errors and lifecycle ---------------------------------------------------------------


def test_unreachable_server_is_a_one_line_store_error() -> None:
    pytest.importorskip("psycopg")  # no server needed
    started = time.monotonic()
    with pytest.raises(errors.StoreError, match="cannot connect to PostgreSQL") as info:
        PostgresStore("postgresql://ledger:secret@127.0.0.1:1/nowhere?connect_timeout=2")
    assert time.monotonic() - started < 10
    text = str(info.value)
    assert "\n" not in text and "secret" not in text and info.value.exit_code == 9


def test_bad_url_is_a_usage_error() -> None:
    """Nothing was opened: exit 2, as for any store URL that names no store."""
    pytest.importorskip("psycopg")
    with pytest.raises(errors.StoreURLError, match="URL") as info:
        PostgresStore("postgresql://host/db?nosuchoption=1")
    assert info.value.exit_code == 2


def test_wrong_password_is_a_store_error() -> None:
    url = require_postgres()
    import psycopg.conninfo

    params = psycopg.conninfo.conninfo_to_dict(url)
    params["password"] = "definitely-wrong"
    with pytest.raises(errors.StoreError, match="cannot connect") as info:
        PostgresStore(psycopg.conninfo.make_conninfo(**params))  # type: ignore[arg-type]
    assert "definitely-wrong" not in str(info.value) and "\n" not in str(info.value)


def test_missing_driver_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(errors.StoreError, match=r"pip install 'ledger_cli\[postgres\]'"):
        PostgresStore("postgresql://localhost/db")


def test_lost_connection_is_a_store_error(store: PostgresStore, conninfo: str) -> None:
    pid = store._conn.info.backend_pid
    raw(conninfo, "SELECT pg_terminate_backend(%s)", pid)
    with pytest.raises(errors.StoreError, match="connection"):
        store.load("k")


def test_closed_store_refuses(conninfo: str) -> None:
    store = PostgresStore(conninfo)
    store.close()
    store.close()
    with pytest.raises(errors.StoreError, match="closed"):
        store.load("k")


def test_reopen_keeps_everything(conninfo: str) -> None:
    with PostgresStore(conninfo) as store:
        ledger = Ledger(store)
        ledger.admit(A, "k", 1, {"x": 1}, T0, "dep")
        ledger.claim(A, "k", "o", HOUR, T0)
        before = list(store.range())
    with PostgresStore(conninfo) as store:
        assert list(store.range()) == before


# -- planner statistics ---------------------------------------------------------------


def test_a_large_admission_leaves_the_planner_statistics_current(tmp_path: Path) -> None:
    """After `admit --batch` of ANALYZE_AFTER tasks or more into a fresh schema
    the tables are analyzed (a fan-in's readiness check is planned from real
    sizes, not from an empty table's); a small one leaves it to autovacuum."""
    from ledger_cli.stores.sql.postgres_conn import ANALYZE_AFTER
    from tests.cli_support import run_ledger
    from tests.stores import KINDS

    def admit(url: str, lines: list[dict[str, object]]) -> None:
        batch = "".join(json.dumps(line) + "\n" for line in lines).encode()
        res = run_ledger(url, "admit", "--batch", "-", input=batch)
        assert res.returncode == 0, res.stderr

    def analyzed(url: str) -> set[str]:
        # pg_class's estimate, written by ANALYZE itself: -1 until a table is analyzed.
        rows = raw(
            url,
            "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
            " AND relkind = 'r' AND reltuples >= 0",
        )
        return {name for (name,) in rows}

    with KINDS["postgresql"].place(tmp_path) as url:
        admit(url, [{"key": f"s{i}"} for i in range(3)])
        assert analyzed(url) == set()
        keys = [f"k{i}" for i in range(ANALYZE_AFTER)]
        admit(url, [*({"key": k} for k in keys), {"key": "fan-in", "needs": keys}])
        assert {"ledger_tasks", "ledger_needs"} <= analyzed(url)
