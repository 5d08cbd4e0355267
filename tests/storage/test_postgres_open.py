"""Opening a PostgreSQL store: one round trip checks the schema, an up-to-date
schema runs no DDL (nor waits for the set-up lock), and an older ready-index
trigger function is replaced in place, the index kept."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.stores.sql import postgres_schema
from ledger_cli.stores.sql.postgres import PostgresStore
from ledger_cli.stores.sql.postgres_schema import SETUP_LOCK
from tests.stores import KINDS

T0 = Instant.parse("2026-03-01T00:00:00Z")


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with KINDS["postgresql"].place(tmp_path) as location:
        yield location


def test_an_up_to_date_schema_is_opened_without_ddl(url: str) -> None:
    import psycopg

    PostgresStore(url).close()  # creates the schema
    # Another session holds the set-up lock: an opener that wanted to run DDL
    # would wait for it (and hit the statement timeout).
    bounded = url + quote(" -c statement_timeout=10000")
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
        store = PostgresStore(bounded)
        Ledger(store).admit("t", "a", 1, None, T0)
        store.close()
        holder.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))


def test_an_older_trigger_function_is_replaced_and_the_index_kept(url: str) -> None:
    import psycopg

    store = PostgresStore(url)
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    store.close()
    (ddl,) = [d for d in postgres_schema.READY_DDL if "OR REPLACE FUNCTION ledger_ready_sync" in d]
    older = ddl.replace(f"-- {postgres_schema.PG_SYNC_VERSION}", "-- an older version")
    with psycopg.connect(url, autocommit=True) as conn:  # as a v1 store was
        conn.execute(older)
        conn.execute(
            "ALTER TABLE ledger_ready RESET (autovacuum_vacuum_scale_factor,"
            " autovacuum_vacuum_threshold)"
        )
        assert conn.execute(
            "SELECT strpos(prosrc, %s) FROM pg_proc WHERE proname = 'ledger_ready_sync'"
            " AND pronamespace = current_schema()::regnamespace",
            (postgres_schema.PG_SYNC_VERSION,),
        ).fetchone() == (0,)
    store = PostgresStore(url)
    with psycopg.connect(url, autocommit=True) as conn:
        (found,) = conn.execute(
            "SELECT strpos(prosrc, %s) > 0 FROM pg_proc WHERE proname = 'ledger_ready_sync'"
            " AND pronamespace = current_schema()::regnamespace",
            (postgres_schema.PG_SYNC_VERSION,),
        ).fetchone() or (False,)
        assert found
        (options,) = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'ledger_ready'::regclass"
        ).fetchone() or (None,)
        assert "autovacuum_vacuum_threshold=1000" in (options or [])
    assert store.check_ready_index() == []
    ledger = Ledger(store)
    fence = ledger.claim("t", "a", "w", timedelta(minutes=1), T0)
    ledger.complete("t", "a", "w", fence, "completed", T0)
    with store.batch():
        assert [r.key for r in store.ready_candidates(T0)] == ["b"]  # promoted by the trigger
    assert store.check_ready_index() == []
    store.close()
