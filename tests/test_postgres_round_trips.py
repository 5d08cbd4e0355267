"""Round trips to PostgreSQL per drained task, and the pipelined batch's
rollback (stores/_pgtx.py). Counts through a proxy (tests/pg_wire_support.py),
never times: the same on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.run import run
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.errors import StoreError
from ledger_cli.stores.postgres import PostgresStore
from tests.pg_wire_support import Counts, WireCounter
from tests.sql_support import fresh_schema

T0 = Instant.parse("2026-01-01T00:00:00Z")
ROUND_TRIPS_PER_TASK = 8
"""claim (clock; BEGIN + ready page FOR UPDATE SKIP LOCKED; the fenced UPDATE;
history INSERT + COMMIT) and complete (clock; BEGIN + load; UPDATE; history
INSERT + COMMIT). Was 12 before batches ran on a pipeline."""


@pytest.fixture
def conninfo() -> Iterator[str]:
    with fresh_schema("ledger_rt") as info:
        yield info


def _admit(conninfo: str, n: int, prefix: str = "k") -> None:
    store = PostgresStore(conninfo)
    try:
        led = Ledger(store)
        with store.batch():
            for i in range(n):
                led.admit("t", f"{prefix}{i:03d}", 1, {"i": i}, Instant.now())
    finally:
        store.close()


def _drain(conninfo: str) -> Counts:
    with WireCounter(conninfo) as wire:
        settings = Settings(store=wire.conninfo, actor="t")
        code = run(settings, None, "w", "1m", ["true"], next_=True, drain=True)
        assert code == 0
        return wire.snapshot()


def test_round_trips_per_claimed_and_completed_task(conninfo: str) -> None:
    """The difference of drains of 3 and 6 tasks: one task's claim and
    completion, without the connection's set-up and the last empty scan."""
    _admit(conninfo, 3)
    three = _drain(conninfo)
    _admit(conninfo, 6, "m")
    six = _drain(conninfo)
    per = six - three
    assert per.turns == 3 * ROUND_TRIPS_PER_TASK, (three, six)
    assert per.statements == 3 * 12, (three, six)  # the same statements as before


def _fail_history_of(conninfo: str, event: str) -> None:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
            " $$BEGIN RAISE EXCEPTION 'refused'; END$$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON ledger_history FOR EACH ROW"
            f" WHEN (NEW.event = '{event}') EXECUTE FUNCTION refuse()"
        )


def test_a_history_insert_failing_at_commit_writes_nothing(conninfo: str) -> None:
    """The history INSERT is answered only with COMMIT: its failure still
    rolls the claim back, and the store goes on working."""
    _admit(conninfo, 1)
    _fail_history_of(conninfo, "ledger.claimed")
    with Session(Settings(actor="t"), PostgresStore(conninfo)) as s:
        with pytest.raises(StoreError, match="refused"), s.write(T0):
            s.ledger.claim(s.actor, "k000", "w", timedelta(hours=1), T0)
        rec = s.load("k000")
        assert rec is not None and rec.status == "pending" and rec.fence == 0
        assert list(s.store.read_history("k000")) == []  # type: ignore[attr-defined]
        with s.write(T0):
            s.ledger.cancel(s.actor, "k000", T0)
        rec = s.load("k000")
        assert rec is not None and rec.status == "failed"


def test_a_nested_batch_after_a_failed_queued_statement_fails_the_batch(
    conninfo: str,
) -> None:
    """A statement whose answer nobody read failed; a nested batch then rolls
    back: the outer batch must fail, never commit without the failed part."""
    _admit(conninfo, 1)
    _fail_history_of(conninfo, "bad")
    store = PostgresStore(conninfo)
    try:
        from ledger_cli.stores.history import HistoryEntry

        with pytest.raises(StoreError), store.batch():
            Ledger(store).admit("t", "second", 1, None, T0)
            store.append_history([HistoryEntry(str(T0), "t", "bad", "k000", 0, "")])
            try:
                with store.batch():
                    raise ValueError
            except ValueError:
                pass
        assert store.load("second") is None
    finally:
        store.close()
