"""docs/design.md §2.11 departure 3: a payload comes back exactly as it went in.

An integer within 64 bits (-2^63 .. 2^64-1) is kept with every digit on every
path — the library, `Snapshot`, `--task`, `--task-file`, `admit --batch`,
`--json` output, `LEDGER_TASK` in `ledger run`, `snapshot`/`restore`, and
every store. Beyond 64 bits a number is a float64, as in Go.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.cli import fast
from ledger_cli.engine.gojson import encode_value, loads
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.engine.store import Store
from ledger_cli.engine.wire.encode import record_to_json
from ledger_cli.errors import DecodeError
from tests.cli_support import Cli, make_cli, run_ledger
from tests.stores import KINDS

# Go's encoding of the payload: compact, keys sorted. Every integer fits 64 bits.
PAYLOAD = (
    '{"hash":18446744073709551615,"min":-9223372036854775808,'
    '"nested":[9007199254740993,{"id":-1234567890123456789}],'
    '"tweet_id":1234567890123456789}'
)
# The same payload as a user might write it: spaced out, keys in another order.
PAYLOAD_LOOSE = (
    '{ "tweet_id": 1234567890123456789, "nested": [9007199254740993, '
    '{"id": -1234567890123456789}],\n "hash": 18446744073709551615, '
    '"min": -9223372036854775808 }'
)
EXACT = {
    "hash": 18446744073709551615,
    "min": -9223372036854775808,
    "nested": [9007199254740993, {"id": -1234567890123456789}],
    "tweet_id": 1234567890123456789,
}
# Beyond 64 bits: a float64, as Go holds it.
BEYOND_IN = "[123456789012345678901234567890,100000000000000000000000,18446744073709551616,-0]"
BEYOND_OUT = "[1.2345678901234568e+29,1e+23,18446744073709552000,-0]"
T0 = Instant.parse("2026-01-02T03:04:05Z")


def _ints_exact(value: Any, expected: Any) -> None:
    """Equal, and every number of the same Python type (1 == 1.0 would hide a float)."""
    assert type(value) is type(expected), (value, expected)
    if isinstance(expected, dict):
        assert value.keys() == expected.keys()
        for k in expected:
            _ints_exact(value[k], expected[k])
    elif isinstance(expected, list):
        assert len(value) == len(expected)
        for a, b in zip(value, expected, strict=True):
            _ints_exact(a, b)
    else:
        assert value == expected


# -- the library ------------------------------------------------------------------------


def test_library_task_encodes_every_digit() -> None:
    rec = TaskState(key="k", task={"id": 1234567890123456789})
    assert '"Task":{"id":1234567890123456789}' in record_to_json(rec)
    assert encode_value(EXACT) == PAYLOAD


def test_library_int_beyond_64_bits_encodes_as_its_float64() -> None:
    task = [123456789012345678901234567890, 10**23, 2**64, -(2**63) - 1]
    assert encode_value(task) == (
        "[1.2345678901234568e+29,1e+23,18446744073709552000,-9223372036854776000]"
    )


@pytest.mark.parametrize(
    "literal", ["1234567890123456789", "18446744073709551615", "-9223372036854775808"]
)
def test_spec_examples_round_trip_byte_for_byte(literal: str) -> None:
    rec = record_to_json(TaskState(key="k", status="pending", sequence=1, task={"n": 0}))
    text = ('{"Tasks":[' + rec.replace('{"n":0}', literal) + "]}").encode()
    snap = Snapshot.decode(text)
    assert snap.tasks is not None
    assert type(snap.tasks[0].task) is int
    assert snap.encode() == text


def test_snapshot_beyond_64_bits_is_float64_and_out_of_range_is_refused() -> None:
    rec = record_to_json(TaskState(key="k", status="pending", sequence=1, task=0))
    snap = Snapshot.decode('{"Tasks":[' + rec.replace('"Task":0', '"Task":' + BEYOND_IN) + "]}")
    assert snap.tasks is not None
    assert snap.tasks[0].task == [1.2345678901234568e29, 1e23, 2.0**64, -0.0]
    assert '"Task":' + BEYOND_OUT in snap.encode().decode()
    with pytest.raises(DecodeError, match=r"^ledger: decode: "):
        Snapshot.decode('{"Tasks":[' + rec.replace('"Task":0', '"Task":[1e400]') + "]}")


# -- every store ------------------------------------------------------------------------


@pytest.fixture(params=sorted(KINDS))
def kind_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with KINDS[request.param].place(tmp_path) as location:
        yield request.param, location


def _raw_task(kind: str, location: str, key: str) -> bytes | None:
    """The bytes a durable store holds for a record's Task (None: not inspectable)."""
    if kind == "sqlite":
        with sqlite3.connect(location) as conn:
            row = conn.execute("SELECT task FROM ledger_tasks WHERE key = ?", (key,)).fetchone()
        return bytes(row[0])
    if kind == "postgresql":
        import psycopg

        with psycopg.connect(location) as conn:
            row = conn.execute("SELECT task FROM ledger_tasks WHERE key = %s", (key,)).fetchone()
        assert row is not None
        return bytes(row[0])
    if kind == "json":
        holders = [
            p.read_bytes()
            for p in (Path(location) / "records").rglob("*.json")  # not wal.log's frames
            if p.is_file() and f'"Key":"{key}"'.encode() in p.read_bytes()
        ]
        assert holders, "no record file names the key"
        start = holders[0].index(b'"Task":') + len(b'"Task":')
        end = holders[0].index(b',"Rev":', start)
        return holders[0][start:end]
    return None


def test_every_store_keeps_64_bit_integers(kind_location: tuple[str, str]) -> None:
    kind, location = kind_location
    store: Store = KINDS[kind].open(location, lambda: T0)
    ledger = Ledger(store)
    assert ledger.admit("t", "exact", 1, loads(PAYLOAD_LOOSE), T0)
    assert ledger.admit("t", "beyond", 1, loads(BEYOND_IN), T0)
    assert ledger.admit("t", "lib", 1, [2**64 - 1, 2**64], T0)
    # A rewrite (claim, complete) keeps the payload too.
    fence = ledger.claim("t", "exact", "w", timedelta(minutes=1), T0)
    ledger.complete("t", "exact", "w", fence, "completed", T0)
    if KINDS[kind].durable:  # read back what was written, through a fresh store
        store.close()
        store = KINDS[kind].open(location, lambda: T0)
    try:
        got = {key: store.load(key) for key in ("exact", "beyond", "lib")}
        exact, beyond, lib = got["exact"], got["beyond"], got["lib"]
        assert exact is not None and beyond is not None and lib is not None
        assert exact.status == "completed"
        _ints_exact(exact.task, EXACT)
        assert encode_value(exact.task) == PAYLOAD
        assert encode_value(beyond.task) == BEYOND_OUT
        assert encode_value(lib.task) == "[18446744073709551615,18446744073709552000]"
        snap = Ledger(store).snapshot().encode().decode()
        assert '"Task":' + PAYLOAD in snap
    finally:
        store.close()
    raw = _raw_task(kind, location, "exact")
    if raw is not None:
        assert raw == PAYLOAD.encode()
        assert _raw_task(kind, location, "beyond") == BEYOND_OUT.encode()


# -- the command line (in process, on the fast path and on the Typer app) -------------------


@pytest.fixture(params=["fast", "typer"])
def cli(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Cli:
    if request.param == "typer":
        monkeypatch.setattr(fast, "parse", lambda args: None)
    return make_cli(monkeypatch)


def _stored(cli: Cli, key: str) -> Any:
    rec = cli.store.load(key)
    assert rec is not None
    return rec.task


def test_cli_task_option_and_json_output(cli: Cli) -> None:
    res = cli.ok("--json", "admit", "k", "--task", PAYLOAD_LOOSE)
    assert '"Task":' + PAYLOAD + "," in res.stdout
    _ints_exact(_stored(cli, "k"), EXACT)
    res = cli.ok("--json", "claim", "--next", "--owner", "w", "--lease", "1m")
    assert res.stdout.rstrip("\n").endswith(',"task":' + PAYLOAD + "}")
    assert '"Task":' + PAYLOAD + "," in res.stdout
    assert cli.ok("--json", "state", "k").stdout.count(PAYLOAD) == 1


def test_cli_task_file(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "task.json"
    path.write_text(PAYLOAD_LOOSE + "\n", encoding="utf-8")
    cli.ok("admit", "k", "--task-file", str(path))
    _ints_exact(_stored(cli, "k"), EXACT)


def test_cli_beyond_64_bits_is_float64_and_out_of_range_is_refused(cli: Cli) -> None:
    cli.ok("admit", "k", "--task", BEYOND_IN)
    assert encode_value(_stored(cli, "k")) == BEYOND_OUT
    res = cli("admit", "bad", "--task", "[1e400]")
    assert res.code == 2 and "out of float64 range" in res.stderr
    assert cli.store.load("bad") is None


def test_cli_batch(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text(
        f'{{"key": "a", "task": {PAYLOAD_LOOSE.replace(chr(10), " ")}}}\n'
        f'{{"key": "b", "seq": 18446744073709551615, "task": {BEYOND_IN}}}\n',
        encoding="utf-8",
    )
    res = cli.ok("--json", "admit", "--batch", str(path))
    assert '"Task":' + PAYLOAD + "," in res.stdout
    assert '"Sequence":18446744073709551615,' in res.stdout
    _ints_exact(_stored(cli, "a"), EXACT)
    assert encode_value(_stored(cli, "b")) == BEYOND_OUT
    b = cli.store.load("b")
    assert b is not None and b.sequence == 2**64 - 1


# -- real processes: snapshot/restore across stores, and `ledger run`'s environment ---------


def test_snapshot_and_restore_across_stores(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", f"sqlite:{tmp_path / 'dst.db'}"
    done = run_ledger(src, "admit", "k", "--task", PAYLOAD_LOOSE)
    assert done.returncode == 0, done.stderr
    snap = run_ledger(src, "snapshot")
    assert snap.returncode == 0, snap.stderr
    assert '"Task":' + PAYLOAD + "," in snap.stdout
    copy = tmp_path / "snap.json"
    copy.write_text(snap.stdout, encoding="utf-8")
    done = run_ledger(dst, "restore", str(copy))
    assert done.returncode == 0, done.stderr
    again = run_ledger(dst, "snapshot")
    assert again.stdout == snap.stdout  # byte for byte


def test_run_hands_the_exact_task_to_the_command(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = run_ledger(store, "admit", "k", "--task", PAYLOAD_LOOSE)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "task-seen"
    child = "import os, sys; open(sys.argv[1], 'w').write(os.environ['LEDGER_TASK'])"
    command = [sys.executable, "-c", child, str(out)]
    ran = run_ledger(store, "run", "--next", "--owner", "w", "--lease", "1m", "--", *command)
    assert ran.returncode == 0, ran.stderr
    assert out.read_text(encoding="utf-8") == PAYLOAD
    _ints_exact(json.loads(out.read_text(encoding="utf-8")), EXACT)
