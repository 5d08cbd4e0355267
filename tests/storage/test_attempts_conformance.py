"""One conformance suite for attempts (docs/design.md §7.1) on every store of tests/stores.py.

Numbering across starts, the bound of 16 per key, saves (with and without
output), output read from an offset, byte-exact output (NUL, invalid UTF-8,
ANSI), removal, the keys listed for `doctor`, persistence across reopen and
visibility to another connection, concurrent starters never sharing an `n`,
and the Go table left exactly as it was on the SQL stores.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.engine.attempts import KEEP_ATTEMPTS, Attempt
from ledger_cli.engine.store import Store
from ledger_cli.stores.attemptlog import attempt_log
from tests.stores import KINDS, StoreKind


def _clock():  # type: ignore[no-untyped-def]
    from ledger_cli.engine.instant import Instant

    return Instant.parse("2024-01-01T00:00:00Z")


class Place:
    def __init__(self, kind: StoreKind, location: str) -> None:
        self.kind = kind
        self.location = location
        self.opened: list[Store] = []

    def open(self) -> Store:
        store = self.kind.open(self.location, _clock)
        self.opened.append(store)
        return store


@pytest.fixture(params=sorted(KINDS))
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        p = Place(kind, location)
        try:
            yield p
        finally:
            for store in p.opened:
                store.close()


@pytest.fixture
def store(place: Place) -> Store:
    return place.open()


def att(key: str = "job", **fields: object) -> Attempt:
    base: dict[str, object] = {
        "fence": 1,
        "try_": 1,
        "owner": "w1",
        "host": "h1",
        "pid": 4242,
        "started": "2024-01-01T00:00:00Z",
    }
    base.update(fields)
    return Attempt(key, **base)  # type: ignore[arg-type]


def test_first_attempt_is_one_and_reads_back(store: Store) -> None:
    log = attempt_log(store)
    assert log.list_attempts("job") == []
    assert log.read_output("job", 1) == b""
    a = att()
    n = log.start_attempt(a)
    assert n == 1
    (got,) = log.list_attempts("job")
    a.n = 1
    assert got == a
    assert got.ended is None and got.exit is None and got.signal is None
    assert log.read_output("job", 1) == b""


def test_numbers_follow_each_other_per_key(store: Store) -> None:
    log = attempt_log(store)
    assert [log.start_attempt(att("a", fence=f)) for f in (1, 2, 3)] == [1, 2, 3]
    assert log.start_attempt(att("b")) == 1
    assert [a.n for a in log.list_attempts("a")] == [1, 2, 3]
    assert [a.fence for a in log.list_attempts("a")] == [1, 2, 3]


def test_save_fields_and_output_byte_exact(store: Store) -> None:
    log = attempt_log(store)
    a = att()
    a.n = log.start_attempt(a)
    raw = b"\x00nul \xff\xfe bad utf-8 \x1b[31mred\x1b[0m\r\nno newline"
    a.output_bytes, a.kept_bytes = len(raw) + 100, len(raw)
    log.save_attempt(a, raw)
    assert log.read_output("job", a.n) == raw
    assert log.read_output("job", a.n, 5) == raw[5:]
    assert log.read_output("job", a.n, len(raw)) == b""
    a.ended, a.exit, a.signal, a.timed_out = "2024-01-01T00:00:04.2Z", None, "SIGKILL", True
    log.save_attempt(a, None)  # the fields alone: the output stays
    (got,) = log.list_attempts("job")
    assert got == a
    assert got.seconds() == pytest.approx(4.2)
    assert log.read_output("job", a.n) == raw


def test_a_key_keeps_its_newest_sixteen(store: Store) -> None:
    log = attempt_log(store)
    for i in range(KEEP_ATTEMPTS + 3):
        a = att(fence=i + 1)
        a.n = log.start_attempt(a)
        log.save_attempt(a, f"out {a.n}".encode())
    kept = log.list_attempts("job")
    assert [a.n for a in kept] == list(range(4, KEEP_ATTEMPTS + 4))
    assert log.read_output("job", 1) == b""
    assert log.read_output("job", 19) == b"out 19"
    # A save of an attempt removed meanwhile writes nothing back.
    gone = att(fence=1)
    gone.n = 2
    log.save_attempt(gone, b"late")
    assert [a.n for a in log.list_attempts("job")] == list(range(4, KEEP_ATTEMPTS + 4))


def test_remove_and_keys(store: Store) -> None:
    log = attempt_log(store)
    for key in ("a", "b/c", "d e", "ключ"):
        log.start_attempt(att(key))
    assert log.attempt_keys() == sorted(["a", "b/c", "d e", "ключ"])
    assert log.remove_attempts(["a", "ключ", "never"]) == 2
    assert log.list_attempts("a") == []
    assert log.attempt_keys() == ["b/c", "d e"]
    assert log.start_attempt(att("a")) == 1  # a fresh start after removal


def test_durable_and_seen_by_another_connection(place: Place) -> None:
    if not place.kind.durable:
        pytest.skip("MemStore keeps attempts in the process")
    writer, reader = place.open(), place.open()
    log = attempt_log(writer)
    a = att()
    a.n = log.start_attempt(a)
    log.save_attempt(a, b"first")
    other = attempt_log(reader)
    assert other.read_output("job", a.n) == b"first"
    log.save_attempt(a, b"first second")
    assert other.read_output("job", a.n, 5) == b" second"
    writer.close()
    again = attempt_log(place.open())
    (got,) = again.list_attempts("job")
    assert got == a
    assert again.read_output("job", 1) == b"first second"


def test_concurrent_starters_never_share_a_number(place: Place) -> None:
    stores = [place.open() for _ in range(4)] if place.kind.durable else [place.open()] * 4
    got: list[int] = []
    errors: list[BaseException] = []

    def start(s: Store) -> None:
        try:
            for _ in range(3):
                got.append(attempt_log(s).start_attempt(att()))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(got) == list(range(1, 13))


def test_large_output(store: Store) -> None:
    log = attempt_log(store)
    a = att()
    a.n = log.start_attempt(a)
    big = bytes(range(256)) * 4096  # 1 MiB, every byte value
    log.save_attempt(a, big)
    assert log.read_output("job", a.n) == big
    assert log.read_output("job", a.n, len(big) - 3) == big[-3:]


def test_read_new_is_what_follows_what_was_seen(store: Store) -> None:
    log = attempt_log(store)
    assert log.read_new("job", 1, 0) == (None, b"")
    a = att()
    a.n = log.start_attempt(a)
    a.output_bytes = a.kept_bytes = 6
    log.save_attempt(a, b"abcdef")
    got, new = log.read_new("job", a.n, 0)
    assert got == a and new == b"abcdef"
    assert log.read_new("job", a.n, 4)[1] == b"ef"
    assert log.read_new("job", a.n, 6)[1] == b""
    # The window slid: 10 bytes written, the last 4 kept.
    a.output_bytes, a.kept_bytes = 10, 4
    log.save_attempt(a, b"ghij")
    assert log.read_new("job", a.n, 8)[1] == b"ij"
    assert log.read_new("job", a.n, 2)[1] == b"ghij"  # 4 of the 8 new bytes are gone


NOT_UTF8 = b"bad\x9f\xff".decode("utf-8", "surrogateescape")
"""A key the Go service may write (its bytes are not UTF-8), as the stores read it."""


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_key_that_is_not_utf8(kind: str, tmp_path: Path) -> None:
    """SQLite keeps its attempts under its exact bytes, as it keeps its record;
    PostgreSQL text cannot hold it (no record has it): a start is refused
    before anything is written, and every read finds nothing."""
    from ledger_cli.errors import StoreError

    with KINDS[kind].place(tmp_path) as location:
        store = KINDS[kind].open(location, _clock)
        try:
            log = attempt_log(store)
            log.start_attempt(att("ok"))
            if kind == "sqlite":
                assert log.start_attempt(att(NOT_UTF8)) == 1
                log.save_attempt(att(NOT_UTF8, n=1, ended="2024-01-01T00:00:01Z"), b"out")
                assert [(a.key, a.n) for a in log.list_attempts(NOT_UTF8)] == [(NOT_UTF8, 1)]
                assert log.read_output(NOT_UTF8, 1, 1) == b"ut"
                assert log.attempt_keys() == [NOT_UTF8, "ok"]
                assert log.remove_attempts([NOT_UTF8]) == 1
            else:
                with pytest.raises(StoreError, match="PostgreSQL cannot store key 'bad"):
                    log.start_attempt(att(NOT_UTF8))
                log.save_attempt(att(NOT_UTF8, n=1), b"out")  # no such row: nothing
                assert log.list_attempts(NOT_UTF8) == []
                assert log.read_output(NOT_UTF8, 1) == b""
                assert log.read_new(NOT_UTF8, 1, 0) == (None, b"")
                assert log.remove_attempts([NOT_UTF8, "ok"]) == 1
            assert log.attempt_keys() == ([] if kind == "postgresql" else ["ok"])
        finally:
            store.close()
