"""Store backends, one module each, and `open_store(url)` (docs/design.md §3)."""

from __future__ import annotations

from ledger_cli.stores.resolve import open_store

__all__ = ["open_store"]
