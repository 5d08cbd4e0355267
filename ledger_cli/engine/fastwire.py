"""A fast decoder for wire records this port encoded itself (`record_to_json`).

The Go-compatible decoder (`wire.decode.record_from_json`, over `gojson.parse`)
keeps every quirk of Go's `json.Unmarshal`: case-folded field names, duplicate
fields decoded into the value already there, numbers kept as literal text
until their Go type is known. A record that `record_to_json` wrote has none
of that: the 14 fields once each in wire order, exact names, unsigned
integers as plain digits, times as unescaped RFC 3339 strings, Needs null or
an array of strings, Task as `gojson.encode_value` writes it. The JSON store
knows a record file is such a record when its SHA-256 "Sum" matches
(stores/jsonfile/records.py), and decodes it here with the C `json` scanner.

Exactness (docs/design.md §2.11, departure 3) holds the same way on both paths: an integer
literal within 64 bits (INT64_MIN..UINT64_MAX) is an exact `int`, `-0` is
-0.0, every other number a float64 (Python's and Go's float parsing are both
correctly rounded). Anything this path does not recognise as the canonical
shape — an escape the C scanner decodes differently from Go (`gojson`'s
NEEDS_SLOW), nesting deeper than the C scanner goes, a field missing, extra,
renamed, out of order or of another type — goes to the Go-compatible
decoder, so the result is the same record either way
(tests/engine/test_fastwire.py compares the two on random records).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from ledger_cli.engine import gojson
from ledger_cli.engine.instant import Instant, parse_printed
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.wire.encode import FIELD_NAMES

if TYPE_CHECKING:
    from typing import Any

_UINT64_MAX = gojson.UINT64_MAX
_FIELDS = list(FIELD_NAMES)
_ZERO = Instant.ZERO
_ZERO_TEXT = str(Instant.ZERO)


class _Foreign(Exception):
    """Not the canonical shape: decode the Go way."""


def _constant(name: str) -> Any:
    raise _Foreign


# A number out of float64 range raises NumberRangeError: the slow path words Go's error.
_DECODE = json.JSONDecoder(
    parse_int=gojson.literal_value, parse_float=gojson.literal_value, parse_constant=_constant
).decode
_NEEDS_SLOW = gojson.NEEDS_SLOW  # the same rule, one definition


def _uint(v: object) -> bool:
    return type(v) is int and 0 <= v <= _UINT64_MAX


def record_from_canonical(text: str, *, from_utf8: bool = False) -> TaskState:
    """Decode one wire record (no validation); the same TaskState as
    `wire.decode.record_from_json(text)` for every input, fast for canonical ones.
    `from_utf8`: `text` was decoded from valid UTF-8, so it holds no raw
    surrogate, and only a `\\u` escape can need the Go way."""
    plain = "\\u" not in text and (from_utf8 or text.isascii())
    if plain or re.search(_NEEDS_SLOW, text) is None:
        try:
            obj = _DECODE(text)
        except (_Foreign, gojson.NumberRangeError, RecursionError, ValueError):
            obj = None
        if type(obj) is dict and list(obj) == _FIELDS:
            rec = _build(obj)
            if rec is not None:
                return rec
    from ledger_cli.engine.wire.decode import record_from_json  # not canonical: the Go way

    return record_from_json(text)


def _build(obj: dict[str, Any]) -> TaskState | None:
    key = obj["Key"]
    status = obj["Status"]
    owner = obj["Owner"]
    blocked_by = obj["BlockedBy"]
    created_by = obj["CreatedBy"]
    updated_by = obj["UpdatedBy"]
    for s in (key, status, owner, blocked_by, created_by, updated_by):
        if type(s) is not str:
            return None
    sequence, fence, rev = obj["Sequence"], obj["Fence"], obj["Rev"]
    if not (_uint(sequence) and _uint(fence) and _uint(rev)):
        return None
    needs = obj["Needs"]
    if needs is not None:
        if type(needs) is not list:
            return None
        for need in needs:
            if type(need) is not str:
                return None
        needs = tuple(needs)
    lease, created, updated = obj["LeaseUntil"], obj["CreatedAt"], obj["UpdatedAt"]
    if type(lease) is not str or type(created) is not str or type(updated) is not str:
        return None
    try:
        # A record's times repeat: no lease yet, or updated when created.
        lease_until = _ZERO if lease == _ZERO_TEXT else parse_printed(lease)
        created_at = parse_printed(created)
        updated_at = created_at if updated == created else parse_printed(updated)
    except ValueError:
        return None  # the slow path words the error as Go does
    return TaskState(
        key=key,
        status=status,
        sequence=sequence,
        owner=owner,
        fence=fence,
        lease_until=lease_until,
        needs=needs,
        blocked_by=blocked_by,
        task=obj["Task"],
        rev=rev,
        created_by=created_by,
        created_at=created_at,
        updated_by=updated_by,
        updated_at=updated_at,
    )
