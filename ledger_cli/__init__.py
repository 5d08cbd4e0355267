"""ledger_cli: a durable task-admission ledger for the shell.

Public names are resolved lazily so that `import ledger_cli` (and every CLI
start) pays only for what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"
"""The package version (pyproject.toml reads it from here: one source)."""

if TYPE_CHECKING:
    from typing import Any

    from ledger_cli import errors
    from ledger_cli.engine.events import Event
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.ledger import Ledger
    from ledger_cli.engine.memstore import MemStore, MemStoreOptions
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.snapshot import Snapshot
    from ledger_cli.engine.status import Status
    from ledger_cli.engine.store import Store
    from ledger_cli.stores import open_store
    from ledger_cli.stores.jsonfile import JsonFileStore
    from ledger_cli.stores.sql.sqlite import SQLiteStore

_EXPORTS: dict[str, str] = {
    "Ledger": "ledger_cli.engine.ledger",
    "Status": "ledger_cli.engine.status",
    "TaskState": "ledger_cli.engine.record",
    "Snapshot": "ledger_cli.engine.snapshot",
    "Event": "ledger_cli.engine.events",
    "Instant": "ledger_cli.engine.instant",
    "Store": "ledger_cli.engine.store",
    "MemStore": "ledger_cli.engine.memstore",
    "MemStoreOptions": "ledger_cli.engine.memstore",
    "JsonFileStore": "ledger_cli.stores.jsonfile",
    "SQLiteStore": "ledger_cli.stores.sql.sqlite",
    "open_store": "ledger_cli.stores",
}

__all__ = [
    "Event",
    "Instant",
    "JsonFileStore",
    "Ledger",
    "MemStore",
    "MemStoreOptions",
    "SQLiteStore",
    "Snapshot",
    "Status",
    "Store",
    "TaskState",
    "errors",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name == "errors":
        return importlib.import_module("ledger_cli.errors")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
