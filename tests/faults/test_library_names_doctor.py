"""A library call with a name that is not a str or not valid Unicode leaves
every durable store as it was, and `ledger doctor` (a fresh process) finds
nothing: each call below used to write something on one store or another (an
owner of bytes SQLite kept and `doctor` called damage, a BLOB key no command
reaches and a second `admit` duplicated, an actor 123 stored as "123", an
owner b"w" stored by PostgreSQL as "\\x77"), or failed as a StoreError (exit
9) blaming a healthy store. Now each is a ValidationError (exit 8) before
anything is written (docs/design.md §2.11, departure 6). An SQLite row whose
key is a BLOB (an older release let one in) is a problem `doctor` names."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli import Ledger, Snapshot, TaskState, open_store
from ledger_cli.engine.instant import Instant
from ledger_cli.errors import ValidationError
from tests.cli_support import run_ledger

T = Instant.parse("2026-01-02T03:04:05Z")
LEASE = timedelta(minutes=5)

CALLS: dict[str, tuple[Callable[[Ledger], Any], str]] = {
    "claim-owner-and-actor-not-utf8": (
        lambda led: led.claim(
            os.fsdecode(b"actor-\xfe"), "k", os.fsdecode(b"worker-\xff"), LEASE, T
        ),
        'ledger: actor "actor-\\ufffd" is not valid Unicode',
    ),
    "claim-owner-not-utf8": (
        lambda led: led.claim("me", "k", os.fsdecode(b"worker-\xff"), LEASE, T),
        'ledger: owner "worker-\\ufffd" is not valid Unicode',
    ),
    "admit-actor-lone-surrogate": (
        lambda led: led.admit("a\ud800", "k2", 1, None, T),
        'ledger: actor "a\\ufffd" is not valid Unicode',
    ),
    "admit-bytes-key": (
        lambda led: led.admit("me", b"job", 1, None, T),
        "ledger: key must be a str, not bytes",
    ),
    "admit-int-actor": (
        lambda led: led.admit(123, "k2", 1, None, T),
        "ledger: actor must be a str, not int",
    ),
    "admit-empty-need": (
        lambda led: led.admit("me", "x", 1, None, T, ""),
        "ledger: need must not be empty",
    ),
    "claim-bytes-owner": (
        lambda led: led.claim("me", "k", b"w", LEASE, T),
        "ledger: owner must be a str, not bytes",
    ),
    "claim-int-owner": (
        lambda led: led.claim("me", "k", 7, LEASE, T),
        "ledger: owner must be a str, not int",
    ),
    "cancel-unnameable-key": (
        lambda led: led.cancel("me", "a\ud800", T),
        'ledger: key "a\\ufffd" is not valid Unicode',
    ),
    "restore-owner-not-utf8": (
        lambda led: led.restore(
            Snapshot(
                (
                    TaskState(
                        key="r",
                        status="claimed",
                        owner=os.fsdecode(b"worker-\xff"),
                        fence=1,
                        lease_until=T,
                        created_at=T,
                        updated_at=T,
                    ),
                )
            )
        ),
        'ledger: snapshot entry 0: ledger: owner "worker-\\ufffd" is not valid Unicode',
    ),
    "state-unnameable-key": (
        lambda led: led.state("a\ud800"),
        'ledger: key "a\\ufffd" is not valid Unicode',
    ),
}
"""Each call, and its one message on every store."""


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_refused_name_leaves_the_store_as_doctor_finds_it_whole(url: str, name: str) -> None:
    with open_store(url) as store:
        assert Ledger(store).admit("me", "k", 1, {"n": 1}, T)
    before = run_ledger(url, "snapshot")
    assert before.returncode == 0, before.stderr
    with open_store(url) as store:
        call, message = CALLS[name]
        with pytest.raises(ValidationError) as caught:
            call(Ledger(store))
        assert caught.value.exit_code == 8  # bad input, not a store failure (9)
        assert str(caught.value) == message  # the same on every store
    after = run_ledger(url, "snapshot")
    assert (after.returncode, after.stdout) == (0, before.stdout)
    doctor = run_ledger(url, "doctor")
    assert doctor.returncode == 0, (doctor.stdout, doctor.stderr)
    assert "problem" not in doctor.stdout
    assert run_ledger(url, "state", "k").returncode == 0


def test_doctor_names_an_sqlite_key_stored_as_a_blob(tmp_path: Path) -> None:
    """The row an older release wrote for `Ledger.admit(…, b"job", …)`: no
    command reaches it (`state job` is exit 3), so `doctor` says so (exit 9),
    with the repair; once repaired, `state job` finds it and `doctor` is quiet."""
    db = tmp_path / "b.db"
    assert run_ledger(f"sqlite:{db}", "admit", "job").returncode == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE ledger_tasks SET key = CAST(key AS BLOB)")
    assert run_ledger(f"sqlite:{db}", "state", "job").returncode == 3
    doctor = run_ledger(f"sqlite:{db}", "doctor")
    assert doctor.returncode == 9, (doctor.stdout, doctor.stderr)
    line = next(x for x in doctor.stdout.splitlines() if "stored as a BLOB" in x)
    assert "x'6a6f62' ('job')" in line
    assert "CAST(key AS TEXT)" in line
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE ledger_tasks SET key = CAST(key AS TEXT) WHERE key = x'6a6f62'")
    assert run_ledger(f"sqlite:{db}", "state", "job").returncode == 0
    again = run_ledger(f"sqlite:{db}", "doctor")
    assert again.returncode == 0, again.stdout
