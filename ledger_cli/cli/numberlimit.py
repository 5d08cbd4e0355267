"""The largest sequence or fence a store holds, told by its URL (docs/stores.md).

Go's numbers are uint64; SQLite's INTEGER is signed, so an SQLite store holds
at most 2^63-1 (`SQLiteConnection.NUMBER_MAX`). `admit` and `restore` refuse a
larger one with exit 8 before the store is opened or anything is written,
rather than let the driver fail half way (exit 9).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli.inputs import UINT64_MAX

if TYPE_CHECKING:
    from ledger_cli.cli.context import Settings

INT64_MAX = 2**63 - 1
"""Below this every store holds a number: no need to ask which store it is."""


def number_max(settings: Settings) -> int:
    """The largest sequence or fence the store `settings` names holds."""
    from ledger_cli.cli.context import store_url
    from ledger_cli.stores import scheme_of

    if scheme_of(store_url(settings)) == "sqlite":
        from ledger_cli.stores.sql.sqlite_conn import SQLiteConnection

        return SQLiteConnection.NUMBER_MAX
    return UINT64_MAX


def why(limit: int) -> str:
    """Why a store's limit is lower than Go's uint64 ('' when it is not)."""
    if limit >= UINT64_MAX:
        return ""
    return f" (SQLite's signed 64-bit INTEGER holds at most {limit})"


def refuse_sequence(settings: Settings, seq: int, where: str) -> None:
    """ValidationError (exit 8) when `seq` is more than the store holds; `where`
    names it (`--seq`, `line N: "seq"`)."""
    if seq <= INT64_MAX:
        return
    limit = number_max(settings)
    if seq > limit:
        from ledger_cli.errors import ValidationError

        raise ValidationError(f"ledger: {where} {seq} is more than this store holds{why(limit)}")
