"""Store backends, one package or module each, and `open_store(url)`, which
resolves a store URL to a backend (docs/design.md §3).

| URL                                          | store          |
|----------------------------------------------|----------------|
| a plain path, or `json:PATH`                 | JsonFileStore  |
| `sqlite:PATH`, or a path ending .db/.sqlite  | SQLiteStore    |
| `postgresql://…` (also `postgres://…`)       | PostgresStore  |
| `memory:`                                    | MemStore       |

Backends are imported only when chosen: importing this package loads no
driver, no filelock and no platformdirs.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING

from ledger_cli.errors import NoStoreError, StoreError, StoreURLError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.store import Store

SCHEMES: tuple[str, ...] = ("json", "sqlite", "postgresql", "memory")
"""Every store kind open_store resolves (the conformance suite must cover each)."""

_SQLITE_SUFFIXES = (".db", ".sqlite")
_HELP = (
    "use a directory path or json:PATH, sqlite:PATH (or a path ending .db/.sqlite), "
    "postgresql://…, or memory:"
)


def default_store_path() -> str:
    """Where the JSON store lives when no store is given: `store` in
    platformdirs' user data directory for `ledger_cli`.

    On Linux that directory follows the XDG rule, read here without
    importing platformdirs, whose import (with pathlib, tempfile and shutil)
    would cost every hot command without `--store` about a quarter of its
    start-up (docs/design.md §5.1). `tests/storage/test_default_store.py`
    pins the two to the same directory. Elsewhere platformdirs decides."""
    if sys.platform == "linux" and not os.environ.get("ANDROID_DATA"):
        home = os.environ.get("HOME", "")
        if not os.path.isabs(home):  # unset or relative: the account's home
            import pwd

            home = pwd.getpwuid(os.getuid()).pw_dir
        data = os.environ.get("XDG_DATA_HOME", "")
        if not os.path.isabs(data):  # the XDG rule: a relative path is ignored
            data = os.path.join(home, ".local", "share")
        if os.path.isabs(data):
            return os.path.join(data, "ledger_cli", "store")
    import platformdirs

    return str(platformdirs.user_data_path("ledger_cli") / "store")


def default_store_url() -> str:
    """The default store URL: the JSON store in the user's data directory."""
    return f"json:{default_store_path()}"


def redact_url(url: str) -> str:
    """`url` with any password replaced by `***`, for printing (never print a secret).

    Covers the userinfo of `scheme://user:password@host…` (every host of a
    libpq host list) and a `password=` query parameter, as libpq's tools and
    kubectl show them. Paths and other URLs come back unchanged.
    """
    if not isinstance(url, str) or "://" not in url:
        return url
    scheme, _, rest = url.partition("://")
    end = len(rest)
    for stop in "/?#":
        at = rest.find(stop)
        if at != -1:
            end = min(end, at)
    authority, tail = rest[:end], rest[end:]
    user, sep, hosts = authority.rpartition("@")
    if sep and ":" in user:
        authority = f"{user.partition(':')[0]}:***@{hosts}"
    if "?" in tail:
        path, _, query = tail.partition("?")
        fragment = ""
        if "#" in query:
            query, _, fragment = query.partition("#")
            fragment = "#" + fragment
        parts = [
            "password=***" if p.lower().startswith("password=") else p for p in query.split("&")
        ]
        tail = f"{path}?{'&'.join(parts)}{fragment}"
    return f"{scheme}://{authority}{tail}"


def without_secrets(text: str, url: str) -> str:
    """`text` (a message that may quote `url` or parts of it, as libpq's do) with
    `url` shown redacted and its password, wherever it stands, as `***`."""
    text = text.replace(url, redact_url(url))
    if "://" not in url:
        return text
    rest = url.partition("://")[2]
    user, sep, _ = rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")
    secrets = [user.partition(":")[2] if sep else ""]
    query = rest.partition("?")[2].partition("#")[0]
    secrets += [p[9:] for p in query.split("&") if p.lower().startswith("password=")]
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def scheme_of(url: str) -> str:
    """The store kind a URL names (one of SCHEMES); StoreURLError for a bad URL."""
    return _parse(url)[0]


def missing_sqlite(url: str) -> bool:
    """Whether `url` names an SQLite file that is not there (nor its -wal)."""
    return _missing_sqlite(*_parse(url))


def _missing_sqlite(scheme: str, target: str) -> bool:
    return scheme == "sqlite" and not any(map(os.path.lexists, (target, target + "-wal")))


def _parse(url: str) -> tuple[str, str]:
    if not isinstance(url, str):  # bytes, a Path, a number: not a URL this reads
        hint = " (pass str(path))" if isinstance(url, os.PathLike) else ""
        raise StoreURLError(
            f"ledger: store URL must be a str, not {type(url).__name__}{hint}; {_HELP}"
        )
    if url.strip() == "":
        raise StoreURLError(f"ledger: store URL is empty; {_HELP}")
    if "\x00" in url:
        raise StoreURLError(f"ledger: store URL {redact_url(url)!r} contains a NUL byte; {_HELP}")
    if url == "memory:":
        return "memory", ""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql", url
    if url.startswith("json:"):
        return "json", _path_part(url, "json:")
    if url.startswith("sqlite:"):
        return "sqlite", _path_part(url, "sqlite:")
    head, sep, _ = url.partition(":")
    if sep and head.isascii() and head.isalpha() and len(head) > 1 and "/" not in head:
        # Looks like `scheme:…` (`memory:x`, `mysql://…`, `file:…`): not a path we guess at.
        raise StoreURLError(
            f"ledger: unknown store URL scheme {head + ':'!r} in {redact_url(url)!r}; {_HELP}"
        )
    path = os.path.expanduser(url)
    # `app.db/` does not end .db: a trailing `/` names a directory, a JSON store.
    if path.lower().endswith(_SQLITE_SUFFIXES):
        return "sqlite", path
    return "json", path


def _path_part(url: str, prefix: str) -> str:
    path = url[len(prefix) :]
    if path.startswith("//"):  # json://PATH, sqlite:///abs/path
        path = path[2:]
    if path == "":
        raise StoreURLError(f"ledger: store URL {url!r} names no path; {_HELP}")
    return os.path.expanduser(path)


def _backend(module: str, name: str, url: str, hint: str) -> Callable[..., Store]:
    import importlib

    url = redact_url(url)  # only ever printed here
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == module:
            raise StoreError(
                f"ledger: store {url!r} needs {name}, which is not available yet; {hint}"
            ) from None
        if missing.startswith("psycopg"):
            raise StoreError(
                f"ledger: store {url!r} needs the PostgreSQL driver psycopg; "
                "install it with: pip install 'ledger_cli[postgres]'"
            ) from None
        if missing.startswith(("sqlite3", "_sqlite3")):
            raise StoreError(
                f"ledger: store {url!r} needs Python's sqlite3 module, which this Python "
                "lacks; use a JSON store path instead"
            ) from None
        raise
    factory: Callable[..., Store] = getattr(mod, name)
    return factory


def sqlite_uri(path: str, mode: str) -> str:
    """An SQLite file's path as the URI that opens it in `mode` (`ro`: read
    only; `rw`: read-write, never created): `%`, `?` and `#` escaped (SQLite's
    URI rules), an absolute path after an empty authority (`//tmp/x.db`, from
    `sqlite:////tmp/x.db`, must not read as the host `tmp`), a relative path
    relative."""
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    if quoted.startswith("/"):
        quoted = "//" + quoted
    return f"file:{quoted}?mode={mode}"


def require_store(url: str) -> None:
    """NoStoreError when `url` names a JSON directory or SQLite file that does
    not exist (what a read refuses), without opening anything."""
    _require(*_parse(url))


def _require(scheme: str, target: str) -> None:
    if scheme in ("json", "sqlite") and not os.path.exists(target):
        raise NoStoreError(f"ledger: no store at {target} (the first write creates it)")
    if scheme == "sqlite" and _empty_file(target) and _empty_file(target + "-wal", True):
        # SQLite reads an empty file as an empty database: a database that lost
        # its content would pass for a healthy, empty queue (docs/design.md §5.5).
        raise NoStoreError(
            f"ledger: no store at {target}: the file is empty (the first write creates "
            "the database; if it held one, restore it from a backup)"
        )


def _empty_file(path: str, missing: bool = False) -> bool:
    """Whether `path` is a regular file of 0 bytes (`missing`: what a missing one counts as)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return missing
    except OSError:
        return False  # the store's own open reports it
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


def open_store(url: str, create: bool = True, existing: bool = False) -> Store:
    """Open the store a URL names. A bad URL is a StoreURLError (exit 2), a
    missing backend a StoreError. With `create` False (a command that only
    reads) a JSON directory or SQLite file that does not exist is a
    NoStoreError, and nothing is created. With `existing` (a command that
    writes only to what the store holds: a record, a pause) an SQLite file
    that is not there (nor its -wal) is an empty MemStore: the command answers
    as on an empty store, and no file is created (a JSON store creates its
    directory only when a write commits)."""
    scheme, target = _parse(url)
    if not create:
        _require(scheme, target)
    if scheme == "memory" or (existing and _missing_sqlite(scheme, target)):
        from ledger_cli.engine.memstore import MemStore

        return MemStore()
    if scheme == "json":
        from ledger_cli.stores.jsonfile import JsonFileStore

        return JsonFileStore(target)
    if scheme == "sqlite":
        sqlite_store = _backend(
            "ledger_cli.stores.sql.sqlite", "SQLiteStore", url, "use a JSON store path meanwhile"
        )
        return sqlite_store(target, create=create)
    postgres_store = _backend(
        "ledger_cli.stores.sql.postgres", "PostgresStore", url, "use a JSON store path meanwhile"
    )
    return postgres_store(target)
