"""The store kinds under the conformance suite, declared in ONE place.

Each kind says how to make a fresh, empty location for a store (a directory,
a database file, a PostgreSQL schema), how to open a store there (again and
again: reopening is how persistence is tested), the `open_store` URL of that
location, and what the kind promises beyond the Store protocol. A new backend
adds one entry to KINDS; `tests/storage/test_store_conformance.py` fails while a URL
scheme of `open_store` has none.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.store import Store

Clock = Callable[[], Instant]


@dataclasses.dataclass(frozen=True)
class StoreKind:
    scheme: str
    """The `open_store` scheme this kind answers to (see ledger_cli.stores.SCHEMES)."""
    place: Callable[[Path], AbstractContextManager[str]]
    """A fresh empty location under a temporary directory (cleaned up after)."""
    open: Callable[[str, Clock], Store]
    """Open a store at a location (the clock matters to MemStore eviction only)."""
    url: Callable[[str], str]
    """The open_store URL of a location."""
    durable: bool
    """Writes survive close and reopen, and other processes see them."""
    transactional: bool
    """batch() is a transaction: invisible to other stores until it commits, and an
    exception leaving a (nested) block rolls that block back."""


@contextlib.contextmanager
def _json_place(tmp: Path) -> Iterator[str]:
    yield str(tmp / "store")


def _json_open(location: str, clock: Clock) -> Store:
    from ledger_cli.stores.jsonfile import JsonFileStore

    return JsonFileStore(location)


@contextlib.contextmanager
def _memory_place(tmp: Path) -> Iterator[str]:
    yield "memory"


def _memory_open(location: str, clock: Clock) -> Store:
    from ledger_cli.engine.memstore import MemStore, MemStoreOptions

    return MemStore(MemStoreOptions(now=clock))


@contextlib.contextmanager
def _sqlite_place(tmp: Path) -> Iterator[str]:
    yield str(tmp / "ledger.db")


def _sqlite_open(location: str, clock: Clock) -> Store:
    from ledger_cli.stores.sql.sqlite import SQLiteStore

    return SQLiteStore(location)


@contextlib.contextmanager
def _postgres_place(tmp: Path) -> Iterator[str]:
    """A postgresql:// URL whose search_path is a fresh schema (dropped afterwards)."""
    import uuid
    from urllib.parse import quote

    from tests.sql_support import require_postgres  # skips (or fails under CI) without a server

    url = require_postgres()
    import psycopg

    schema = f"ledger_conf_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options={quote(f'-c search_path={schema}')}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _postgres_open(location: str, clock: Clock) -> Store:
    from ledger_cli.stores.sql.postgres import PostgresStore

    return PostgresStore(location)


KINDS: dict[str, StoreKind] = {
    "json": StoreKind(
        scheme="json",
        place=_json_place,
        open=_json_open,
        url=lambda location: f"json:{location}",
        durable=True,
        transactional=True,
    ),
    "sqlite": StoreKind(
        scheme="sqlite",
        place=_sqlite_place,
        open=_sqlite_open,
        url=lambda location: f"sqlite:{location}",
        durable=True,
        transactional=True,
    ),
    "postgresql": StoreKind(
        scheme="postgresql",
        place=_postgres_place,
        open=_postgres_open,
        url=lambda location: location,
        durable=True,
        transactional=True,
    ),
    "memory": StoreKind(
        scheme="memory",
        place=_memory_place,
        open=_memory_open,
        url=lambda location: "memory:",
        durable=False,
        transactional=False,
    ),
}


@contextlib.contextmanager
def fresh_store(name: str, tmp: Path, clock: Clock) -> Iterator[Store]:
    """A store of kind `name` at a fresh location under `tmp`, closed after."""
    kind = KINDS[name]
    with kind.place(tmp) as location:
        opened = kind.open(location, clock)
        try:
            yield opened
        finally:
            opened.close()


@pytest.fixture(params=["postgresql", "sqlite"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh SQL store, once per SQL backend (PostgreSQL skips when
    unreachable, as its place does)."""
    kind = KINDS[str(request.param)]
    with kind.place(tmp_path) as location:
        yield kind.url(location)


def execute_sql(url: str, statement: str) -> None:
    """One statement run by another program, as a person at a SQL prompt would."""
    if url.startswith("sqlite:"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:")) as conn:
            conn.execute(statement)
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(statement.encode())
