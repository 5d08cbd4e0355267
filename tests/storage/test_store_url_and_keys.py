"""What a store answers for arguments that name nothing it could hold.

- A PostgreSQL URL with a setting libpq refuses (a port out of range, an
  unknown sslmode…) is a usage error: `ledger` exits 2 with one line naming
  the setting, never 9 with "check that the server is running" (the README's
  exit-code table). The port and sslmode are refused before any connection
  is tried: a host that does not resolve does not change the answer.
- `open_store` of something that is not a str names its type, not "store URL
  is empty".
- Every store's `load` of a key with a lone surrogate that stands for no byte
  (`a\\ud800`) finds no record: SQLite's used to raise StoreError (exit 9).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli import open_store
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.store import Store
from ledger_cli.errors import StoreURLError
from tests.cli_support import run_ledger
from tests.stores import KINDS, fresh_store

T = Instant.parse("2026-01-02T03:04:05Z")
USE = "use postgresql://USER:PASSWORD@HOST:PORT/DATABASE"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "postgresql://ledger@127.0.0.1:99999/x",
            'bad PostgreSQL URL: invalid port number: "99999" (a port is 1 to 65535)',
        ),
        (
            "postgresql://ledger@ledger-no-such-host.invalid:0/x",
            'bad PostgreSQL URL: invalid port number: "0" (a port is 1 to 65535)',
        ),
        (
            "postgresql://ledger@127.0.0.1:5432,127.0.0.1:x1/x",
            'bad PostgreSQL URL: invalid integer value "x1" for connection option "port"',
        ),
        (
            "postgresql://ledger:secret@ledger-no-such-host.invalid/x?sslmode=bogus",
            'bad PostgreSQL URL: invalid sslmode value: "bogus" (one of disable, allow,'
            " prefer, require, verify-ca, verify-full)",
        ),
        (
            "postgres://ledger@127.0.0.1/x?connect_timeout=soon",
            'bad PostgreSQL URL: invalid connect_timeout value: "soon" (a number of seconds)',
        ),
        (
            "postgresql://ledger@127.0.0.1:1/x?target_session_attrs=bogus",
            "bad PostgreSQL setting (in the URL or a PG* variable):"
            ' invalid target_session_attrs value: "bogus"',
        ),
    ],
)
def test_a_postgresql_url_libpq_refuses_is_exit_2_in_one_line(url: str, said: str) -> None:
    res = run_ledger(url, "list")
    assert (res.returncode, res.stdout) == (2, ""), res.stderr
    assert res.stderr == f"ledger: {said}; {USE}\n"
    assert "secret" not in res.stderr
    with pytest.raises(StoreURLError) as caught:
        open_store(url)
    assert str(caught.value) == f"ledger: {said}; {USE}"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        (123, "int"),
        (b"/x", "bytes"),
        (None, "NoneType"),
        (Path("/x"), f"{type(Path('/x')).__name__} (pass str(path))"),
    ],
)
def test_open_store_of_what_is_not_a_str_names_its_type(url: object, named: str) -> None:
    with pytest.raises(StoreURLError) as caught:
        open_store(url)  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"ledger: store URL must be a str, not {named}; use ")
    assert caught.value.exit_code == 2


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with fresh_store(str(request.param), tmp_path, lambda: T) as opened:
        yield opened


def test_load_of_a_key_no_store_holds_finds_no_record(store: Store) -> None:
    """On SQLite too, inside a batch and out, and the store stays usable."""
    assert Ledger(store).admit("me", "a", 1, {}, T)
    for key in ("a\ud800", "\udfff", "a\udcc3\udca9"):
        assert store.load(key) is None
        with store.batch():
            assert store.load(key) is None
    assert store.load("a") is not None
