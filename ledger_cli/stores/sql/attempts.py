"""Attempts on the SQL stores (docs/design.md §7.1): one side table, `ledger_attempts`.

One row per attempt, keyed (key, n), holding the docs/design.md §7.1 fields and the kept
output as a blob (BLOB / BYTEA). The Go table `ledger_tasks` is not touched and
the Go service never reads this table. The table is created on the first
write of an attempt (idempotently, under the store's set-up lock on
PostgreSQL); a reader of a database without it sees no attempts.

- `start_attempt` is one short transaction, or a savepoint of the caller's:
  the next `n` (max + 1), the insert, and, from the 17th on, the removal of
  the attempts beyond the newest 16. SQLite's BEGIN IMMEDIATE serialises
  concurrent starters; PostgreSQL takes a transaction-scoped advisory lock on
  the key. `ledger run` starts its first attempt in the claim's transaction
  (`folds_into_batch`), before the command's pid is known (0), and writes the
  pid (`note_pid`) only when the command outlives its first poll: a short
  command's pid goes with its end, so a drained task commits once.
- `save_attempt` is one UPDATE of the row (its output replaced whole: at most
  `--keep-output` bytes, written at most about once a second by the runner):
  one short write, never a lock held for the command's duration.
- `read_output(key, n, start)` reads only the bytes from `start` on
  (`substr` of the blob), so `ledger output --follow` reads what is new.
- A key that is not valid UTF-8 (the Go service's bytes, a lone surrogate
  each: utf8.py) is kept as its record is: on SQLite under its exact bytes,
  through the store's text recovery (`_fetchall`); PostgreSQL text cannot
  hold it, so no record has it: a start is refused as the store refuses such
  a key (StoreError), and a read of it finds nothing (docs/design.md §3.4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from ledger_cli.engine.attempts import KEEP_ATTEMPTS, Attempt
from ledger_cli.stores.sql.codec import damaged_row, integral, shown

COLUMNS = (
    "n, fence, try_n, owner, host, pid, started, ended, exit, signal, timed_out,"
    " output_bytes, kept_bytes"
)

_DDL = (
    "CREATE TABLE IF NOT EXISTS ledger_attempts ("
    " key TEXT NOT NULL, n {big} NOT NULL, fence {uint} NOT NULL,"
    " try_n {big} NOT NULL, owner TEXT NOT NULL, host TEXT NOT NULL,"
    " pid {big} NOT NULL, started TEXT NOT NULL, ended TEXT, exit INTEGER,"
    " signal TEXT, timed_out {bool} NOT NULL, output_bytes {big} NOT NULL,"
    " kept_bytes {big} NOT NULL, output {blob} NOT NULL DEFAULT {empty},"
    " PRIMARY KEY (key, n))"
)
SQLITE_DDL = _DDL.format(big="INTEGER", uint="INTEGER", bool="INTEGER", blob="BLOB", empty="x''")
PG_DDL = _DDL.format(
    big="BIGINT", uint="NUMERIC(20, 0)", bool="BOOLEAN", blob="BYTEA", empty="''::bytea"
)
_PG_ATTEMPT_LOCK = 0x61747470  # "attp": (class, hashtext(key)) advisory locks


class _SqlAttempts:
    """The statements, with the placeholder and the driver calls of one store
    (SQLite's unless a dialect's class below says otherwise)."""

    mark = "?"
    ddl = SQLITE_DDL
    greatest = "max"

    def __init__(self, store: Any) -> None:
        self._store = store
        self._ready = False

    # -- the driver ------------------------------------------------------------

    def _rows(self, op: str, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Run one statement; its rows when it is a SELECT."""
        s = self._store
        with s._lock:
            s._check_open()
            with s._errors(f"attempts {op}"):
                return self._run(f"attempts {op}", sql.replace("?", self.mark), params)

    def _run(self, op: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        cur = self._store._conn.execute(sql, params)
        return list(cur.fetchall()) if sql.startswith("SELECT") else []

    def _holds(self, key: str) -> bool:
        """The database can hold `key` (else no attempt of it exists: a read
        finds none), as its store judges (`_holds`: PostgreSQL's text)."""
        holds: bool = self._store._holds(key)
        return holds

    def _exists(self) -> bool:
        raise NotImplementedError

    def _lock_key(self, key: str) -> None:
        """Serialise the starters of one key inside the open transaction."""

    def _create(self) -> None:
        self._rows("create", self.ddl)

    def _table(self, create: bool) -> bool:
        if self._ready:
            return True
        if self._exists():
            self._ready = True
        elif create:
            outer = self._store._depth > 0
            with self._store.batch():
                self._create()
            # Created inside a caller's transaction (a claim's), it is there
            # only once that commits: asked again until then.
            self._ready = not outer
            return True
        return self._ready

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        """A transaction for the block, or the caller's open one as it is: no
        savepoint of its own, as the caller's unit (a claim's, a completion's
        savepoint) rolls back what a failure leaves."""
        s = self._store
        with s._lock:
            if s._depth:
                yield
                return
            with s.batch():
                yield

    def _bool(self, value: bool) -> Any:
        return int(value)

    # -- AttemptLog --------------------------------------------------------------

    folds_into_batch = True
    """A start, a save or a drop inside the caller's batch commits with it."""

    def start_attempt(self, att: Attempt) -> int:
        # A key the database cannot hold has no record to run: refused as the
        # store refuses it (StoreError), before anything is written.
        self._store._check_text(att.key)
        self._table(create=True)
        with self._tx():
            self._lock_key(att.key)
            ((top,),) = self._rows(
                "start", "SELECT COALESCE(MAX(n), 0) FROM ledger_attempts WHERE key = ?", (att.key,)
            )
            n = int(top) + 1
            self._rows(
                "start",
                f"INSERT INTO ledger_attempts (key, {COLUMNS}, output)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (att.key, n, *self._values(att), b""),
            )
            if n > KEEP_ATTEMPTS:  # below, the attempts 1..n are all kept
                self._rows(
                    "start",
                    "DELETE FROM ledger_attempts WHERE key = ? AND n <= ?",
                    (att.key, n - KEEP_ATTEMPTS),
                )
        return n

    def note_pid(self, att: Attempt) -> None:
        """The running command's pid, for an attempt started with the claim
        (pid 0 until then); an attempt that has ended keeps the pid its end
        carries."""
        if not att.pid or not self._holds(att.key) or not self._table(create=False):
            return
        with self._tx():
            self._rows(
                "pid",
                "UPDATE ledger_attempts SET pid = ? WHERE key = ? AND n = ? AND ended IS NULL",
                (att.pid, att.key, att.n),
            )

    def drop_attempt(self, key: str, n: int) -> None:
        """Remove attempt n of `key`: one started with a claim whose command
        never ran (it could not be started, or a signal came first)."""
        if not self._holds(key) or not self._table(create=False):
            return
        with self._tx():
            self._rows("drop", "DELETE FROM ledger_attempts WHERE key = ? AND n = ?", (key, n))

    def _values(self, att: Attempt) -> tuple[Any, ...]:
        return (
            att.fence,
            att.try_,
            att.owner,
            att.host,
            att.pid,
            att.started,
            att.ended,
            att.exit,
            att.signal,
            self._bool(att.timed_out),
            att.output_bytes,
            att.kept_bytes,
        )

    def save_attempt(self, att: Attempt, output: bytes | None) -> None:
        if not self._holds(att.key):
            return  # no attempt of it was started: no row to update
        self._table(create=True)
        sets = (
            "fence = ?, try_n = ?, owner = ?, host = ?, pid = ?, started = ?, ended = ?,"
            " exit = ?, signal = ?, timed_out = ?, output_bytes = ?, kept_bytes = ?"
        )
        params: tuple[Any, ...] = self._values(att)
        if output is not None:
            sets += ", output = ?"
            params += (bytes(output),)
        with self._tx():
            self._rows(
                "save",
                f"UPDATE ledger_attempts SET {sets} WHERE key = ? AND n = ?",
                (*params, att.key, att.n),
            )

    def list_attempts(self, key: str) -> list[Attempt]:
        if not self._holds(key) or not self._table(create=False):
            return []
        rows = self._rows(
            "read", f"SELECT {COLUMNS} FROM ledger_attempts WHERE key = ? ORDER BY n", (key,)
        )
        return [_attempt(key, row) for row in rows]

    def read_output(self, key: str, n: int, start: int = 0) -> bytes:
        if not self._holds(key) or not self._table(create=False):
            return b""
        rows = self._rows(
            "read",
            "SELECT substr(output, CAST(? AS INTEGER)) FROM ledger_attempts"
            " WHERE key = ? AND n = ?",
            (start + 1, key, n),
        )
        if not rows or rows[0][0] is None:
            return b""
        return bytes(rows[0][0])

    def read_new(self, key: str, n: int, seen: int) -> tuple[Attempt | None, bytes]:
        if not self._holds(key) or not self._table(create=False):
            return None, b""
        start = (
            f"{self.greatest}(kept_bytes - {self.greatest}(output_bytes - CAST(? AS BIGINT), 0),"
            " 0) + 1"
        )
        rows = self._rows(
            "read",
            f"SELECT {COLUMNS}, substr(output, CAST({start} AS INTEGER)) FROM ledger_attempts"
            " WHERE key = ? AND n = ?",
            (seen, key, n),
        )
        if not rows:
            return None, b""
        return _attempt(key, rows[0]), bytes(rows[0][13] or b"")

    def remove_attempts(self, keys: Iterable[str]) -> int:
        wanted = [key for key in dict.fromkeys(keys) if self._holds(key)]
        if not wanted or not self._table(create=False):
            return 0
        removed = 0
        for at in range(0, len(wanted), 500):
            part = tuple(wanted[at : at + 500])
            marks = ", ".join("?" * len(part))
            with self._tx():
                (count,) = self._rows(
                    "remove", f"SELECT count(*) FROM ledger_attempts WHERE key IN ({marks})", part
                )[0]
                self._rows("remove", f"DELETE FROM ledger_attempts WHERE key IN ({marks})", part)
            removed += int(count)
        return removed

    def attempt_keys(self) -> list[str]:
        if not self._table(create=False):
            return []
        rows = self._rows("read", "SELECT DISTINCT key FROM ledger_attempts ORDER BY key")
        return [str(row[0]) for row in rows]


def _attempt(key: str, row: Any) -> Attempt:
    """A fetched row (COLUMNS order); StoreDamageError naming the key, the
    attempt and the column when a number does not decode (a hand edit:
    SQLite's INTEGER columns take text)."""
    n = _number(key, row, 0)
    return Attempt(
        key,
        n=n,
        fence=_number(key, row, 1, n),
        try_=_number(key, row, 2, n),
        owner=str(row[3]),
        host=str(row[4]),
        pid=_number(key, row, 5, n),
        started=str(row[6]),
        ended=None if row[7] is None else str(row[7]),
        exit=None if row[8] is None else _number(key, row, 8, n),
        signal=None if row[9] is None else str(row[9]),
        timed_out=bool(row[10]),
        output_bytes=_number(key, row, 11, n),
        kept_bytes=_number(key, row, 12, n),
    )


_NAMES = COLUMNS.replace(" ", "").split(",")


def _number(key: str, row: Any, i: int, n: int | None = None) -> int:
    """Column `i` of an attempt row as a non-negative int (NUMERIC: a Decimal)."""
    number = integral(row[i])
    if number is not None and number >= 0:
        return number
    where = f"the ledger_attempts row of key {shown(key)!r}"
    if n is not None:
        where += f", attempt {n},"
    raise damaged_row(where, _NAMES[i], "not a non-negative integer", "repair or delete that row")


class SQLiteAttempts(_SqlAttempts):
    def _run(self, op: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        # The store's text recovery: a key the Go service wrote with bytes that
        # are not UTF-8 (a lone surrogate each) is bound as those bytes and read
        # back losslessly, as in ledger_tasks (utf8.py).
        rows: list[Any] = self._store._fetchall(op, sql, params)
        return rows

    def _exists(self) -> bool:
        rows = self._rows(
            "read", "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_attempts'"
        )
        return bool(rows)


class PostgresAttempts(_SqlAttempts):
    mark = "%s"
    greatest = "GREATEST"
    ddl = PG_DDL

    def _exists(self) -> bool:
        rows = self._rows("read", "SELECT to_regclass('ledger_attempts') IS NOT NULL")
        return bool(rows and rows[0][0])

    def _create(self) -> None:
        from ledger_cli.stores.sql.postgres_schema import SETUP_LOCK  # openers serialise DDL

        self._rows("create", "SELECT pg_advisory_xact_lock(?)", (SETUP_LOCK,))
        self._rows("create", self.ddl)

    def _lock_key(self, key: str) -> None:
        self._rows("start", "SELECT pg_advisory_xact_lock(?, hashtext(?))", (_PG_ATTEMPT_LOCK, key))

    def _bool(self, value: bool) -> Any:
        return bool(value)
