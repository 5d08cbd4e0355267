"""Encoding: a record or snapshot as Go's `json.Marshal` writes it, byte for byte.

`Snapshot{Tasks []TaskState}` (no struct tags): compact, the 14 record keys
in field order (`FIELD_NAMES`), unsigned integers as digits, times in
RFC3339Nano (a year outside 0-9999 is Go's MarshalJSON error), Task through
`gojson.encode_value`. `record_to_obj` is the same record as a dict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine import gojson
from ledger_cli.engine.gojson import UINT64_MAX, encode_string
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import whole_number
from ledger_cli.errors import EncodeError

if TYPE_CHECKING:
    from typing import Any

    from ledger_cli.engine.record import TaskState

FIELD_NAMES: tuple[str, ...] = (
    "Key",
    "Status",
    "Sequence",
    "Owner",
    "Fence",
    "LeaseUntil",
    "Needs",
    "BlockedBy",
    "Task",
    "Rev",
    "CreatedBy",
    "CreatedAt",
    "UpdatedBy",
    "UpdatedAt",
)
"""The record keys in wire order (docs/design.md §2.1)."""

_MARSHAL_TIME_ERROR = (
    "json: error calling MarshalJSON for type time.Time: "
    "Time.MarshalJSON: year outside of range [0,9999]"
)


def _enc_str(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise EncodeError(f"ledger: {field} must be a string, not {type(value).__name__}")
    return encode_string(value)


def _enc_uint(value: object, field: str) -> str:
    return str(whole_number(value, field, 0, UINT64_MAX, "the uint64 range", EncodeError))


def _enc_time(value: object, field: str) -> str:
    if type(value) is not Instant:
        try:
            value = Instant.coerce(value)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise EncodeError(f"ledger: {field}: {exc}") from None
    text = str(value)  # cached on the Instant
    # Years 0..9999 print as exactly four digits; others as "-0001", "10000".
    if text[4] != "-" or text[0] == "-":
        raise EncodeError(_MARSHAL_TIME_ERROR)
    return '"' + text + '"'


def _enc_needs(value: object) -> str:
    if value is None:
        return "null"
    if not isinstance(value, (tuple, list)):
        raise EncodeError(f"ledger: Needs must be a tuple or None, not {type(value).__name__}")
    return "[" + ",".join(_enc_str(k, "Needs entry") for k in value) + "]"


def record_to_json(rec: TaskState) -> str:
    """One record as Go marshals a TaskState: 14 keys, compact, field order."""
    s, u, t = _enc_str, _enc_uint, _enc_time  # short, so that a line holds two fields
    return (
        f'{{"Key":{s(rec.key, "Key")},"Status":{s(rec.status, "Status")}'
        f',"Sequence":{u(rec.sequence, "Sequence")},"Owner":{s(rec.owner, "Owner")}'
        f',"Fence":{u(rec.fence, "Fence")},"LeaseUntil":{t(rec.lease_until, "LeaseUntil")}'
        f',"Needs":{_enc_needs(rec.needs)},"BlockedBy":{s(rec.blocked_by, "BlockedBy")}'
        f',"Task":{gojson.encode_value(rec.task)},"Rev":{u(rec.rev, "Rev")}'
        f',"CreatedBy":{s(rec.created_by, "CreatedBy")}'
        f',"CreatedAt":{t(rec.created_at, "CreatedAt")}'
        f',"UpdatedBy":{s(rec.updated_by, "UpdatedBy")}'
        f',"UpdatedAt":{t(rec.updated_at, "UpdatedAt")}}}'
    )


def encode_snapshot(tasks: tuple[TaskState, ...] | list[TaskState] | None) -> bytes:
    """`{"Tasks":null}` for None, else `{"Tasks":[rec,...]}`; UTF-8, no newline."""
    if tasks is None:
        return b'{"Tasks":null}'
    body = ",".join(record_to_json(rec) for rec in tasks)
    return ('{"Tasks":[' + body + "]}").encode("utf-8")


def record_to_obj(rec: TaskState) -> dict[str, Any]:
    """The wire record as a dict: the 14 keys in order, times as RFC3339Nano
    strings, Needs a list or None, Task the generic value (not copied).

    For JSON output prefer `record_to_json`, which formats exactly as Go does.
    """
    return {
        "Key": rec.key,
        "Status": str(rec.status),
        "Sequence": rec.sequence,
        "Owner": rec.owner,
        "Fence": rec.fence,
        "LeaseUntil": str(rec.lease_until),
        "Needs": None if rec.needs is None else list(rec.needs),
        "BlockedBy": rec.blocked_by,
        "Task": rec.task,
        "Rev": rec.rev,
        "CreatedBy": rec.created_by,
        "CreatedAt": str(rec.created_at),
        "UpdatedBy": rec.updated_by,
        "UpdatedAt": str(rec.updated_at),
    }
