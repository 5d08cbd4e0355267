"""The wire format of records and snapshots (docs/design.md §2.10).

Encoding is byte-identical to Go's `json.Marshal` of `Snapshot{Tasks
[]TaskState}`; decoding emulates Go's `json.Unmarshal` into that struct,
quirks included. By direction: `encode` (`record_to_json`, `encode_snapshot`,
`record_to_obj`, `FIELD_NAMES`) and `decode` (`record_from_raw`,
`record_from_json`, `decode_snapshot`), each module's docstring saying what
Go does. Each name is imported from its module: the package imports
neither, so a command that only writes records (the JSON store's record
files this port wrote decode through `engine/fastwire.py`) never loads the
Go-compatible decoder.
"""
