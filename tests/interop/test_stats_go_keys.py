"""`stats` counts ready by the rule `claim --next` applies.

A key the Go service wrote into SQLite with bytes that are not valid UTF-8 is
never handed out by `claim --next` (no output could name it back), so
`stats` must not count it as ready nor take the oldest-ready age from it: an
alert on `ledger_oldest_ready_age_seconds` would climb forever. It is shown
apart (`ready_invalid_keys` in `--json`, a note in the human view), and
`doctor` reports the row as a problem, as before. Both of `stats`' paths are
covered: the ready count in SQL (a pending task naming no needs) and the
candidates judged by the Ready rule (one naming a completed need).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.go_support import go_db, go_row
from tests.interop.test_go_keys import ledger, ok

BAD_FREE = b"old-\xff"  # pending, no needs: counted in SQL
BAD_NEEDS = b"old-\xfe-waits"  # pending, its need completed: judged by the rule
NOW = "2024-01-01T01:00:00Z"


def test_stats_leaves_out_what_claim_next_never_hands_out(tmp_path: Path) -> None:
    db = tmp_path / "go.db"
    conn = go_db(db)
    go_row(conn, key=BAD_FREE, status="pending", created_at="2024-01-01T00:00:00Z")
    go_row(conn, key="done", status="completed", created_at="2024-01-01T00:00:00Z")
    go_row(conn, key=BAD_NEEDS, status="pending", needs='["done"]',
           created_at="2024-01-01T00:00:01Z")  # fmt: skip
    go_row(conn, key="young", status="pending", created_at="2024-01-01T00:59:00Z")
    conn.close()
    store = f"sqlite:{db}"

    body = json.loads(ok(ledger(store, "stats", "--json", now=NOW)))
    assert body["counts"]["pending"] == 3  # the counts by status are every row's
    assert body["ready"] == 1  # young only: what claim --next would hand out
    assert body["oldest_ready_age_seconds"] == 60.0  # young's age, not the bad keys'
    assert body["ready_invalid_keys"] == 2
    human = ok(ledger(store, "stats", now=NOW))
    assert "note: 2 more task(s) ready but keyed with bytes that are not valid UTF-8" in human
    prom = ok(ledger(store, "stats", "--prometheus", now=NOW))
    assert "ledger_ready_tasks 1.0" in prom
    assert "ledger_oldest_ready_age_seconds 60.0" in prom

    doctor = ledger(store, "doctor")
    assert doctor.returncode == 9
    assert doctor.stdout.count("not valid UTF-8") == 2

    got = json.loads(
        ok(ledger(store, "--json", "claim", "--next", "--owner", "w", "--lease", "1m", now=NOW))
    )
    assert got["key"] == "young"
    nothing = ledger(store, "claim", "--next", "--owner", "w", "--lease", "1m", now=NOW)
    assert nothing.returncode == 7  # nothing else is ready for claim --next
    after = json.loads(ok(ledger(store, "stats", "--json", now=NOW)))
    assert (after["ready"], after["oldest_ready_age_seconds"]) == (0, None)
    assert after["ready_invalid_keys"] == 2
