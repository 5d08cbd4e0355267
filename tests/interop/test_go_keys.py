"""Every key the store can hold is reachable from the command line.

docs/design.md §5.2: the key rule (1-1024 bytes of UTF-8, no C0/DEL/C1) applies only where
the command line *creates* a key (`admit`, `--needs`, batch lines). A key the
Go service admitted with a tab, an escape or 1,500 bytes is handed out by
`claim --next`, and every other command (the fast path's claim, renew,
release, takeover, complete, and state, blocked, tree, log, run) accepts it.
The rows are written with plain SQL on the Go schema.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, subprocess_env
from tests.go_support import go_db, go_row

GO_KEYS = {
    "tab": "tab\tkey",
    "escape": "esc\x1b[31mkey",
    "c1": "c1\x85key",
    "1500-bytes": "k" * 1500,
}


def ledger(store: str, *args: str, now: str | None = None) -> subprocess.CompletedProcess[str]:
    head = [*ledger_cmd(), "--store", store, "--actor", "tester"]
    if now is not None:
        head += ["--now", now]
    return subprocess.run(
        [*head, *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    return res.stdout


@pytest.mark.parametrize("name", sorted(GO_KEYS))
def test_a_go_admitted_key_is_reachable_by_every_command(tmp_path: Path, name: str) -> None:
    key = GO_KEYS[name]
    db = tmp_path / "go.db"
    conn = go_db(db)
    go_row(conn, key=key, status="pending")
    conn.close()
    store = f"sqlite:{db}"

    got = json.loads(
        ok(ledger(store, "--json", "claim", "--next", "--owner", "w", "--lease", "1m"))
    )
    assert (got["key"], got["fence"]) == (key, 1)
    assert json.loads(ok(ledger(store, "--json", "state", key)))["Status"] == "claimed"
    ok(ledger(store, "renew", key, "--owner", "w", "--fence", "1", "--lease", "1m"))
    ok(ledger(store, "release", key, "--owner", "w", "--fence", "1"))
    assert ok(ledger(store, "claim", key, "--owner", "w", "--lease", "1s")) == "2\n"
    later = "2999-01-01T00:00:00Z"  # the 1 s lease has run out: a takeover is allowed
    assert ok(ledger(store, "takeover", key, "--owner", "v", "--lease", "1m", now=later)) == "3\n"
    ok(ledger(store, "complete", key, "--owner", "v", "--fence", "3", now=later))
    assert ledger(store, "blocked", key).returncode == 1  # not blocked: exit 1, silent
    ok(ledger(store, "tree", key))
    log = ok(ledger(store, "log", key, "--jsonl"))
    # split on "\n" only: U+0085 in a key is a line break to str.splitlines()
    events = [json.loads(ln)["event"] for ln in log.split("\n") if ln]
    assert events == [
        "ledger.claimed",
        "ledger.renewed",
        "ledger.released",
        "ledger.claimed",
        "ledger.taken_over",
        "ledger.completed",
    ]
    # A key with no record: exit 3, whatever its characters.
    assert ledger(store, "state", key + "-missing").returncode == 3
    assert ledger(store, "complete", key + "x", "--owner", "v", "--fence", "3").returncode == 3
    # Creating such a key from the command line is still refused (exit 2).
    assert ledger(store, "admit", key).returncode == 2
    assert ledger(store, "admit", "fine", "--needs", key).returncode == 2
    batch = subprocess.run(
        [*ledger_cmd(), "--store", store, "admit", "--batch", "-"],
        input=json.dumps({"key": key}) + "\n",
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=False,
    )
    assert batch.returncode == 2 and batch.stderr.startswith("ledger: line 1: ")


def test_run_accepts_a_go_admitted_key(tmp_path: Path) -> None:
    db = tmp_path / "go.db"
    conn = go_db(db)
    go_row(conn, key="tab\tkey", status="pending")
    conn.close()
    store = f"sqlite:{db}"
    res = ledger(store, "run", "tab\tkey", "--owner", "w", "--lease", "1m", "--", "true")
    assert res.returncode == 0, res.stderr
    assert json.loads(ok(ledger(store, "--json", "state", "tab\tkey")))["Status"] == "completed"


def test_postgresql_go_style_key_is_reachable(tmp_path: Path) -> None:
    """The same on PostgreSQL: a row inserted with plain SQL, a tab in its key."""
    from tests.stores import KINDS

    with KINDS["postgresql"].place(tmp_path) as url:
        ok(ledger(url, "admit", "seed"))  # creates the table
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO ledger_tasks (key, status, sequence, created_at, updated_at)"
                " VALUES (%s, 'pending', 1, '2000-01-01T00:00:00Z', '2000-01-01T00:00:00Z')",
                ("tab\tkey",),
            )
        got = json.loads(
            ok(ledger(url, "--json", "claim", "--next", "--owner", "w", "--lease", "1m"))
        )
        assert got["key"] == "tab\tkey"
        ok(ledger(url, "complete", "tab\tkey", "--owner", "w", "--fence", "1"))
        assert json.loads(ok(ledger(url, "--json", "state", "tab\tkey")))["Status"] == "completed"
