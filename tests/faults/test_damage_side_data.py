"""Damaged side data: the schedules, the pause, the attempts, the limits and
the revoked leases a store keeps beside its records, changed by hand into
values that do not decode (SQLite, the JSON store; on PostgreSQL the text columns, the only
ones its types let be damaged so), then the commands that read them, each as
a fresh `ledger` process (tests/cli_support.py).

Checked for every kind: each command that reads it exits 9 (never 70, an
internal error) with one stderr line naming the table or file, no traceback
and not the damaged value; `doctor` and `doctor --fix` report it (exit 9)
and `--fix` leaves it (it is the only copy); then the remedy the line names
(`ledger resume`, `ledger limit`, removing the row or file) gives a clean
`doctor` (docs/reliability.md, "Side data").
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger

NOW = "2026-03-04T05:06:07Z"
BAD = "zzz"
"""The damaged value: never echoed back."""
CLAIM = ("claim", "--next", "--owner", "m", "--lease", "60s")
SETUP = (
    ("admit", "later", "--delay", "1h"),
    ("admit", "j"),
    ("run", "j", "--owner", "w", "--lease", "60s", "--", "true"),
    ("limit", "db", "2"),
    ("admit", "q1", "--queue", "db"),
    ("admit", "r1", "--queue", "db"),
    ("claim", "r1", "--owner", "w", "--lease", "60s"),
    ("cancel", "r1"),  # its live lease keeps a slot of db: a revoked lease
)


def _digest(key: str) -> str:
    d = key_digest(key)
    assert d is not None
    return d


class Case(NamedTuple):
    damage: Callable[[Path], bytes]
    """Damage the store (a database file or a JSON store directory); the
    damaged value as the store holds it."""
    held: Callable[[Path], bytes]
    """The value as the store holds it now (`--fix` must leave it)."""
    reads: tuple[tuple[str, ...], ...]
    """Commands that read the damaged value."""
    named: str
    """What the error line names (a table or a file)."""
    remedy: Callable[[str], None]
    """What the line says to do (given the store's URL)."""


Reads = tuple[Callable[[Path], bytes], Callable[[Path], bytes]]
"""A Case's `damage` and `held`."""


def _ledger(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_ledger(store, "--now", NOW, "--actor", "t", *args)


def _command(*args: str) -> Callable[[str], None]:
    def remedy(store: str) -> None:
        res = _ledger(store, *args)
        assert res.returncode == 0, (args, res.stderr)

    return remedy


def _run_sql(db: Path, statement: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        with conn:
            cur = conn.execute(statement)
            rows = cur.fetchall()
            assert rows or cur.rowcount == 1, statement
            return rows
    finally:
        conn.close()


def _sql(table: str, values: str, column: str) -> Reads:
    """Set `values` in the one row of `table` (SQLite); read `column` back."""

    def held(db: Path) -> bytes:
        return repr(_run_sql(db, f"SELECT {column} FROM {table}")).encode()

    def change(db: Path) -> bytes:
        _run_sql(db, f"UPDATE {table} SET {values}")
        return held(db)

    return change, held


def _sql_remedy(statement: str) -> Callable[[str], None]:
    def remedy(store: str) -> None:
        _run_sql(Path(store.removeprefix("sqlite:")), statement)

    return remedy


def _file(rel: str, data: str) -> Reads:
    def change(root: Path) -> bytes:
        (root / rel).write_text(data)
        (root / rel).chmod(0o600)  # only its content is damaged, not its mode
        return data.encode()

    return change, lambda root: (root / rel).read_bytes()


def _flip(rel: str, old: bytes, new: bytes) -> Reads:
    """A change that keeps the file valid JSON of the right shape (a bit flip
    that lands in a digit or a letter): only its checksum tells."""

    def change(root: Path) -> bytes:
        data = (root / rel).read_bytes()
        assert old in data
        (root / rel).write_bytes(data.replace(old, new, 1))
        return (root / rel).read_bytes()

    return change, lambda root: (root / rel).read_bytes()


def _attempt_exit(rel: str) -> Reads:
    """Set the exit of an attempt file's header line to BAD."""

    def change(root: Path) -> bytes:
        head, _, output = (root / rel).read_bytes().partition(b"\n")
        obj = json.loads(head)
        obj["exit"] = BAD
        (root / rel).write_bytes(json.dumps(obj).encode() + b"\n" + output)
        return (root / rel).read_bytes()

    return change, lambda root: (root / rel).read_bytes()


def _remove(rel: str) -> Callable[[str], None]:
    return lambda store: (Path(store) / rel).unlink()


SCHEDULE = f"schedule/{_digest('later')}.json"
QUEUE = f"queue/{_digest('q1')}.json"
ATTEMPT = f"attempts/{_digest('j')[:2]}/{_digest('j')}/1.att"
PAUSED = '{"since": "zzz", "actor": "a", "reason": "r"}'

SQLITE: dict[str, Case] = {
    "schedule-not-before": Case(
        *_sql("ledger_schedule", f"not_before = '{BAD}' WHERE key = 'later'", "not_before"),
        (("stats",), ("list",), ("snapshot",)),
        "ledger_schedule row of key 'later'",
        _sql_remedy("DELETE FROM ledger_schedule WHERE key = 'later'"),
    ),
    "schedule-priority": Case(
        *_sql("ledger_schedule", f"priority = '{BAD}' WHERE key = 'later'", "priority"),
        (("stats",), ("list",)),
        "ledger_schedule row of key 'later'",
        _sql_remedy("DELETE FROM ledger_schedule WHERE key = 'later'"),
    ),
    "attempt-exit": Case(
        *_sql("ledger_attempts", f"exit = '{BAD}'", "exit"),
        (("state", "j"), ("output", "j")),
        "ledger_attempts row of key 'j', attempt 1",
        _sql_remedy("DELETE FROM ledger_attempts WHERE key = 'j'"),
    ),
    "pause-since": Case(
        *_sql("ledger_pause", f"paused = 1, since = '{BAD}'", "since"),
        (("stats",), CLAIM),
        "ledger_pause row",
        _command("resume"),
    ),
    "revoked-lease-until": Case(
        *_sql("ledger_revoked", f"lease_until = '{BAD}'", "lease_until"),
        (("limit",), CLAIM),
        "ledger_revoked row of key 'r1'",
        _sql_remedy("DELETE FROM ledger_revoked WHERE key = 'r1'"),
    ),
    "limit-n": Case(
        *_sql("ledger_limit", f"n = '{BAD}'", "n"),
        (("limit",), CLAIM),
        "ledger_limit row of queue 'db'",
        _command("limit", "db", "3"),
    ),
}

JSON: dict[str, Case] = {
    "paused-since": Case(
        *_file("paused.json", PAUSED), (("stats",), CLAIM), "paused.json", _command("resume")
    ),
    "paused-garbage": Case(
        *_file("paused.json", f"{BAD}\n"), (("stats",), CLAIM), "paused.json", _command("resume")
    ),
    **{
        f"limits-{name}": Case(
            *_file("limits.json", data), (("limit",), CLAIM), "limits.json", _remove("limits.json")
        )
        for name, data in (
            ("truncated", '{"db": 2'),
            ("zero", '{"db": 0}'),
            ("text", f'{{"db": "{BAD}"}}'),
            ("list", "[1, 2, 3]"),
        )
    },
    **{
        f"revoked-{name}": Case(
            *_file("revoked.json", data),
            (("limit",), CLAIM),
            "revoked.json",
            _remove("revoked.json"),
        )
        for name, data in (
            ("until", f'[["r1", 1, "db", "{BAD}"]]'),
            ("short", '[["r1", 1, "db"]]'),
            ("object", '{"r1": 1}'),
        )
    },
    "schedule-not-before": Case(
        *_file(SCHEDULE, f'{{"key": "later", "not_before": "{BAD}", "priority": 0}}'),
        (("stats",), ("list",)),
        SCHEDULE,
        _remove(SCHEDULE),
    ),
    "schedule-flipped": Case(
        *_flip(SCHEDULE, b'"priority": 0', b'"priority": 8'),
        (("stats",), ("list",), ("state", "later")),
        SCHEDULE,
        _remove(SCHEDULE),
    ),
    "attempt-exit": Case(
        *_attempt_exit(ATTEMPT), (("state", "j"), ("output", "j")), ATTEMPT, _remove(ATTEMPT)
    ),
    "attempt-flipped": Case(  # the run's outcome changed, the header still valid: its sum tells
        *_flip(ATTEMPT, b'"exit":0', b'"exit":4'),
        (("state", "j"), ("output", "j")),
        ATTEMPT,
        _remove(ATTEMPT),
    ),
    "attempt-sum-renamed": Case(  # a flip in the sum's own name: not taken for an older file
        *_flip(ATTEMPT, b',"sum":"', b',"sun":"'),
        (("state", "j"), ("output", "j")),
        ATTEMPT,
        _remove(ATTEMPT),
    ),
    "queue-flipped": Case(
        *_flip(QUEUE, b'"queue": "db"', b'"queue": "dc"'),
        (("stats",), ("list",)),
        QUEUE,
        _remove(QUEUE),
    ),
    "queue": Case(
        *_file(QUEUE, f'{{"key": "q1", "queue": ["{BAD}"]}}'),
        (("stats",), ("list",)),
        QUEUE,
        _remove(QUEUE),
    ),
}


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A healthy store of each kind with a schedule, a run's attempt, a
    limit and a task in a queue (SQLite: checkpointed into one file)."""
    top = tmp_path_factory.mktemp("side-data")
    made = {"sqlite": top / "t.db", "json": top / "t"}
    for kind, path in made.items():
        url = f"sqlite:{path}" if kind == "sqlite" else str(path)
        for args in SETUP:
            res = _ledger(url, *args)
            assert res.returncode == 0, (kind, args, res.stderr)
    conn = sqlite3.connect(made["sqlite"])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return made


def _copy(templates: dict[str, Path], kind: str, tmp_path: Path) -> tuple[Path, str]:
    if kind == "sqlite":
        db = tmp_path / "t.db"
        shutil.copyfile(templates["sqlite"], db)
        return db, f"sqlite:{db}"
    root = tmp_path / "t"
    shutil.copytree(templates["json"], root)
    return root, str(root)


def _refused(res: subprocess.CompletedProcess[str], named: str, where: str) -> None:
    assert res.returncode == 9, where
    assert "Traceback" not in res.stdout + res.stderr, where
    assert BAD not in res.stdout + res.stderr, where
    assert len(res.stderr.splitlines()) == 1, where
    assert named in res.stderr, where


def _reported(res: subprocess.CompletedProcess[str], named: str, where: str) -> None:
    assert res.returncode == 9, where
    assert res.stderr == "", where
    assert BAD not in res.stdout, where
    problems = [ln for ln in res.stdout.splitlines() if ln.startswith("problem: ")]
    assert len(problems) == 1 and named in problems[0], where


@pytest.mark.parametrize(
    ("kind", "name"),
    [("sqlite", name) for name in SQLITE] + [("json", name) for name in JSON],
)
def test_damaged_side_data(
    templates: dict[str, Path], tmp_path: Path, kind: str, name: str
) -> None:
    case = (SQLITE if kind == "sqlite" else JSON)[name]
    path, url = _copy(templates, kind, tmp_path)
    assert _ledger(url, "doctor").returncode == 0, f"{kind} {name}: healthy"
    damaged = case.damage(path)
    for args in case.reads:
        res = _ledger(url, *args)
        _refused(res, case.named, f"{kind} {name}: ledger {' '.join(args)}: {res.stderr!r}")
    for args in (("doctor",), ("doctor", "--fix")):
        res = _ledger(url, *args)
        _reported(res, case.named, f"{kind} {name}: ledger {' '.join(args)}: {res.stdout!r}")
    assert case.held(path) == damaged, f"{kind} {name}: --fix changed the damaged value"
    case.remedy(url)
    res = _ledger(url, "doctor")
    assert res.returncode == 0, f"{kind} {name}: doctor after the remedy: {res.stdout!r}"


POSTGRES: dict[str, tuple[str, tuple[tuple[str, ...], ...], str, tuple[str, ...] | str]] = {
    # PostgreSQL's typed columns hold no text in a number: only the times can be damaged.
    "schedule-not-before": (
        f"UPDATE ledger_schedule SET not_before = '{BAD}' WHERE key = 'later'",
        (("stats",), ("list",)),
        "ledger_schedule row of key 'later'",
        "DELETE FROM ledger_schedule WHERE key = 'later'",
    ),
    "pause-since": (
        f"UPDATE ledger_pause SET paused = 1, since = '{BAD}'",
        (("stats",), CLAIM),
        "ledger_pause row",
        ("resume",),
    ),
    "revoked-lease-until": (
        f"UPDATE ledger_revoked SET lease_until = '{BAD}'",
        (("limit",), CLAIM),
        "ledger_revoked row of key 'r1'",
        "DELETE FROM ledger_revoked WHERE key = 'r1'",
    ),
}


@pytest.mark.parametrize("name", list(POSTGRES))
def test_damaged_side_data_on_postgres(name: str) -> None:
    import psycopg

    from tests.sql_support import fresh_schema, postgres_url, require_postgres

    require_postgres()
    damage, reads, named, remedy = POSTGRES[name]
    with fresh_schema("ledger_side") as info:
        schema = info.split("search_path=")[1].split()[0].strip("'")
        url = f"{postgres_url()}?options=-csearch_path%3D{schema}"
        for args in SETUP:
            assert _ledger(url, *args).returncode == 0, args
        with psycopg.connect(info, autocommit=True) as conn:
            assert conn.execute(damage).rowcount == 1
        for args in reads:
            res = _ledger(url, *args)
            _refused(res, named, f"postgres {name}: ledger {' '.join(args)}: {res.stderr!r}")
        for args in (("doctor",), ("doctor", "--fix")):
            res = _ledger(url, *args)
            _reported(res, named, f"postgres {name}: ledger {' '.join(args)}: {res.stdout!r}")
        if isinstance(remedy, str):
            with psycopg.connect(info, autocommit=True) as conn:
                conn.execute(remedy)
        else:
            assert _ledger(url, *remedy).returncode == 0
        res = _ledger(url, "doctor")
        assert res.returncode == 0, f"postgres {name}: doctor after the remedy: {res.stdout!r}"


def test_an_attempt_written_before_the_sum_still_reads(
    templates: dict[str, Path], tmp_path: Path
) -> None:
    """An older store's attempt file (a header without its "sum") reads as
    before: `state` shows its run and `doctor` finds nothing (a guard for the
    sum above, which must not take every older header for damage)."""
    root, url = _copy(templates, "json", tmp_path)
    head, _, output = (root / ATTEMPT).read_bytes().partition(b"\n")
    obj = json.loads(head)
    del obj["sum"], obj["size"]  # neither was written then
    (root / ATTEMPT).write_bytes(json.dumps(obj, separators=(",", ":")).encode() + b"\n" + output)
    res = _ledger(url, "--json", "state", "j")
    assert res.returncode == 0 and json.loads(res.stdout)["attempts"][0]["exit"] == 0, res
    assert _ledger(url, "doctor").returncode == 0
