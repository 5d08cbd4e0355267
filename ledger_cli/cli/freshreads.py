"""The store as a fresh read command would open it, for the readers that live
long: each refresh of `ledger watch` (docs/design.md §6.6) and each request
of `ledger serve` (§6.7)."""

from __future__ import annotations

import contextlib

from ledger_cli.cli.context import Session, Settings
from ledger_cli.errors import LedgerError


class FreshReads:
    """The store each refresh (or request) reads. A JSON directory or SQLite
    file is opened afresh for every one (under a millisecond) and closed after it: a
    store deleted, replaced or damaged under the view is seen as a fresh
    `ledger stats` sees it (no store at PATH; the new file; SQLite's own
    error), never through a handle on the old inode or SQLite's cache of its
    pages. A PostgreSQL connection is kept, and opened again after a
    refresh that failed. Only the first open may create the default store
    (as every read command's does); a later one never creates anything."""

    def __init__(self, settings: Settings, first: Session | None = None) -> None:
        """`first`: a session the caller opened already, read first."""
        from ledger_cli.cli.context import store_url
        from ledger_cli.stores import scheme_of

        self.settings = settings
        self.url = store_url(settings)
        self.fresh = scheme_of(self.url) in ("json", "sqlite")
        self.session: Session | None = first or Session(settings, reads=True)

    def open(self) -> Session:
        if self.session is None:
            from ledger_cli.stores import open_store

            self.session = Session(
                self.settings, store=open_store(self.url, create=False), reads=True
            )
        return self.session

    def done(self, ok: bool = True) -> None:
        """After a refresh: a file store is closed, as is one that failed."""
        if self.session is not None and (self.fresh or not ok):
            session, self.session = self.session, None
            with contextlib.suppress(LedgerError):
                session.store.close()
