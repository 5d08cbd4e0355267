"""`open_store(url)`: resolve a store URL to a backend (SPEC §3)."""

from __future__ import annotations

from ledger_cli.engine.store import Store
from ledger_cli.errors import StoreError


def open_store(url: str) -> Store:
    if url == "memory:":
        from ledger_cli.stores.memory import MemStore

        return MemStore()
    raise StoreError(f"ledger: store URL {url!r} is not available yet")
