"""One bad row is one bad row (docs/design.md §5.5): `list`, in every form,
prints every record that decodes and then exits 9 with one line naming the
bad one and the remedy; `snapshot` writes nothing. On the JSON store (a
flipped byte), SQLite and PostgreSQL (a needs column that is not JSON), each
command a fresh `ledger` process. On SQLite the bad row is the last of the
first page of a keyset listing (stores/sql/paging.py): the pages after it
are listed all the same."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import run_ledger

KEYS = [f"k{i:03}" for i in range(230)]
BAD = KEYS[99]  # the first SQL page holds 100 rows: the bad one ends it
GOOD = [k for k in KEYS if k != BAD]
FORMS = [
    ("list",),
    ("list", "--json"),
    ("list", "--jsonl"),
    ("list", "--status", "pending"),
    ("list", "--status", "pending", "--jsonl"),
    ("--json", "list", "--status", "pending"),
]


def _record_file(store: Path, key: str) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()
    return store / "records" / digest[:2] / f"{digest}.json"


def _flip(path: Path, at: int = 12) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _admit_all(store: str, tmp_path: Path) -> None:
    batch = tmp_path / "keys.jsonl"
    batch.write_text("".join(json.dumps({"key": k}) + "\n" for k in KEYS))
    res = run_ledger(store, "admit", "--batch", str(batch))
    assert res.returncode == 0, res.stderr


@pytest.fixture(params=["json", "sqlite", "postgres"])
def damaged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A store holding KEYS, BAD's record undecodable; and how the line names it."""
    if request.param == "json":
        store = tmp_path / "s"
        _admit_all(str(store), tmp_path)
        _flip(_record_file(store, BAD))
        yield str(store), str(_record_file(store, BAD).relative_to(tmp_path))
    elif request.param == "sqlite":
        db = tmp_path / "s.db"
        _admit_all(str(db), tmp_path)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE ledger_tasks SET needs = '{[' WHERE key = ?", (BAD,))
        conn.close()
        yield str(db), f"stored record '{BAD}' has an unreadable needs column"
    else:
        import psycopg

        from tests.sql_support import fresh_schema, postgres_url, require_postgres

        require_postgres()
        with fresh_schema("ledger_badrow") as info:
            schema = info.split("search_path=")[1].split()[0].strip("'")
            url = f"{postgres_url()}?options=-csearch_path%3D{schema}"
            _admit_all(url, tmp_path)
            with psycopg.connect(info, autocommit=True) as conn:
                sql = "UPDATE ledger_tasks SET needs = '{[' WHERE key = %s"
                assert conn.execute(sql, (BAD,)).rowcount == 1
            yield url, f"stored record '{BAD}' has an unreadable needs column"


def _keys_in(form: tuple[str, ...], stdout: str) -> list[str]:
    if "--jsonl" in form:
        return sorted(json.loads(line)["Key"] for line in stdout.splitlines())
    if "--json" in form:
        return sorted(rec["Key"] for rec in json.loads(stdout))
    rows = stdout.splitlines()[2:]  # the table: header, rule, then a row a key
    return sorted(row.split()[0] for row in rows)


@pytest.mark.parametrize("form", FORMS, ids=" ".join)
def test_list_prints_every_good_row_then_names_the_bad_one(
    damaged: tuple[str, str], form: tuple[str, ...]
) -> None:
    store, named = damaged
    res = run_ledger(store, *form)
    assert res.returncode == 9, (form, res.stderr)
    assert _keys_in(form, res.stdout) == GOOD, form
    (line,) = res.stderr.splitlines()
    assert line.startswith("ledger: list: 1 record could not be read and is left out: "), line
    assert named in line and "ledger doctor" in line, line


def test_snapshot_of_a_store_with_a_bad_row_writes_nothing(
    damaged: tuple[str, str], tmp_path: Path
) -> None:
    store, named = damaged
    res = run_ledger(store, "snapshot")
    assert res.returncode == 9 and res.stdout == "", res.stderr
    assert named.split(" has ")[0] in res.stderr
    out = tmp_path / "snap.json"
    res = run_ledger(store, "snapshot", "-o", str(out))
    assert res.returncode == 9 and not out.exists(), res.stderr


@pytest.mark.parametrize("form", [("list",), ("list", "--jsonl")], ids=" ".join)
def test_a_lost_record_beside_a_bad_one_is_still_damage(
    tmp_path: Path, form: tuple[str, ...]
) -> None:
    """The bad file accounts for one record short of the tally, no more: a
    record file lost besides is exit 9 naming the tally (§5.5's missing row)."""
    store = tmp_path / "s"
    _admit_all(str(store), tmp_path)
    _flip(_record_file(store, BAD))
    _record_file(store, KEYS[5]).unlink()
    res = run_ledger(store, *form)
    assert res.returncode == 9, res.stderr
    (line,) = res.stderr.splitlines()
    assert "tally/counts" in line and "1 record file unreadable" in line, line
