"""Decoding: Go's `json.Unmarshal` of a record or snapshot, quirks included.

- field names match case-insensitively (Go's fold: ASCII case, plus the
  Kelvin sign for k and the long s for s); unknown fields are ignored;
- a repeated field decodes again *into the same value*: a string, number or
  time field takes the last value, but a JSON `null` leaves it alone; an
  array decodes element by element into the slice already there (so a
  repeated `Tasks` merges into the earlier records, and `null` elements keep
  what was there), with the slice growth of Go 1.19 (which recorded the
  conformance traces) deciding which stale elements a longer array exposes;
- type errors are remembered and decoding goes on; the first is reported at
  the end, unless a time field fails first (that aborts at once);
- time fields get the raw JSON text, so only an unescaped JSON string that
  `Instant.parse` accepts is a time.
Every failure is a DecodeError starting `ledger: decode: `. Nothing here
validates records; `Snapshot.decode` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine import gojson
from ledger_cli.engine.gojson import UINT64_MAX, EscapedStr, Number, RawObject
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState, go_quote
from ledger_cli.engine.wire.encode import FIELD_NAMES
from ledger_cli.errors import DecodeError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


_KEY, _STATUS, _SEQUENCE, _OWNER, _FENCE, _LEASE_UNTIL, _NEEDS = range(7)
_BLOCKED_BY, _TASK, _REV, _CREATED_BY, _CREATED_AT, _UPDATED_BY, _UPDATED_AT = range(7, 14)

_STRING_FIELDS = frozenset({_KEY, _STATUS, _OWNER, _BLOCKED_BY, _CREATED_BY, _UPDATED_BY})
_UINT_FIELDS = frozenset({_SEQUENCE, _FENCE, _REV})
_TIME_FIELDS = frozenset({_LEASE_UNTIL, _CREATED_AT, _UPDATED_AT})

_GO_TYPES = (
    "ledger.IdempotencyKey",
    "machine.Status",
    "ledger.Sequence",
    "ledger.OwnerID",
    "ledger.FenceToken",
    "time.Time",
    "[]ledger.IdempotencyKey",
    "ledger.IdempotencyKey",
    "interface {}",
    "uint64",
    "ledger.Actor",
    "time.Time",
    "ledger.Actor",
    "time.Time",
)

_EXACT: dict[str, int] = {name: i for i, name in enumerate(FIELD_NAMES)}
_FOLDED: dict[str, int] = {name.upper(): i for i, name in enumerate(FIELD_NAMES)}


def _field_index(key: str, exact: dict[str, int], folded: dict[str, int]) -> int | None:
    """Go's field lookup: exact name, else its case fold (bytes.EqualFold)."""
    idx = exact.get(key)
    if idx is not None:
        return idx
    if not key.isascii():
        # The only non-ASCII runes that fold to ASCII letters: KELVIN SIGN (k)
        # and LATIN SMALL LETTER LONG S (s). Field names are ASCII.
        key = key.replace("\u212a", "K").replace("\u017f", "S")
        if not key.isascii():
            return None
    return folded.get(key.upper())


def _kind(raw: Any) -> str:
    """Go's UnmarshalTypeError.Value for a raw node."""
    if isinstance(raw, str):
        return "string"
    if isinstance(raw, bool):
        return "bool"
    if isinstance(raw, Number):
        return "number"
    if isinstance(raw, RawObject):
        return "object"
    if isinstance(raw, list):
        return "array"
    return "null"


class _GoSlice:
    """A Go slice header: a backing array (its length is the capacity) and a length.

    A `None` slot in the backing array is the element type's zero value.
    """

    __slots__ = ("backing", "length")

    def __init__(self, backing: list[Any], length: int) -> None:
        self.backing = backing
        self.length = length

    def items(self) -> list[Any]:
        return self.backing[: self.length]


class _Decoder:
    """One Unmarshal: remembers the first type error, as Go's decodeState does."""

    def __init__(self, path: str) -> None:
        self.first_error: str | None = None
        self.path = path  # "Tasks." inside a snapshot, "" for a lone record

    def type_error(self, value: str, where: str, go_type: str) -> None:
        if self.first_error is None:
            self.first_error = f"json: cannot unmarshal {value} into {where} of type {go_type}"

    def finish(self) -> None:
        if self.first_error is not None:
            raise DecodeError("ledger: decode: " + self.first_error)

    # -- slices ----------------------------------------------------------------

    def array_into(
        self,
        current: _GoSlice | None,
        items: list[Any],
        decode_elem: Callable[[Any, Any], Any],
    ) -> _GoSlice:
        """Go's decodeState.array into a slice (Go 1.19 growth policy)."""
        if current is None:
            backing: list[Any] = []
            length = 0
        else:
            backing, length = current.backing, current.length
        i = 0
        for item in items:
            if i >= len(backing):
                cap = len(backing)
                newcap = max(cap + cap // 2, 4)
                backing = backing[:length] + [None] * (newcap - length)
            if i >= length:
                length = i + 1
            backing[i] = decode_elem(backing[i], item)
            i += 1
        if i == 0:
            return _GoSlice([], 0)
        return _GoSlice(backing, i)  # Go: SetLen(i) when fewer elements came

    # -- records -----------------------------------------------------------------

    def record_into(self, fields: list[Any] | None, raw: Any, where: str) -> list[Any] | None:
        """Decode a JSON value into a TaskState (a field list; None = zero value)."""
        if raw is None:
            return fields  # null into a struct: no-op
        if type(raw) is not RawObject:
            self.type_error(_kind(raw), where, "ledger.TaskState")
            return fields
        if fields is None:
            fields = _zero_fields()
        for key, value in raw.pairs:
            idx = _field_index(key, _EXACT, _FOLDED)
            if idx is not None:
                self.field_into(fields, idx, value)
        return fields

    def field_into(self, fields: list[Any], idx: int, raw: Any) -> None:
        where = f"Go struct field TaskState.{self.path}{FIELD_NAMES[idx]}"
        if idx in _STRING_FIELDS:
            if isinstance(raw, str):
                fields[idx] = str(raw)
            elif raw is not None:
                self.type_error(_kind(raw), where, _GO_TYPES[idx])
        elif idx in _UINT_FIELDS:
            if type(raw) is Number:
                lit = raw.literal
                if lit.isdigit() and lit.isascii() and len(lit) <= 20 and int(lit) <= UINT64_MAX:
                    fields[idx] = int(lit)
                else:
                    self.type_error("number " + lit, where, _GO_TYPES[idx])
            elif raw is not None:
                self.type_error(_kind(raw), where, _GO_TYPES[idx])
        elif idx in _TIME_FIELDS:
            if raw is None:
                return  # time.Time.UnmarshalJSON("null") is a no-op
            fields[idx] = _decode_time(raw)
        elif idx == _NEEDS:
            if raw is None:
                fields[idx] = None
            elif type(raw) is list:
                fields[idx] = self.array_into(fields[idx], raw, self.need_elem)
            else:
                self.type_error(_kind(raw), where, _GO_TYPES[idx])
        else:  # Task
            try:
                fields[idx] = gojson.to_task_value(raw)
            except gojson.NumberRangeError as exc:
                # A number out of float64 range: Go saves the error and goes on.
                self.type_error("number " + exc.literal, where, "float64")

    def need_elem(self, current: str | None, raw: Any) -> str | None:
        if isinstance(raw, str):
            return str(raw)
        if raw is not None:
            self.type_error(
                _kind(raw),
                f"Go struct field TaskState.{self.path}Needs",
                "ledger.IdempotencyKey",
            )
        return current


def _zero_fields() -> list[Any]:
    return [
        "",
        "",
        0,
        "",
        0,
        Instant.ZERO,
        None,
        "",
        None,
        0,
        "",
        Instant.ZERO,
        "",
        Instant.ZERO,
    ]


def _decode_time(raw: Any) -> Instant:
    """time.Time.UnmarshalJSON: the raw JSON text must be a quoted RFC 3339 time."""
    layout = '"\\"2006-01-02T15:04:05Z07:00\\""'
    if type(raw) is str:
        try:
            return Instant.parse(raw)
        except ValueError:
            raise DecodeError(
                f"ledger: decode: parsing time {go_quote(chr(34) + raw + chr(34))} as {layout}: "
                "not an RFC 3339 time"
            ) from None
    if type(raw) is EscapedStr:
        raise DecodeError(
            f"ledger: decode: parsing time {go_quote(str(raw))} as {layout}: "
            "escape sequences are not allowed in a time"
        )
    raise DecodeError("ledger: decode: Time.UnmarshalJSON: input is not a JSON string")


def _build(fields: list[Any] | None) -> TaskState:
    if fields is None:
        return TaskState()
    needs = fields[_NEEDS]
    if needs is not None:
        # `fields` is this record's own list (`_zero_fields`), in TaskState's order.
        fields[_NEEDS] = tuple("" if k is None else k for k in needs.items())
    return TaskState._make(fields)


def record_from_raw(raw: Any) -> TaskState:
    """Go's `json.Unmarshal` of a raw tree (see `gojson.parse`) into a fresh TaskState.

    `null` gives the zero TaskState. No validation.
    """
    dec = _Decoder("")
    if raw is not None and type(raw) is not RawObject:
        raise DecodeError(
            f"ledger: decode: json: cannot unmarshal {_kind(raw)} "
            "into Go value of type ledger.TaskState"
        )
    fields = dec.record_into(None, raw, "Go value")
    dec.finish()
    return _build(fields)


def record_from_json(data: bytes | str) -> TaskState:
    """Decode one wire record object (the file store's format). No validation."""
    return record_from_raw(gojson.parse(data))


_SNAPSHOT_EXACT = {"Tasks": 0}
_SNAPSHOT_FOLDED = {"TASKS": 0}


def decode_snapshot(data: bytes | str) -> tuple[TaskState, ...] | None:
    """Go's `json.Unmarshal` into `Snapshot{Tasks []TaskState}`; the Tasks value.

    None for a nil Tasks (top-level `null`, a missing or `null` Tasks).
    Records come back in input order, duplicates kept, NOT validated.
    """
    raw = gojson.parse(data)
    if raw is None:
        return None
    if type(raw) is not RawObject:
        raise DecodeError(
            f"ledger: decode: json: cannot unmarshal {_kind(raw)} "
            "into Go value of type ledger.Snapshot"
        )
    dec = _Decoder("Tasks.")
    tasks: _GoSlice | None = None
    where = "Go struct field Snapshot.Tasks"

    def task_elem(current: list[Any] | None, item: Any) -> list[Any] | None:
        return dec.record_into(current, item, where)

    for key, value in raw.pairs:
        if _field_index(key, _SNAPSHOT_EXACT, _SNAPSHOT_FOLDED) is None:
            continue
        if value is None:
            tasks = None
        elif type(value) is list:
            tasks = dec.array_into(tasks, value, task_elem)
        else:
            dec.type_error(_kind(value), where, "[]ledger.TaskState")
    dec.finish()
    if tasks is None:
        return None
    return tuple(_build(fields) for fields in tasks.items())
