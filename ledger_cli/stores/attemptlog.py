"""Where each store keeps attempts (docs/design.md §7.1), beside its records.

`attempt_log(store)` gives the store's `AttemptLog` (engine/attempts.py):
- MemStore: a dict in memory, kept with the store object;
- JsonFileStore: files of their own under `attempts/` (stores/jsonfile/attempts.py);
- SQLiteStore and PostgresStore: a side table `ledger_attempts`
  (stores/sql/attempts.py); the Go table `ledger_tasks` is not touched.

The adapters live outside the store classes so that the stores' own modules
stay as they are; one adapter is made per store object and kept with it.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from ledger_cli.engine.attempts import Attempt, expired, new_part, next_n
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ledger_cli.engine.attempts import AttemptLog

_LOGS: weakref.WeakKeyDictionary[object, AttemptLog] = weakref.WeakKeyDictionary()
_MADE = threading.Lock()


_KINDS = ("MemStore", "JsonFileStore", "SQLiteStore", "PostgresStore")


def _unwrapped(store: object) -> object:
    """The store itself behind a proxy that forwards to `_store` (a wrapper
    that keeps one store open across commands, or injects faults)."""
    for _ in range(8):
        if type(store).__name__ in _KINDS:
            return store
        inner = vars(store).get("_store") if hasattr(store, "__dict__") else None
        if inner is None:
            return store
        store = inner
    return store


def attempt_log(store: object) -> AttemptLog:
    """The AttemptLog of `store` (one per store object); StoreError for a store
    that keeps no attempts."""
    store = _unwrapped(store)
    with _MADE:
        log = _LOGS.get(store)
        if log is None:
            log = _make(store)
            _LOGS[store] = log
        return log


def _make(store: object) -> AttemptLog:
    kind = type(store).__name__
    if kind == "MemStore":
        return MemAttempts()
    if kind == "JsonFileStore":
        from ledger_cli.stores.jsonfile.attempts import JsonAttempts

        return JsonAttempts(store)  # type: ignore[arg-type]
    if kind == "SQLiteStore":
        from ledger_cli.stores.sql.attempts import SQLiteAttempts

        return SQLiteAttempts(store)
    if kind == "PostgresStore":
        from ledger_cli.stores.sql.attempts import PostgresAttempts

        return PostgresAttempts(store)
    maker = getattr(store, "attempt_log", None)  # a store of its own kind
    if callable(maker):
        made: AttemptLog = maker()
        return made
    raise StoreError(f"ledger: a {kind} keeps no attempts")


class MemAttempts:
    """Attempts in memory: key -> {n: (attempt, output)}."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, dict[int, tuple[Attempt, bytes]]] = {}

    def start_attempt(self, att: Attempt) -> int:
        with self._lock:
            kept = self._by_key.setdefault(att.key, {})
            n = next_n(kept)
            for old in expired(sorted(kept), n):
                del kept[old]
            stored = att.copy()
            stored.n = n
            kept[n] = (stored, b"")
            return n

    def save_attempt(self, att: Attempt, output: bytes | None) -> None:
        with self._lock:
            kept = self._by_key.get(att.key)
            if kept is None or att.n not in kept:
                return  # removed meanwhile (prune, or 16 newer ones)
            old_output = kept[att.n][1]
            kept[att.n] = (att.copy(), old_output if output is None else bytes(output))

    def list_attempts(self, key: str) -> list[Attempt]:
        with self._lock:
            kept = self._by_key.get(key, {})
            return [kept[n][0].copy() for n in sorted(kept)]

    def read_output(self, key: str, n: int, start: int = 0) -> bytes:
        with self._lock:
            got = self._by_key.get(key, {}).get(n)
        return b"" if got is None else got[1][start:]

    def read_new(self, key: str, n: int, seen: int) -> tuple[Attempt | None, bytes]:
        with self._lock:
            got = self._by_key.get(key, {}).get(n)
        if got is None:
            return None, b""
        att, out = got
        return att.copy(), out[new_part(att, seen) :]

    def remove_attempts(self, keys: Iterable[str]) -> int:
        removed = 0
        with self._lock:
            for key in keys:
                removed += len(self._by_key.pop(key, {}))
        return removed

    def attempt_keys(self) -> list[str]:
        with self._lock:
            return sorted(k for k, v in self._by_key.items() if v)
