"""journal.json: the commit point of a large batch (a small one's is a wal.log frame).

The bytes below are also what a wal.log frame holds (`encode`; wal.py): a
small batch (at most apply.SYNC_EACH_MAX records) is one frame, made durable
by one fdatasync(2), and applied unsynced. A large batch, or any batch where
the log is not used, first checkpoints the log, then goes as follows.

When the outermost batch exits, the journal (all records and history lines,
the tally counts after them: tally.py, the attempt files written in the
batch: attemptfiles.py, after the lines, then its side files: a key's queue
or schedule, keyfiles.py) is written, fsynced and renamed
into place — the commit point — then applied to the record files, made
durable, and removed. A journal found later (a crash during apply) is
replayed first thing under the lock. A journal that does not parse is
refused: nothing is overwritten.

The removal is not fsynced: a journal that a power cut brings back would be
replayed over later writes, so every write that goes without a journal (one
file) fsyncs the root directory first (`commit`), which makes the removal
durable; a later journal replaces the old one by a rename that is made
durable before anything is applied. So a commit costs two fsyncs (the
journal, the root directory) and the apply's (one syncfs(2), or an fsync a
file and directory: apply.py).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import (
    depsindex,
    derived,
    fsutil,
    historyfile,
    readyindex,
    tally,
    wal,
)
from ledger_cli.stores.jsonfile.apply import SYNC_EACH_MAX
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.keyfiles import SIDE_DIRS
from ledger_cli.stores.jsonfile.layout import JOURNAL_NAME, shown
from ledger_cli.stores.jsonfile.locking import PendingBatch
from ledger_cli.stores.jsonfile.records import decode_record_file, key_digest
from ledger_cli.stores.jsonfile.tally import Counts

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ledger_cli.stores.jsonfile.apply import Durability
    from ledger_cli.stores.jsonfile.attemptfiles import Op
    from ledger_cli.stores.jsonfile.keyfiles import SideOp

    # Apply (records, history lines, history size before them, the tally counts
    # after them or None: unchanged, journalled, attempt files, the records whose
    # tally membership changes or None: unknown, all, side files), durably.
    WriteRecords = Callable[
        [
            dict[str, tuple[TaskState, bytes]],
            list[bytes],
            "int | None",
            "Counts | None",
            "Durability",
            "list[Op]",
            "set[str] | None",
            "list[SideOp]",
        ],
        None,
    ]

_UNKNOWN: Any = object()

JOURNAL_VERSION = 1
ATTEMPTS_VERSION = 2
"""A journal that carries attempt files (after its lines, their bytes: the
header lists each one's key digest, n and length; null: a removal). An
older release refuses it (corrupt header) rather than lose them."""
SIDES_VERSION = 3
"""A journal that carries side files (a key's queue or schedule, keyfiles.py),
after everything else, their bytes: the header's "sides" lists each one's
directory, key and length (null: a removal). An older release refuses it."""
JOURNAL_FORMAT = "ledger_cli.journal"


def commit(
    root: str, root_fd: int, batch: PendingBatch, write: WriteRecords, counts: Counts | None = None
) -> None:
    """Commit a batch; `counts`: the tally after it (None: the batch changes no count).

    A small batch is one frame of wal.log: one fdatasync(2), then applied
    unsynced (wal.py). A large one, or any where the log is not used, goes
    through journal.json, after a checkpoint empties the log."""
    records = batch.records
    sides = batch.side_ops()
    small = len(records) <= SYNC_EACH_MAX
    if small and wal.enabled():
        history_at = _history_size(root, root_fd, batch)
        end, frame = wal.append(root, root_fd, encode(batch, history_at, counts))  # commit point
        apply_healing(
            root,
            root_fd,
            counts,
            batch.moved,
            lambda c, m: write(
                records, batch.history, history_at, c, "log", batch.attempts, m, sides
            ),
        )
        wal.mark_applied(root, root_fd, end, frame)
        if end > wal.CHECKPOINT_BYTES:
            wal.checkpoint(root, root_fd)
        return
    wal.checkpoint(root, root_fd)  # a frame replayed after this write could undo it
    if len(records) <= 1 and counts is None and not (batch.history or batch.attempts or sides):
        # One record file: atomic by itself. (A history line always goes through
        # the journal: only its replay may cut a torn line, historyfile.py.)
        # The root directory first: the last journal's removal is durable.
        fsutil.fsync_fd(root_fd, root)
        write(records, batch.history, None, None, "now", [], None, [])
        return
    history_at = _history_size(root, root_fd, batch)
    journal = encode(batch, history_at, counts)
    fsutil.replace_file(root_fd, JOURNAL_NAME, journal, shown(root, JOURNAL_NAME), sync=True)
    fsutil.fsync_fd(root_fd, root)  # the commit point
    apply_healing(
        root,
        root_fd,
        counts,
        batch.moved,
        lambda c, m: write(records, batch.history, history_at, c, "end", batch.attempts, m, sides),
    )
    fsutil.unlink_quiet(root_fd, JOURNAL_NAME)  # not fsynced: see the module's note


def _history_size(root: str, root_fd: int, batch: PendingBatch) -> int | None:
    """history.jsonl's size before the batch's lines (None: it has none)."""
    if not batch.history:
        return None
    fd, size = historyfile.open_for_append(root, root_fd)  # refuses a torn tail
    os.close(fd)
    return size


def encode(batch: PendingBatch, history_at: int | None, counts: Counts | None) -> bytes:
    """A batch as journal.json (and a wal.log frame) holds it: a header line,
    the records, the history lines, then the attempt files' bytes, then the
    side files'."""
    records = batch.records
    header = {
        "format": JOURNAL_FORMAT,
        "version": JOURNAL_VERSION,
        "records": len(records),
        "history": len(batch.history),
        "history_at": history_at,
        "counts": counts,
    }
    if batch.attempts:  # after the lines, their bytes (any bytes: output)
        header["version"] = ATTEMPTS_VERSION
        header["attempts"] = [
            [digest, n, None if data is None else len(data)] for digest, n, data in batch.attempts
        ]
    sides = batch.side_ops()
    if sides:  # last of all, their bytes
        header["version"] = SIDES_VERSION
        header["sides"] = [[d, key, None if data is None else len(data)] for d, key, data in sides]
    return b"".join(
        [
            (json.dumps(header) + "\n").encode("utf-8"),
            *(data for _, data in records.values()),
            *batch.history,
            *(data for _, _, data in batch.attempts if data is not None),
            *(data for _, _, data in sides if data is not None),
        ]
    )


def replay(root: str, root_fd: int, journal: bytes, checksummed: bool, write: WriteRecords) -> None:
    """Finish a batch that a crash interrupted after its commit point."""
    apply_again(root, root_fd, journal, checksummed, write, JOURNAL_NAME, "end")
    fsutil.unlink_quiet(root_fd, JOURNAL_NAME)  # not fsynced: see the module's note


def decode_records(
    root: str, journal: bytes, checksummed: bool, name: str
) -> dict[str, tuple[TaskState, bytes]]:
    """The records of a journal or log frame, by digest (its header checked)."""
    return _decode(root, journal, checksummed, name)[0]


def _decode(
    root: str, journal: bytes, checksummed: bool, name: str
) -> tuple[
    dict[str, tuple[TaskState, bytes]], list[bytes], int | None, Any, list[Op], list[SideOp]
]:
    """A journal or log frame (`name` says which) checked and decoded: its
    records by digest, history lines, history_at, counts (_UNKNOWN: a release
    before the tally), attempt files and side files."""
    path = shown(root, name)
    journal, sides = _sides_part(journal, path)
    journal, attempts = _attempts_part(journal, path)
    lines = journal.split(b"\n")
    if lines[-1] != b"":
        raise fail(path, "corrupt journal (no final newline); refusing to replay")
    lines.pop()
    try:
        header = json.loads(lines[0].decode("utf-8"))
        n_records, n_history = header["records"], header["history"]
        history_at = header["history_at"]
        # Journals of releases before the tally have no counts: it is rebuilt.
        counts = header.get("counts", _UNKNOWN)
        if counts is not None and counts is not _UNKNOWN:
            counts = tally.checked(counts)
            if counts is None:
                raise ValueError("damaged counts")
        ok = (
            header["format"] == JOURNAL_FORMAT
            and header["version"] in (JOURNAL_VERSION, ATTEMPTS_VERSION, SIDES_VERSION)
            and type(n_records) is int
            and type(n_history) is int
            and len(lines) == 1 + n_records + n_history
            and (history_at is None or type(history_at) is int)
        )
    except (IndexError, KeyError, TypeError, UnicodeDecodeError, ValueError):
        ok = False
    if not ok:
        raise fail(path, "corrupt journal header; refusing to replay")
    records: dict[str, tuple[TaskState, bytes]] = {}
    for line in lines[1 : 1 + n_records]:
        rec = decode_record_file(line + b"\n", path, checksummed=checksummed)
        digest = key_digest(rec.key)
        assert digest is not None
        records[digest] = (rec, line + b"\n")
    history = [line + b"\n" for line in lines[1 + n_records :]]
    return records, history, history_at, counts, attempts, sides


def apply_again(
    root: str,
    root_fd: int,
    journal: bytes,
    checksummed: bool,
    write: WriteRecords,
    name: str,
    durable: Durability,
) -> None:
    """Apply a committed journal (or log frame, `name` says which) again."""
    path = shown(root, name)
    records, history, history_at, counts, attempts, sides = _decode(
        root, journal, checksummed, name
    )
    historyfile.parse_history(b"".join(history), path)  # refuse a corrupt journal before writing
    if counts is _UNKNOWN:
        tally.invalidate(root, root_fd)
        counts = None
    # What was on disk before the batch may be gone: every record's tally
    # membership is set again (moved None).
    apply_healing(
        root,
        root_fd,
        counts,
        None,
        lambda c, m: write(records, history, history_at, c, durable, attempts, m, sides),
    )


def apply_healing(
    root: str,
    root_fd: int,
    counts: Counts | None,
    moved: set[str] | None,
    apply: Callable[[Counts | None, set[str] | None], None],
) -> None:
    """Apply a committed batch with `apply(counts, moved)`. A derived index
    found damaged on the way (IndexDamage: content, never an I/O error, which
    propagates) is marked "not built" and the apply runs again, as after a
    crash: the primary writes are idempotent, and the index is rebuilt from
    the records by the apply (ready/, deps/) or the next writer (tally/). So a
    committed batch is applied whole, never reported failed behind a derived
    file, and never wedges the store (docs/design.md §3.2)."""
    dropped: set[str] = set()
    while True:
        try:
            apply(counts, moved)
            return
        except fsutil.IndexDamage as exc:
            if exc.index in dropped:
                raise  # still damaged once marked for rebuilding: not ours to mend
            dropped.add(exc.index)
            drop_index(root, root_fd, exc.index)
            moved = None  # as after a crash: every record's tally membership set again
            if exc.index == tally.TALLY_DIR:
                counts = None  # invalidated: rebuilt from the records, these counts with them


def drop_indexes(root: str, root_fd: int) -> None:
    """Mark every derived index that a write updates "not built" (wal.recover,
    after a restart of the machine: unsynced index files may be any mix of
    old and new, so each is rebuilt from the records)."""
    for index in _INDEXES.values():
        derived.drop(root, root_fd, index)


_INDEXES = {index.dir_name: index for index in (readyindex.INDEX, depsindex.INDEX, tally.INDEX)}


def drop_index(root: str, root_fd: int, index: str) -> None:
    """Mark a derived index "not built", durably: its manifest (ready/, deps/)
    or counts (tally/) removed, which every reader and writer takes as
    "rebuild from the records" (derived.py)."""
    derived.drop(root, root_fd, _INDEXES[index])


def _attempts_part(journal: bytes, path: str) -> tuple[bytes, list[Op]]:
    """(the journal's lines, the attempt files after them: version 2)."""
    first = journal.partition(b"\n")[0]
    try:
        header = json.loads(first.decode("utf-8"))
        listed = header.get("attempts") if isinstance(header, dict) else None
        if listed is None:
            return journal, []
        ops: list[Op] = []
        size = 0
        for digest, n, length in listed:
            ok = type(digest) is str and key_digest_shaped(digest) and type(n) is int and n > 0
            if not ok or not (length is None or (type(length) is int and length > 0)):
                raise ValueError("a bad attempt entry")
            ops.append((digest, n, None if length is None else b""))
            size += length or 0
        if header.get("version") not in (ATTEMPTS_VERSION, SIDES_VERSION) or size > len(journal):
            raise ValueError("no room for the attempts")
    except (TypeError, UnicodeDecodeError, ValueError):
        raise fail(path, "corrupt journal header; refusing to replay") from None
    at = len(journal) - size
    tail = memoryview(journal)[at:]
    out: list[Op] = []
    for (digest, n, data), (_d, _n, length) in zip(ops, listed, strict=True):
        if data is not None:
            out.append((digest, n, bytes(tail[:length])))
            tail = tail[length:]
        else:
            out.append((digest, n, None))
    return journal[:at], out


def _sides_part(journal: bytes, path: str) -> tuple[bytes, list[SideOp]]:
    """(the journal but its side files, the side files at its end: version 3).
    Each must be a JSON object naming its key (keyfiles.py): a journal whose
    are not is refused before anything is written."""
    first = journal.partition(b"\n")[0]
    try:
        header = json.loads(first.decode("utf-8"))
        listed = header.get("sides") if isinstance(header, dict) else None
        if listed is None:
            return journal, []
        size = 0
        for dirname, key, length in listed:
            if dirname not in SIDE_DIRS or type(key) is not str or key_digest(key) is None:
                raise ValueError("a bad side file entry")
            if not (length is None or (type(length) is int and length > 0)):
                raise ValueError("a bad side file length")
            size += length or 0
        if header.get("version") != SIDES_VERSION or size > len(journal):
            raise ValueError("no room for the side files")
        at = len(journal) - size
        tail = memoryview(journal)[at:]
        out: list[SideOp] = []
        for dirname, key, length in listed:
            data = None
            if length is not None:
                data = bytes(tail[:length])
                tail = tail[length:]
                obj = json.loads(data)
                if type(obj) is not dict or obj.get("key") != key:
                    raise ValueError("a side file of another key")
            out.append((dirname, key, data))
    except (TypeError, UnicodeDecodeError, ValueError):
        raise fail(path, "corrupt journal header; refusing to replay") from None
    return journal[:at], out


def key_digest_shaped(name: str) -> bool:
    """A key digest as file names use it (64 lowercase hex digits)."""
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)
