"""Record files: `records/ab/<sha256 of the UTF-8 key>.json`, each the wire record
object with a checksum member last, `,"Sum":"<sha256>"}` + "\\n".

Checksums: a flipped bit inside a string (an owner, a task payload) still
parses as a valid record, so each record file ends with a `"Sum"` member: the
SHA-256 of the record's wire JSON (the file without that member and without
the final newline). Readers ignore unknown members, so the file stays a wire
record for Go and `jq`; the store verifies the sum on every read and refuses a
file whose sum is missing or wrong. Format version 2 requires it; the stores
of version 1 (no sums) are still read, their sums checked where present.
"""

from __future__ import annotations

import functools
import os
from hashlib import sha256 as _sha256
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState
from ledger_cli.errors import DecodeError, StoreError, ValidationError
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import RECORD_FILE, RECORDS_DIR, SHARD, listing, shown

if TYPE_CHECKING:
    from ledger_cli.engine.badrows import BadRows


@functools.lru_cache(maxsize=1024)
def key_digest(key: str) -> str | None:
    """The file-name digest of a key; None for a key that is not valid Unicode
    (a lone surrogate), which no JSON file can hold. Cached: one write asks
    for the digests of the same few keys a dozen times (its record, its
    index entries, its attempt, its queue and schedule)."""
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:
        return None
    digest: str = _sha256(raw).hexdigest()
    return digest


def need_digest(need: str) -> str:
    """The file-name digest of a need (deps/, depsindex.py): its key digest; a
    need that is not valid Unicode is hashed with its surrogates passed through
    (bytes no valid key has, so no name is shared)."""
    digest: str = _sha256(need.encode("utf-8", "surrogatepass")).hexdigest()
    return digest


def record_path(root: str, digest: str) -> str:
    return shown(root, RECORDS_DIR, digest[:2], digest + ".json")


_SUM_HEAD = b',"Sum":"'
_SUM_TAIL = b'"}\n'
_SUM_LEN = len(_SUM_HEAD) + 64 + len(_SUM_TAIL)


def encode_record(rec: TaskState) -> bytes:
    """The record file: the wire record with `,"Sum":"<sha256 of the wire record>"` last."""
    from ledger_cli.engine.wire.encode import record_to_json

    body = record_to_json(rec).encode("utf-8")
    return b"".join((body[:-1], _SUM_HEAD, _sha256(body).hexdigest().encode(), _SUM_TAIL))


def decode_record_file(
    data: bytes, shown: str, *, checksummed: bool, digest: str | None = None
) -> TaskState:
    """A record file's record: checksum verified (required when `checksummed`),
    decoded, validated, and (given the file's `digest` name) filed under its key.
    StoreError naming `shown` otherwise."""
    summed: bool | None = None  # None: no checksum member
    tail = len(data) - _SUM_LEN
    if tail > 0 and data[tail : tail + len(_SUM_HEAD)] == _SUM_HEAD and data.endswith(_SUM_TAIL):
        body = data[:tail] + b"}"
        summed = _sha256(body).hexdigest().encode() == data[tail + len(_SUM_HEAD) : -len(_SUM_TAIL)]
        data = body
    rec = _decode(data, shown, fast=summed is True)  # a decoding error says more than a bad sum
    if summed is False:
        raise fail(shown, "corrupt record: checksum mismatch (the file was damaged or edited)")
    if summed is None and checksummed:
        raise fail(
            shown,
            "corrupt record: no checksum where the store writes it, at the file's very end "
            "(the file is damaged, or was edited: an editor's final newline moves it)",
        )
    if digest is not None and key_digest(rec.key) != digest:
        raise fail(shown, f"holds key {rec.key!r}, which belongs elsewhere")
    return rec


def _decode(data: bytes, shown: str, *, fast: bool) -> TaskState:
    """`fast`: the checksum matched, so this store wrote the record itself
    (engine/fastwire.py decodes it with the C scanner, the same record)."""
    from ledger_cli.engine.fastwire import record_from_canonical

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(shown, "corrupt record: not valid UTF-8") from None
    try:
        if fast:
            rec = record_from_canonical(text, from_utf8=True)
        else:  # no checksum of ours: the Go-compatible decoder
            from ledger_cli.engine.wire.decode import record_from_json

            rec = record_from_json(text)
    except DecodeError as exc:  # (the line's `ledger:` prefix once: fail's)
        raise fail(shown, f"corrupt record: {str(exc).removeprefix('ledger: ')}") from None
    try:
        rec.validate()
    except ValidationError as exc:
        raise fail(shown, f"invalid record: {str(exc).removeprefix('ledger: ')}") from None
    return rec


def scan_records(
    root: str,
    root_fd: int,
    *,
    checksummed: bool,
    sweep: bool,
    bad: BadRows | None = None,
) -> dict[str, TaskState]:
    """Every record file's record by digest (`sweep`: remove temporary files, under
    the lock); given `bad`, a file that does not decode is noted there and left
    out (docs/design.md §5.5), else it raises."""
    found: dict[str, TaskState] = {}
    with listing(root, root_fd, RECORDS_DIR) as rfd:
        if rfd is None:
            return found
        for shard in sorted(os.listdir(rfd)):
            if not SHARD.matches(shard):
                if sweep and shard.endswith(fsutil.TEMP_SUFFIX):
                    fsutil.unlink_quiet(rfd, shard)
                continue
            sfd = fsutil.open_subdir(rfd, shard, shown(root, RECORDS_DIR, shard), create=False)
            if sfd is None:
                continue
            prefix = shown(root, RECORDS_DIR, shard) + os.sep
            try:
                for fname in os.listdir(sfd):
                    if fname.endswith(fsutil.TEMP_SUFFIX):
                        if sweep:  # under the lock: its writer is gone
                            fsutil.unlink_quiet(sfd, fname)
                        continue
                    if not RECORD_FILE.matches(fname):
                        continue
                    path = prefix + fname  # shown(root, RECORDS_DIR, shard, fname)
                    data = fsutil.read_file(sfd, fname, path)
                    if data is None:
                        continue
                    digest = fname[:-5]
                    try:
                        found[digest] = decode_record_file(
                            data, path, checksummed=checksummed, digest=digest
                        )
                    except StoreError as exc:
                        if bad is None:
                            raise
                        bad.note(path, exc)
            finally:
                os.close(sfd)
    return found
