"""Times of any UTC offset RFC 3339 allows (up to ±23:59) at their instant on
every store: the SQL stores' ready index, Ready order and lease comparisons
hold the UTC instant, not the text (docs/design.md §6.1, §8.2). SQLite's
strftime reads a suffix only up to ±14:59 and PostgreSQL's timestamptz up to
±15:59; the JSON store compares instants. Each case runs the installed
`ledger` as a fresh process; and a database whose index an older release
built (the wrong instants) is rebuilt when it is opened."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

import pytest

from tests.cli_support import ledger_ok as _ok
from tests.cli_support import run_ledger

if TYPE_CHECKING:
    from pathlib import Path

OFFSETS = ("+14:59", "-14:59", "+15:00", "-15:00", "+20:00", "-20:00", "+23:59", "-23:59")


def _admit_due(url: str, offset: str = "+20:00") -> None:
    """`job`, due 2026-12-01T00:00:00 at `offset` (+20:00: 2026-11-30T04:00Z)."""
    not_before = f"2026-12-01T00:00:00{offset}"
    _ok(url, "--now", "2026-11-01T00:00:00Z", "admit", "job", "--not-before", not_before)


def _stats(url: str, now: str) -> dict[str, int]:
    body = json.loads(_ok(url, "--now", now, "--json", "stats"))
    return {k: body[k] for k in ("ready", "scheduled", "expired_leases")}


def _shift(offset: str) -> int:
    """The offset in minutes."""
    sign = -1 if offset[0] == "-" else 1
    return sign * (int(offset[1:3]) * 60 + int(offset[4:6]))


@pytest.mark.parametrize("offset", OFFSETS)
def test_not_before_of_any_offset_is_its_instant(url: str, offset: str) -> None:
    # 2026-12-01T00:00:00±hh:mm is 2026-12-01T00:00Z ∓ hh:mm; claims an hour
    # before that instant find nothing, an hour after find the task.
    due_min = -_shift(offset)  # minutes from 2026-12-01T00:00Z
    _admit_due(url, offset)
    early, late = _instant(due_min - 60), _instant(due_min + 60)
    assert _stats(url, early)["ready"] == 0
    assert _stats(url, early)["scheduled"] == 1
    r = run_ledger(url, "--now", early, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert r.returncode == 7, r.stderr
    assert _stats(url, late) == {"ready": 1, "scheduled": 0, "expired_leases": 0}
    assert (
        _ok(url, "--now", late, "claim", "--next", "--owner", "w", "--lease", "1m").split()[0]
        == "job"
    )


@pytest.mark.parametrize("offset", OFFSETS)
def test_lease_of_any_offset_ends_at_its_instant(url: str, offset: str) -> None:
    _ok(url, "--now", "2026-11-01T00:00:00Z", "admit", "j")
    _ok(
        url, "--now", f"2026-12-01T00:00:00{offset}", "claim", "j", "--owner", "w1", "--lease", "1h"
    )
    ends = -_shift(offset) + 60  # the lease's end, minutes from 2026-12-01T00:00Z
    early, late = _instant(ends - 30), _instant(ends + 30)
    assert _stats(url, early)["expired_leases"] == 0
    r = run_ledger(url, "--now", early, "claim", "--next", "--owner", "w2", "--lease", "1h")
    assert r.returncode == 7, r.stderr
    assert _stats(url, late) == {"ready": 1, "scheduled": 0, "expired_leases": 1}
    assert (
        _ok(url, "--now", late, "claim", "--next", "--owner", "w2", "--lease", "1h").split()[0]
        == "j"
    )


def _instant(minutes: int) -> str:
    """2026-12-01T00:00Z plus `minutes`, as RFC 3339 UTC text."""
    from datetime import UTC, datetime, timedelta

    at = datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_older_sqlite_index_is_rebuilt_on_open(tmp_path: Path) -> None:
    from ledger_cli.stores.sql.sqlite_schema import SORTKEY_VERSION, TRIGGERS

    db = tmp_path / "old.db"
    url = f"sqlite:{db}"
    _admit_due(url)
    # What an older release left: triggers without the version, the due time as text.
    conn = sqlite3.connect(db)
    with conn:
        for name in TRIGGERS:
            (sql,) = conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (name,)
            ).fetchone()
            conn.execute(f"DROP TRIGGER {name}")
            conn.execute(sql.replace(f" /* {SORTKEY_VERSION} */", ""))
        conn.execute("UPDATE ledger_due SET due = '2026-12-01T00:00:00+20:00'")
    conn.close()
    assert _stats(url, "2026-11-30T12:00:00Z") == {"ready": 1, "scheduled": 0, "expired_leases": 0}
    conn = sqlite3.connect(db)
    (due,) = conn.execute("SELECT due FROM ledger_due").fetchone()
    conn.close()
    assert due == "2026-11-30T04:00:00.000000000"


def test_an_older_postgres_index_is_rebuilt_on_open(tmp_path: Path) -> None:
    import psycopg

    from ledger_cli.stores.sql.postgres_schema import SORTKEY_VERSION
    from tests.stores import KINDS

    with KINDS["postgresql"].place(tmp_path) as url:
        _admit_due(url)
        # What an older release left: ledger_sortkey v1, the due time as text.
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT prosrc FROM pg_proc WHERE proname = 'ledger_sortkey'"
                " AND pronamespace = to_regnamespace(current_schema())"
            ).fetchone()
            assert row is not None
            body = str(row[0]).replace(SORTKEY_VERSION, "v1")
            conn.execute(
                "CREATE OR REPLACE FUNCTION ledger_sortkey(x text) RETURNS text"
                f" LANGUAGE plpgsql IMMUTABLE AS $${body}$$"
            )
            conn.execute("UPDATE ledger_due SET due = '2026-12-01T00:00:00+20:00'")
        assert _stats(url, "2026-11-30T12:00:00Z") == {
            "ready": 1,
            "scheduled": 0,
            "expired_leases": 0,
        }
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT due FROM ledger_due").fetchone()
        assert row is not None and row[0] == "2026-11-30T04:00:00.000000000"
