"""The `memory:` backend: MemStore, the Go package's in-memory store.

It is the engine's own (`Ledger()` defaults to it), so it is defined in
`ledger_cli.engine.memstore`; this module names it among the backends.
"""

from __future__ import annotations

from ledger_cli.engine.memstore import EVICT_SCAN_BUDGET, MemStore, MemStoreOptions

__all__ = ["EVICT_SCAN_BUDGET", "MemStore", "MemStoreOptions"]
