"""`HistoryEntry` now lives in `ledger_cli.engine.history`, beside the Store
protocol; kept importable from here for code written against the old path."""

from __future__ import annotations

from ledger_cli.engine.history import HistoryEntry

__all__ = ["HistoryEntry"]
