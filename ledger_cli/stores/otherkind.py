"""A store URL that names the other kind of store than the path holds: a
JSON store's directory as `sqlite:PATH`, an SQLite database file as a JSON
store (`json:PATH`, or a plain path without .db/.sqlite). Each store's open
asks here only once it has failed, so no command pays for the check; the
answer is a StoreURLError (exit 2, docs/design.md §4.4): one line saying what
is there and the URL that opens it.

No imports of the stores: the JSON store's fsutil and the SQLite connection
import this module, and the layer rule counts no circles
(tests/docs/test_import_graph.py)."""

from __future__ import annotations

import os

from ledger_cli.errors import StoreURLError

META_NAME = "ledger-store.json"
"""The JSON store's metadata file (stores/jsonfile/layout.py `META_NAME`)."""
SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def other_kind(path: str, scheme: str) -> StoreURLError | None:
    """The error for a path that holds the other kind of store than its URL
    names (a JSON store's directory as `sqlite:`, an SQLite file as a JSON
    store): exit 2, one line saying what is there and the URL to use. None:
    it is not that. Called only once the store's own open failed."""
    if scheme == "sqlite" and os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, META_NAME)):
            return StoreURLError(
                f"ledger: store sqlite:{path} is a directory, not an SQLite database file; "
                "name the database file (sqlite:DIR/ledger.db)"
            )
        return StoreURLError(
            f"ledger: store sqlite:{path} is a JSON store's directory, not an SQLite "
            f"database file; use the store URL json:{path}"
        )
    if scheme == "json":
        try:
            with open(path, "rb") as file:
                head = file.read(16)
        except OSError:
            return None
        if head == SQLITE_HEADER:
            return StoreURLError(
                f"ledger: store {path} is an SQLite database file, not a JSON store "
                f"directory; use the store URL sqlite:{path}"
            )
    return None
