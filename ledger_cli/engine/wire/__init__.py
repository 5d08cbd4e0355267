"""The wire format of records and snapshots (docs/design.md §2.10).

Encoding is byte-identical to Go's `json.Marshal` of `Snapshot{Tasks
[]TaskState}`; decoding emulates Go's `json.Unmarshal` into that struct,
quirks included. By direction: `encode` (`record_to_json`, `encode_snapshot`,
`record_to_obj`, `FIELD_NAMES`) and `decode` (`record_from_raw`,
`record_from_json`, `decode_snapshot`), each module's docstring saying what
Go does; every public name is importable from here.
"""

from __future__ import annotations

from ledger_cli.engine.wire.decode import decode_snapshot, record_from_json, record_from_raw
from ledger_cli.engine.wire.encode import (
    FIELD_NAMES,
    encode_snapshot,
    record_to_json,
    record_to_obj,
)

__all__ = [
    "FIELD_NAMES",
    "decode_snapshot",
    "encode_snapshot",
    "record_from_json",
    "record_from_raw",
    "record_to_json",
    "record_to_obj",
]
