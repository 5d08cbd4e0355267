"""Rows an SQL store's reads refuse, as the JSON store refuses the same
damage (docs/reliability.md): a `ledger_tasks` row that does not validate
(an unknown status, a claimed row without owner, a blocked row naming no
BlockedBy, a NUL in the status) makes every read path (`state`, `list`,
`graph`, `snapshot`) and `doctor` exit 9 naming the row, its text escaped,
never printed raw; a `ledger_history` row that does not decode (a time that
is not RFC 3339, a negative fence) makes `log` and `doctor` exit 9
naming the row. Each command is a fresh `ledger` process, on SQLite and
PostgreSQL (which skips when unreachable, and cannot hold a NUL)."""

from __future__ import annotations

import pytest

from tests.cli_support import ledger_ok, run_ledger
from tests.stores import execute_sql as _execute
from tests.stores import sql_url

url = sql_url  # the fixture, under the name its tests take

KEY = "p3"


DAMAGE = {
    "unknown status": "status = 'done'",
    "claimed without owner": "status = 'claimed', owner = '', lease_until = '2099-01-01T00:00:00Z'",
    "blocked without blocked_by": "status = 'blocked', blocked_by = ''",
    "NUL in the status": "status = 'pend' || char(0) || 'ing'",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_row_that_does_not_validate_stops_every_read(url: str, damage: str) -> None:
    if "char(0)" in DAMAGE[damage] and not url.startswith("sqlite:"):
        pytest.skip("PostgreSQL text cannot hold a NUL")
    ledger_ok(url, "admit", KEY)
    ledger_ok(url, "admit", "fine")
    _execute(url, f"UPDATE ledger_tasks SET {DAMAGE[damage]} WHERE key = '{KEY}'")
    for args in (("state", KEY), ("list",), ("graph",), ("snapshot",), ("doctor",)):
        res = run_ledger(url, *args)
        assert res.returncode == 9, (args, res.stdout, res.stderr)
        assert f"stored record '{KEY}' does not validate" in res.stderr + res.stdout, (args, res)
        assert "\x00" not in res.stdout + res.stderr, args


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("time", "'nope'", "time is not an RFC 3339 time"),
        ("fence", "-1", "fence is not a whole number from 0"),
    ],
)
def test_a_history_row_that_does_not_decode_stops_log_and_doctor(
    url: str, column: str, value: str, why: str
) -> None:
    if column == "fence" and not url.startswith("sqlite:"):
        pytest.skip("PostgreSQL's fence column checks its range")
    ledger_ok(url, "admit", KEY)
    _execute(url, f"UPDATE ledger_history SET {column} = {value} WHERE key = '{KEY}'")
    for args in (("log",), ("log", KEY), ("doctor",)):
        res = run_ledger(url, *args)
        assert res.returncode == 9, (args, res.stdout, res.stderr)
        assert f": corrupt history entry ({why})" in res.stderr + res.stdout, (args, res)
