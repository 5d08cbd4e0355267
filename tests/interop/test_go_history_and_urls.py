"""The log and the Go service; passwords in store URLs.

- The Go service writes no history: `doctor` notes (exit 0) the records whose
  latest write has no history line, so an operator knows where `ledger log`
  is incomplete. Rows are written with plain SQL as the Go store writes them.
- No password from a store URL is ever printed: `doctor`, its `--json`
  `"store"`, and error messages show `postgresql://user:***@…`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ledger_cli.stores import redact_url
from tests.cli_support import ledger_cmd, subprocess_env
from tests.go_support import go_connect, go_db, go_row


def ledger(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_cmd(), "--store", store, "--actor", "tester", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )


def notes(res: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in res.stdout.splitlines() if ln.startswith("note:")]


def test_doctor_notes_writes_without_a_history_line(tmp_path: Path) -> None:
    db = tmp_path / "go.db"
    conn = go_db(db)
    go_row(conn, key="go-a", status="pending")
    go_row(conn, key="go-b", status="pending")
    conn.close()
    store = f"sqlite:{db}"
    assert ledger(store, "admit", "ours").returncode == 0

    res = ledger(store, "doctor")
    assert res.returncode == 0, res.stdout  # a note, not a problem
    (note,) = notes(res)
    assert note.startswith("note: 2 record(s) whose latest write has no history line: go-a, go-b")
    assert "Go service" in note and "ledger log" in note

    # A write through ledger_cli covers go-a; then the Go service updates "ours".
    assert ledger(store, "claim", "go-a", "--owner", "w", "--lease", "1m").returncode == 0
    conn = go_connect(db)
    conn.execute(
        "UPDATE ledger_tasks SET status='claimed', owner='go', fence=fence+1, rev=rev+1,"
        " lease_until='2999-01-01T00:00:00Z', updated_at='2999-01-01T00:00:00Z',"
        " updated_by='go-service' WHERE key='ours'"
    )
    conn.close()
    (note,) = notes(ledger(store, "doctor"))
    assert note.startswith("note: 2 record(s) whose latest write has no history line: go-b, ours")
    doc = json.loads(ledger(store, "--json", "doctor").stdout)
    assert doc["problems"] == [] and len(doc["notes"]) == 1


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://root:s3cretpw@db:5432/app", "postgresql://root:***@db:5432/app"),
        ("postgres://root:p%40ss@h1:1,h2:2/app", "postgres://root:***@h1:1,h2:2/app"),
        (
            "postgresql://db/app?sslmode=require&password=s3cretpw&application_name=x",
            "postgresql://db/app?sslmode=require&password=***&application_name=x",
        ),
        ("postgresql://root@db/app", "postgresql://root@db/app"),
        ("postgresql:///app", "postgresql:///app"),
        ("sqlite:/var/lib/app.db", "sqlite:/var/lib/app.db"),
        ("/srv/ledger", "/srv/ledger"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_no_password_is_printed(tmp_path: Path) -> None:
    from tests.stores import KINDS

    with KINDS["postgresql"].place(tmp_path) as url:
        assert ":" in url.split("@")[0].removeprefix("postgresql://"), "needs a password"
        password = url.split("@")[0].rsplit(":", 1)[1]
        res = ledger(url, "doctor")
        assert res.returncode == 0, res.stdout
        assert f":{password}@" not in res.stdout + res.stderr
        assert res.stdout.startswith(f"store {redact_url(url)}: ")
        assert ":***@" in res.stdout
        doc = json.loads(ledger(url, "--json", "doctor").stdout)
        assert doc["store"] == redact_url(url) and f":{password}@" not in doc["store"]
    # An unknown scheme's error, a connection error: the password is not echoed.
    res = ledger("mysql://root:s3cretpw@db/app", "list")  # a usage error
    assert res.returncode == 2 and "s3cretpw" not in res.stderr and ":***@" in res.stderr
    res = ledger("postgresql://root:s3cretpw@127.0.0.1:1/app?connect_timeout=2", "list")
    assert res.returncode == 9 and "s3cretpw" not in res.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://root:s3cret%PW@127.0.0.1:1/app",  # libpq quotes the bad token
        "postgresql://root:s3cretpw@[::1/app",  # libpq quotes the whole URL
        "postgresql://root@127.0.0.1:1/app?password=s3cret%PW",
    ],
)
def test_a_malformed_url_is_a_usage_error_that_shows_no_password(url: str) -> None:
    """Fresh processes; nothing is opened, so no server is needed."""
    for args in (("list",), ("--json", "stats")):
        res = ledger(url, *args)
        assert res.returncode == 2, (args, res.stderr)
        assert "s3cret" not in res.stdout + res.stderr, args
        assert "bad PostgreSQL URL" in res.stdout + res.stderr
