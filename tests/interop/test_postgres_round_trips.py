"""Round trips to PostgreSQL per drained task, and the pipelined batch's
rollback (stores/sql/postgres_tx.py). Counts through a proxy (tests/pg_wire_support.py),
never times: the same on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from ledger_cli.cli.commands.run import run
from ledger_cli.cli.context import Session, Settings
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.errors import StoreError
from ledger_cli.stores.sql.postgres import PostgresStore
from tests.pg_wire_support import Counts, WireCounter
from tests.sql_support import fresh_schema

T0 = Instant.parse("2026-01-01T00:00:00Z")
ROUND_TRIPS_PER_TASK = 9
"""claim (BEGIN + ready page FOR UPDATE SKIP LOCKED, whose lease cut-off is the
server's clock it returns: the unit's now; the fenced UPDATE; history INSERT +
COMMIT) and complete (BEGIN + the load with the clock; UPDATE; history INSERT +
COMMIT).
Was 12 before batches ran on a pipeline, 8 while each unit read the clock in a
round trip of its own before its batch, 6 before the pause (docs/design.md §8.3) and the
Ready order by priority (§8.2): the claim's first statement now reads the pause
row FOR SHARE, the clock and the first priority level in one round trip, then
its page of the due index. The attempt of docs/design.md §7.1 added 3 while its
start was a transaction of its own (the key's advisory lock, the next n, the
insert, the 16-bound delete); now the start rides in the claim's batch (2
more; the delete only past 16 attempts) and its end in the completion's."""
STATEMENTS_PER_TASK = 18
"""claim 6 (the pause, the clock and the first priority level in one, then the
page), complete 5 (the clock is part of its load), less the COMMIT that the
drain saves by claiming the next task in the completion's transaction (the
round trips stay 10); was 22 before that, 12, then 11 while the
completion's clock was a statement of its own, then 10 before docs/design.md §8, 11
before the attempts of docs/design.md §7.1 (their start and end added 11; with
the start in the claim's batch they add 8)."""


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


def _url(conninfo: str) -> str:
    """A `postgresql://` URL (what `--store` takes) for a libpq conninfo."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    return "postgresql://?" + urlencode(conninfo_to_dict(conninfo), quote_via=quote)


def _drain(conninfo: str) -> Counts:
    with WireCounter(conninfo) as wire:
        settings = Settings(store=wire.conninfo, actor="t")
        code = run(settings, None, "w", "1m", ["true"], next_=True, drain=True)
        assert code == 0
        return wire.snapshot()


def test_round_trips_per_claimed_and_completed_task(conninfo: str) -> None:
    """The difference of drains of 3 and 6 tasks: one task's claim and
    completion, without the connection's set-up and the last empty scan. A
    first drain of one task creates the side tables (ledger_attempts), so
    neither counted drain pays for that."""
    _admit(conninfo, 1, "w")
    _drain(conninfo)
    _admit(conninfo, 3)
    three = _drain(conninfo)
    _admit(conninfo, 6, "m")
    six = _drain(conninfo)
    per = six - three
    assert per.turns == 3 * ROUND_TRIPS_PER_TASK, (three, six)
    assert per.statements == 3 * STATEMENTS_PER_TASK, (three, six)


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
        from ledger_cli.engine.history import HistoryEntry

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


# -- the clock inside a batch (PostgresStore.now_with, ready_at_clock) -----------


def test_now_with_reads_the_clock_and_the_row_in_one_round_trip(conninfo: str) -> None:
    """The clock and a plain load of the key (after BEGIN): one round trip; the
    next load of the key takes that row and costs none, the one after reads
    again (the row is not locked: it is handed over once)."""
    _admit(conninfo, 1)
    with WireCounter(conninfo) as wire, PostgresStore(wire.conninfo) as store:
        expected = store.load("k000")
        with store.batch():
            before = wire.snapshot()
            now = store.now_with("k000")
            clocked = wire.snapshot()
            rec = store.load("k000")
            loaded = wire.snapshot()
            assert store.load("k000") == expected
            again = wire.snapshot()
            assert store.now_with("absent") > now
            assert store.load("absent") is None
            absent = wire.snapshot()
        assert (clocked - before).turns == 1
        assert (loaded - clocked).turns == 0
        assert (again - loaded).turns == 1
        assert (absent - again).turns == 1
        assert rec == expected
        assert now.offset_seconds == 0
        assert abs((Instant.now() - now).total_seconds()) < 60
        assert store.now_with("k000") > now  # outside a batch: the clock alone
        assert store.load("k000") == expected


def test_now_with_hands_over_nothing_past_a_write_or_a_rollback(conninfo: str) -> None:
    _admit(conninfo, 2)
    with PostgresStore(conninfo) as store:
        led = Ledger(store)
        with store.batch():
            now = store.now_with("k000")
            led.claim("t", "k001", "w", timedelta(hours=1), now)  # another key: kept
            fence = led.claim("t", "k000", "w", timedelta(hours=1), now)
            rec = store.load("k000")
            assert rec is not None and rec.status == "claimed" and rec.fence == fence
        with store.batch():
            store.now_with("k000")
            with pytest.raises(ValueError), store.batch():
                raise ValueError
            rec = store.load("k000")  # read again: the hand-over was dropped
            assert rec is not None and rec.status == "claimed"


def test_ready_at_clock_reads_the_clock_with_the_first_candidate(conninfo: str) -> None:
    """BEGIN + the page query, whose lease cut-off is the server clock it
    returns: one round trip; a lease running past that clock is skipped, one
    that ran out is not; an empty page: None."""
    _admit(conninfo, 3)
    with PostgresStore(conninfo) as store:
        led = Ledger(store)
        t = store.now()
        led.claim("t", "k000", "w", timedelta(hours=1), t)  # held: skipped
        led.claim("t", "k001", "w", timedelta(microseconds=1), t - timedelta(hours=1))  # ran out
    with WireCounter(conninfo) as wire, PostgresStore(wire.conninfo) as store:
        with store.batch():
            before = wire.snapshot()
            # A --next claim's pause check reads the clock and the first priority
            # level with it (one round trip); the page is the second.
            assert store.read_pause(for_claim=True) is None
            got = store.ready_at_clock()
            assert (wire.snapshot() - before).turns == 2
            assert got is not None
            now, cands = got
            assert now > t and now.offset_seconds == 0
            first = next(iter(cands))
            assert first.key == "k001"
            assert store.load("k001") == first  # locked FOR UPDATE: held
            assert [r.key for r in cands] == ["k002"]  # the next pages judge by `now`
        led = Ledger(store)
        with store.batch():
            for key in ("k001", "k002"):
                led.cancel("t", key, store.now())
        with store.batch():
            assert store.ready_at_clock() is None
        got = store.ready_at_clock()  # outside a batch: now(), then the candidates
        assert got is not None and list(got[1]) == []


def test_a_drain_given_now_writes_that_now_not_the_server_clock(conninfo: str) -> None:
    _admit(conninfo, 2)
    given = "2030-01-02T03:04:05.123456789Z"
    code = run(
        Settings(store=_url(conninfo), actor="t", now=given),
        None,
        "w",
        "1m",
        ["true"],
        True,
        None,
        drain=True,
    )
    assert code == 0
    with PostgresStore(conninfo) as store:
        for key in ("k000", "k001"):
            rec = store.load(key)
            assert rec is not None and rec.status == "completed"
            assert str(rec.updated_at) == given
            assert {e.time for e in store.read_history(key)} == {given}


def test_a_drain_judges_leases_by_the_server_clock(conninfo: str) -> None:
    """A lease that ran out by the server's clock is taken; one that has not
    is left alone; the claim's lease runs from the clock the page returned."""
    _admit(conninfo, 2)
    with PostgresStore(conninfo) as store:
        led = Ledger(store)
        t = store.now()
        led.claim("t", "k000", "other", timedelta(seconds=1), t - timedelta(hours=1))
        led.claim("t", "k001", "other", timedelta(hours=1), t)
    settings = Settings(store=_url(conninfo), actor="t")
    # --until-idle: a plain --drain would wait out the other worker's live lease.
    code = run(settings, None, "w", "1m", ["true"], next_=True, drain=True, until_idle=True)
    assert code == 0
    with PostgresStore(conninfo) as store:
        done, held = store.load("k000"), store.load("k001")
        assert done is not None and done.status == "completed" and done.owner == "w"
        assert held is not None and held.status == "claimed" and held.owner == "other"
        claimed = [e for e in store.read_history("k000") if e.event == "ledger.claimed"]
        assert len(claimed) == 1
        at = Instant.parse(claimed[0].time)
        assert t < at < store.now()


def test_the_complete_command_reads_the_clock_with_its_load(conninfo: str) -> None:
    """`ledger complete`: BEGIN + clock + load; UPDATE; history + COMMIT."""
    from ledger_cli.cli.commands.complete import complete

    _admit(conninfo, 2)
    with PostgresStore(conninfo) as store:
        fences = [
            Ledger(store).claim("t", k, "w", timedelta(hours=1), store.now())
            for k in ("k000", "k001")
        ]
    with WireCounter(conninfo) as wire:
        settings = Settings(store=wire.conninfo, actor="t")
        assert complete(settings, "k000", "w", str(fences[0])) == 0
        one = wire.snapshot()
        assert complete(settings, "k001", "w", str(fences[1]), failed=True) == 0
        two = wire.snapshot()
    with WireCounter(conninfo) as wire, PostgresStore(wire.conninfo):
        opened = wire.snapshot()
    assert (one - opened).turns == 3
    assert (two - one - opened).turns == 3 + 1  # a failure: + the dependents scan
    with PostgresStore(conninfo) as store:
        done, failed = store.load("k000"), store.load("k001")
        assert done is not None and done.status == "completed"
        assert failed is not None and failed.status == "failed"
        assert [e.time for e in store.read_history("k000")][-1] == str(done.updated_at)
