"""Row encoding shared by the SQL stores (SQLite and PostgreSQL).

The encodings are the Go `SQLiteStore`'s (docs/design.md §3.3):
- times: RFC3339Nano text in the instant's own offset, `''` for the zero time;
- `needs`: JSON text; departure 4 (docs/design.md §2.11): a nil Needs is stored as `null`
  (the Go store reads `null` back as nil, so it accepts it) and an empty one as
  `[]`, so both kinds survive a round trip. Rows written by Go carry `[]` for
  nil and read back as an empty tuple, exactly as Go reads them;
- `task`: the bytes Go's `json.Marshal` writes (`null` for nil), read back with
  the Go-style decoder (integers within 64 bits stay exact `int`s, docs/design.md
  §2.11 departure 3);
  an empty or NULL value reads as None.

Text that is not valid UTF-8 (the Go service's bytes) is handled in `utf8.py`,
whose names are re-exported here; paged reads are in `paging.py`. Nothing here
imports a database driver.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from ledger_cli.engine import gojson
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import (
    DecodeError,
    EncodeError,
    StoreDamageError,
    StoreError,
    ValidationError,
)
from ledger_cli.stores.sql.utf8 import hex_bytes as hex_bytes
from ledger_cli.stores.sql.utf8 import is_utf8 as is_utf8
from ledger_cli.stores.sql.utf8 import lossless_text as lossless_text
from ledger_cli.stores.sql.utf8 import raw_binding as raw_binding
from ledger_cli.stores.sql.utf8 import shown as shown
from ledger_cli.stores.sql.utf8 import spells_bytes as spells_bytes

UINT64_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1

# Columns in the order every SELECT of this package lists them (TaskState order).
SELECT_COLUMNS = (
    "key, status, sequence, owner, fence, lease_until, needs, blocked_by, task, rev, "
    "created_by, created_at, updated_by, updated_at"
)
T_COLUMNS = ", ".join(f"t.{c}" for c in SELECT_COLUMNS.split(", "))
"""SELECT_COLUMNS of the row aliased `t`."""
_GO_COLUMNS = (
    "key, status, sequence, owner, fence, lease_until, needs, blocked_by, task, rev, "
    "created_at, updated_at, created_by, updated_by"
)
ALL_COLUMNS = tuple(_GO_COLUMNS.split(", "))
"""Every column of the Go table, in the Go DDL's order."""

MIGRATED_COLUMNS: tuple[str, ...] = ("created_at", "updated_at", "created_by", "updated_by")
"""The columns the Go store's idempotent migration adds when they are missing."""

HISTORY_COLUMNS = "time, actor, event, key, fence, data"


def core_sql(p: str, greatest: str, returning: str = "") -> tuple[str, str, str, str]:
    """The store core's statements with placeholder `p`: load a key, insert at
    rev 0 (nothing when the key exists), the compare-and-swap update (which,
    as the Go store's, never writes created_at/created_by) and a history row;
    each write ends with `returning`. The insert's fence is raised to the
    highest its key's `ledger_history` rows show (`greatest`: the dialect's
    larger of two values), through the index by key: a row deleted by hand
    never lets its key hand out a fence again (docs/design.md §3.3)."""
    fence = (
        f"{greatest}({p}, coalesce((SELECT max(h.fence) FROM ledger_history h"
        f" WHERE h.key = {p}), 0))"
    )
    return (
        f"SELECT {SELECT_COLUMNS} FROM ledger_tasks WHERE key = {p}",
        f"INSERT INTO ledger_tasks ({_GO_COLUMNS})"
        f" VALUES ({p}, {p}, {p}, {p}, {fence}, {p}, {p}, {p}, {p}, 0, {p}, {p}, {p}, {p})"
        f" ON CONFLICT (key) DO NOTHING{returning}",
        f"UPDATE ledger_tasks SET status = {p}, sequence = {p}, owner = {p}, fence = {p},"
        f" lease_until = {p}, needs = {p}, blocked_by = {p}, task = {p}, rev = rev + 1,"
        f" updated_at = {p}, updated_by = {p}"
        f" WHERE key = {p} AND sequence = {p} AND status = {p} AND fence = {p} AND rev = {p}"
        f"{returning}",
        f"INSERT INTO ledger_history ({HISTORY_COLUMNS}) VALUES ({p}, {p}, {p}, {p}, {p}, {p})",
    )


_MARSHAL_TIME_ERROR = (
    "json: error calling MarshalJSON for type time.Time: "
    "Time.MarshalJSON: year outside of range [0,9999]"
)
"""Go's `json.Marshal` error, as engine/wire/encode.py words it for the JSON
store and `memory:`: one message on every store (not imported from there,
which the SQL stores' writes do not otherwise load)."""


# -- scalars -------------------------------------------------------------------


def encode_time(value: Instant) -> str:
    """RFC3339Nano text; the zero time is `''` (Go's SQLite encoding)."""
    return _format_time(value.unix_ns, value.offset_seconds)


@functools.lru_cache(maxsize=1024)
def _format_time(unix_ns: int, offset_seconds: int) -> str:
    # Cached by (instant, offset): one `now` is written several times per write.
    value = Instant.from_unix_ns(unix_ns, offset_seconds)
    if value.is_zero():
        return ""
    if not 0 <= value.year <= 9999:
        # Text Go's time.Parse could not read back; Go's marshal refuses it too.
        raise EncodeError(_MARSHAL_TIME_ERROR)
    if offset_seconds % 60:
        # RFC 3339 offsets have no seconds: print such an instant in UTC
        # rather than write text that parses to another instant.
        return str(value.utc())
    return str(value)


def decode_time(text: Any, key: str, column: str) -> Instant:
    """`''` (or NULL) is the zero time; anything else must be RFC 3339."""
    if text is None or text == "":
        return Instant.ZERO
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        return _parse_time(str(text))
    except ValueError as exc:
        raise corrupt(key, column, str(exc)) from None


@functools.lru_cache(maxsize=4096)
def _parse_time(text: str) -> Instant:
    # Instants are immutable, and rows repeat times (created_at == updated_at).
    return Instant.parse(text)


def encode_needs(needs: Sequence[str] | None) -> str:
    """`null` for None (departure 4), else Go's JSON array of strings."""
    if needs is None:
        return "null"
    if not needs:
        return "[]"
    if all(is_utf8(n) for n in needs):
        return gojson.encode_value(list(needs))
    return "[" + ",".join(_encode_lossless(n) for n in needs) + "]"


def _encode_lossless(text: str) -> str:
    """A JSON string literal keeping lone surrogates (a need's invalid bytes, read
    with `lossless_text`) as they are, so the column is written back byte-exactly."""
    out: list[str] = []
    run: list[str] = []
    for c in text:
        if 0xDC80 <= ord(c) <= 0xDCFF:
            if run:
                out.append(gojson.encode_string("".join(run))[1:-1])
                run = []
            out.append(c)
        else:
            run.append(c)
    if run:
        out.append(gojson.encode_string("".join(run))[1:-1])
    return '"' + "".join(out) + '"'


def decode_needs(text: Any, key: str) -> tuple[str, ...] | None:
    """`null` is None; `[]` (what Go writes for nil) is the empty tuple."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = lossless_text(text)
    if text == "[]":
        return ()
    if text == "null":
        return None
    text = str(text)
    try:
        if is_utf8(text):
            value = gojson.loads(text)
        else:
            # Invalid bytes (read as lone surrogates) name a key byte-exactly; Go's
            # decoder would turn them into U+FFFD and name another key.
            import json

            value = json.loads(text)
    except (DecodeError, ValueError) as exc:
        raise corrupt(key, "needs", str(exc)) from None
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise corrupt(key, "needs", "not a JSON array of strings")
    return tuple(value)


def encode_task(task: Any) -> bytes:
    """Go's `json.Marshal` bytes of the payload: EncodeError when Go could not,
    worded as the JSON store and `memory:` word it (`json: unsupported value: NaN`)."""
    return gojson.encode_value(task).encode("utf-8")


def decode_task(blob: Any, key: str) -> Any:
    """Empty or NULL is None; otherwise Go's generic decode (departure 3 numbers)."""
    if blob is None:
        return None
    if isinstance(blob, memoryview):
        blob = blob.tobytes()
    if len(blob) == 0:
        return None
    try:
        return gojson.loads(blob)
    except DecodeError as exc:
        raise corrupt(key, "task", str(exc)) from None


def check_uint(value: int, field: str, key: str, limit: int = UINT64_MAX) -> int:
    """A sequence, fence or rev the backend can hold, else StoreError."""
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise StoreError(f"ledger: {field} of key {key!r} must be an int")
        value = int(value)
    if not 0 <= value <= limit:
        if limit == INT64_MAX and INT64_MAX < value <= UINT64_MAX:
            raise StoreError(
                f"ledger: {field} {value} of key {key!r} does not fit SQLite's signed "
                "64-bit INTEGER (the Go SQLiteStore cannot store it either); "
                "use a PostgreSQL or JSON store for such values"
            )
        raise StoreError(f"ledger: {field} {value} of key {key!r} is outside the uint64 range")
    return value


def read_uint(value: Any, key: str, column: str) -> int:
    """An unsigned integer column as a Python int (PostgreSQL NUMERIC arrives as
    Decimal). A negative one is damage: the store writes none, nor does the Go
    service (its fields are uint64), and a compare-and-swap could never match it."""
    if type(value) is int and value >= 0:
        return value
    number = integral(value)
    if number is None:
        raise corrupt(key, column, f"{value!r} is not an integer")
    if number < 0:
        raise corrupt(key, column, f"{number} is negative")
    return number


def integral(value: Any) -> int | None:
    """A column's value as the int it is equal to (PostgreSQL NUMERIC arrives as
    Decimal), or None when it is no whole number (text, a fraction, NULL)."""
    try:
        number = int(value)
    except (TypeError, ValueError, ArithmeticError):
        return None
    return number if number == value else None


def read_text(value: Any, key: str, column: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return lossless_text(bytes(value))
    raise corrupt(key, column, f"{value!r} is not text")


def corrupt(key: str, column: str, detail: str) -> StoreError:
    return StoreError(
        f"ledger: stored record {shown(key)!r} has an unreadable {column} column ({detail}); "
        "repair that row in place (deleted, its key could be admitted again and hand out "
        "its fences a second time)"
    )


def damaged_row(row: str, column: str, detail: str, remedy: str) -> StoreDamageError:
    """A side table's row (a schedule, the pause, a limit, an attempt) whose
    `column` does not decode: named by its table and key, never by its bytes,
    with what the user can do about it (`ledger doctor` reports it too)."""
    return StoreDamageError(f"ledger: {row} has an unreadable {column} column ({detail}); {remedy}")


# -- rows ----------------------------------------------------------------------


def row_to_state(row: Sequence[Any]) -> TaskState:
    """A row in SELECT_COLUMNS order -> TaskState, which must validate (an
    unknown status, a claimed row without owner, a blocked one naming no
    BlockedBy: another writer's or a hand's damage, named by key as a row
    that does not decode, on every read path: docs/reliability.md)."""
    key = read_text(row[0], "?", "key")
    rec = TaskState(
        key=key,
        status=read_text(row[1], key, "status"),
        sequence=read_uint(row[2], key, "sequence"),
        owner=read_text(row[3], key, "owner"),
        fence=read_uint(row[4], key, "fence"),
        lease_until=decode_time(row[5], key, "lease_until"),
        needs=decode_needs(row[6], key),
        blocked_by=read_text(row[7], key, "blocked_by"),
        task=decode_task(row[8], key),
        rev=read_uint(row[9], key, "rev"),
        created_by=read_text(row[10], key, "created_by"),
        created_at=decode_time(row[11], key, "created_at"),
        updated_by=read_text(row[12], key, "updated_by"),
        updated_at=decode_time(row[13], key, "updated_at"),
    )
    try:
        rec.validate()
    except ValidationError as exc:
        raise StoreDamageError(
            f"ledger: stored record {shown(key)!r} does not validate"
            f" ({str(exc).removeprefix('ledger: ')}); repair that row in place, or restore it"
            " from a snapshot or backup"
        ) from None
    return rec


def _uint(value: int, field: str, key: str, limit: int) -> int:
    if type(value) is int and 0 <= value <= limit:
        return value
    return check_uint(value, field, key, limit)


def _written(key: str, new: TaskState, limit: int) -> tuple[Any, ...]:
    """The columns both writes set: status, sequence, owner, fence, lease_until,
    needs, blocked_by, task."""
    return (
        new.status,
        _uint(new.sequence, "sequence", key, limit),
        new.owner,
        _uint(new.fence, "fence", key, limit),
        encode_time(new.lease_until),
        encode_needs(new.needs),
        new.blocked_by,
        encode_task(new.task),
    )


def insert_params(key: str, new: TaskState, limit: int) -> tuple[Any, ...]:
    """Parameters for INSERT (key, status, sequence, owner, fence and the key
    its history is read by, lease_until, needs, blocked_by, task, rev=0,
    created_at, updated_at, created_by, updated_by)."""
    written = _written(key, new, limit)
    return (
        key,
        *written[:4],
        key,
        *written[4:],
        encode_time(new.created_at),
        encode_time(new.updated_at),
        new.created_by,
        new.updated_by,
    )


def update_params(key: str, old: TaskState, new: TaskState, limit: int) -> tuple[Any, ...]:
    """Parameters for the conditional UPDATE: SET status, sequence, owner, fence,
    lease_until, needs, blocked_by, task, updated_at, updated_by WHERE key,
    sequence, status, fence, rev."""
    return (
        *_written(key, new, limit),
        encode_time(new.updated_at),
        new.updated_by,
        key,
        old.sequence,
        old.status,
        old.fence,
        old.rev,
    )


def tuple_fits(old: TaskState, limit: int) -> bool:
    """False when `old`'s compare tuple holds a value no row can hold (no match)."""
    return all(type(v) is int and 0 <= v <= limit for v in (old.sequence, old.fence, old.rev))


def claimable_order(records: Iterable[TaskState]) -> list[TaskState]:
    """Oldest CreatedAt first, then key in UTF-8 byte order (docs/design.md §4.3 "Ready")."""
    return sorted(records, key=lambda r: (r.created_at, byte_order(r.key)))


def one_line(exc: BaseException) -> str:
    """A driver message on one line (PostgreSQL's can carry DETAIL/HINT lines)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text or type(exc).__name__
