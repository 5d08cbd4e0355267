"""A login the PostgreSQL server refuses is a verdict, not an outage
(docs/design.md §3.4, stores/sql/postgres_login.py): a wrong password, an
unknown role or an unknown database makes the long-lived commands that ride
outages out (`claim --next --wait`, `run --next --drain`, `--give-up-after`)
exit 9 at once with one line naming the server's reason, never the password,
instead of trying again for minutes.

The commands run as fresh processes against the test server; each test reads
the first line the command writes to stderr, which without the verdict is
the outage's warning (`… trying again for up to 600s`): no test waits for a
time. What stays an outage (57P03, 53300, a refused connection) is checked
on the server's words in process, and a refused connection end to end.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.cli_support import ledger_cmd, subprocess_env
from tests.outage_support import free_port
from tests.sql_support import require_postgres

_GIVE_UP = ["--give-up-after", "10m", "--owner", "w", "--lease", "30s"]
LONG_LIVED = {
    "claim --wait": ["claim", "--next", "--wait", "1m", *_GIVE_UP],
    "run --drain": ["run", "--next", "--drain", *_GIVE_UP, "--", "true"],
    "run --wait": ["run", "--next", "--wait", "1m", *_GIVE_UP, "--", "true"],
}
"""The commands that ride outages out, each for up to 10 minutes."""


def _url(**change: str) -> str:
    """The test server's URL with `change` (user, password, dbname) applied."""
    import psycopg.conninfo

    params: dict[str, Any] = psycopg.conninfo.conninfo_to_dict(require_postgres())
    params.update(change)
    host, port = params.get("host", "127.0.0.1"), params.get("port", 5432)
    auth = f"{params['user']}:{params['password']}" if params.get("password") else params["user"]
    return f"postgresql://{auth}@{host}:{port}/{params['dbname']}"


REFUSED = {
    "wrong password": ({"password": "WRONG-s3cret"}, 'password authentication failed for user "'),
    "unknown role": (
        {"user": "no_such_role_honest", "password": "WRONG-s3cret"},
        'for user "no_such_role_honest"',
    ),
    "unknown database": ({"dbname": "no_such_db_honest"}, 'database "no_such_db_honest" does not'),
}


def _first_line(store: str, *args: str) -> tuple[str, int | None, str]:
    """The first line `ledger --store STORE ARGS` writes to stderr, its exit
    code once that line is its last (None: still running, then killed), and
    the rest of stderr."""
    proc = subprocess.Popen(
        [*ledger_cmd(), "--store", store, *args],
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    if "trying again" in first:  # the outage's warning: it would wait minutes
        proc.kill()
        proc.communicate()
        return first, None, ""
    _, rest = proc.communicate(timeout=60)
    return first, proc.returncode, rest


@pytest.mark.parametrize("command", sorted(LONG_LIVED))
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_login_exits_9_at_once(case: str, command: str) -> None:
    change, reason = REFUSED[case]
    url = _url(**change)
    first, code, rest = _first_line(url, *LONG_LIVED[command])
    assert code == 9, f"not a verdict: {first!r}"
    assert first.startswith("ledger: cannot connect to PostgreSQL at ") and reason in first
    assert "WRONG-s3cret" not in first and rest == ""


def test_a_refused_login_has_its_own_json_code() -> None:
    url = _url(password="WRONG-s3cret")
    res = subprocess.run(
        [*ledger_cmd(), "--json", "--store", url, *LONG_LIVED["claim --wait"]],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    error = json.loads(res.stdout)["error"]
    assert (res.returncode, error["code"], error["exit"]) == (9, "store_login", 9)
    assert "WRONG-s3cret" not in res.stdout + res.stderr


def test_a_refused_connection_is_still_an_outage() -> None:
    """No server on the port: the command warns and tries again (killed here)."""
    url = f"postgresql://ledger:ledger@127.0.0.1:{free_port()}/ledger_test"
    first, code, _ = _first_line(url, *LONG_LIVED["claim --wait"])
    assert code is None and "trying again for up to 600s" in first


class _Failed(Exception):
    """A failed `psycopg.connect` as the classifier sees it: a message, and a
    `pgconn` whose `needs_password` libpq set."""

    def __init__(self, text: str, needs_password: bool = False) -> None:
        super().__init__(text)
        self.pgconn = type("PGconn", (), {"needs_password": needs_password})()


_AT = 'connection failed: connection to server at "10.0.0.5", port 5432 failed: '


@pytest.mark.parametrize(
    ("server_said", "verdict"),
    [
        ('FATAL:  password authentication failed for user "app"', True),  # 28P01
        ('FATAL:  Ident authentication failed for user "app"', True),  # 28000
        ('FATAL:  role "app" does not exist', True),  # 28000
        ('FATAL:  role "app" is not permitted to log in', True),  # 28000
        ('FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "app", database "d"', True),
        ('FATAL:  database "d" does not exist', True),  # 3D000
        ('FATAL:  permission denied for database "d" DETAIL:  User does not have', True),
        ("FATAL:  the database system is starting up", False),  # 57P03
        ("FATAL:  the database system is shutting down", False),  # 57P03
        ("FATAL:  the database system is in recovery mode", False),  # 57P03
        ("FATAL:  the database system is not yet accepting connections", False),  # 57P03
        ("FATAL:  sorry, too many clients already", False),  # 53300
        ('FATAL:  too many connections for role "app"', False),  # 53300
        ("FATAL:  remaining connection slots are reserved for roles with SUPERUSER", False),
        ("Connection refused Is the server running on that host and accepting", False),
        ("server closed the connection unexpectedly", False),
        ("timeout expired", False),
        ("FATAL:  la autentificación password falló para el usuario «app»", False),
    ],
)
def test_verdicts_and_outages_by_the_servers_words(server_said: str, verdict: bool) -> None:
    from ledger_cli.stores.sql.postgres_login import refusal

    text = _AT + server_said
    reason = refusal(_Failed(text), text)
    assert (reason is not None) == verdict
    if reason is not None:
        assert reason == server_said.removeprefix("FATAL:  ")


def test_no_password_to_send_is_a_verdict_in_any_language() -> None:
    from ledger_cli.stores.sql.postgres_login import refusal

    text = _AT + "fe_sendauth: aucun mot de passe fourni"
    assert refusal(_Failed(text, needs_password=True), text) == (
        "fe_sendauth: aucun mot de passe fourni"
    )
