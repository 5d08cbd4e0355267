"""`ledger doctor`'s walk of a JSON store's directory, without the store lock:
modes wider than 0600 (directories: 0700), symlinks, FIFOs and the like,
temporary files left by a crash, and every record file read once and checked
as the store reads it, so that every bad record is named, not just the first.

A record file is replaced atomically (written aside, renamed over), so each
one read is whole: a record checked here is a state some writer committed.
The records of the files the store's own scan reads (records/<shard>/<digest>.json)
are handed to the store for its index checks' first pass (`seen_files`),
which then reads no record file again unless it finds a problem."""

from __future__ import annotations

import contextlib
import os
import stat
from typing import TYPE_CHECKING, Any, NamedTuple

from ledger_cli.cli import output
from ledger_cli.errors import LedgerError

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.engine.record import TaskState

TEMP_SUFFIX = ".tmp"
RECORDS_DIR = "records"
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class RecordFile(NamedTuple):
    path: str
    data: bytes
    scanned: bool
    """One of the files the store's scan reads (named by its key's digest in a shard)."""


class Walked(NamedTuple):
    temps: list[str]
    """Temporary files (a crash's leftovers, or a writer's under way)."""
    files: list[RecordFile]
    all_read: bool
    """Whether every record file found was read (none a symlink, FIFO, unreadable)."""
    listed: bool
    """Whether `records/` was walked: a directory (not a file, not a symlink)
    that, with the directories in it and above it, could be listed. If not,
    doctor counts no records: it read none, or not all."""


class Checked(NamedTuple):
    records: list[TaskState]
    """The records of the files that passed every check."""
    scanned: dict[str, TaskState] | None
    """The scanned files' records by digest; None when a file failed a check."""
    damaged: list[tuple[RecordFile, str]]
    """The files that failed a check, each with the problem reported."""


def read_regular(path: str) -> bytes:
    """A file's bytes, never through a symlink nor blocking on a FIFO swapped in."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def _read_record(path: str, scanned: bool, found: Findings, out: list[RecordFile]) -> bool:
    """One open (never through a symlink) and fstat, not an lstat then an open:
    the walk's cost is the records'. False when the file could not be read."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return True  # removed meanwhile
    except OSError as exc:
        if os.path.islink(path):
            found.problems.append(f"{path}: a symlink inside the store")
        else:
            found.problems.append(f"{path}: unreadable: {exc.strerror or exc}")
        return False
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if not stat.S_ISREG(st.st_mode):
            found.problems.append(f"{path}: not a regular file (a FIFO, socket or device)")
            return False
        if mode & ~0o600:
            found.problems.append(f"{path}: file mode {mode:04o} is wider than 0600")
        # One read for the whole file: asked for a byte more than its size, a
        # shorter read is its end; a full one (the file grew) reads on to the end.
        want = st.st_size + 1
        data = os.read(fd, want)
        if len(data) == want:
            chunks = [data]
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            data = b"".join(chunks)
        out.append(RecordFile(path, data, scanned))
        return True
    except OSError as exc:
        found.problems.append(f"{path}: unreadable: {exc.strerror or exc}")
        return False
    finally:
        os.close(fd)


def walk(root: str, found: Findings) -> Walked:
    """Modes, symlinks, temp files, and the record files read."""
    from ledger_cli.stores.jsonfile.fairlock import NODE_PREFIX, OLD_QUEUE_DIR, QUEUE_DIR
    from ledger_cli.stores.jsonfile.layout import RECORD_FILE, SHARD

    temps: list[str] = []
    records: list[RecordFile] = []
    all_read = listed = True
    shards = os.path.join(root, RECORDS_DIR)
    waiters = (os.path.join(root, QUEUE_DIR), os.path.join(root, OLD_QUEUE_DIR))
    unlisted: list[OSError] = []  # os.walk skips a directory it cannot list, silently
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=unlisted.append):
        parent, base = os.path.split(dirpath)
        in_shard = os.path.basename(parent) == RECORDS_DIR
        store_shard = in_shard and parent == shards and SHARD.matches(base)
        prefix = dirpath + os.sep
        for name in [*dirnames, *filenames]:
            path = prefix + name
            if in_shard and name.endswith(".json") and name in filenames:
                scanned = store_shard and RECORD_FILE.matches(name)
                all_read = _read_record(path, scanned, found, records) and all_read
                continue
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # removed meanwhile
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                found.problems.append(f"{path}: a symlink inside the store")
                all_read = all_read and not in_shard
            elif stat.S_ISDIR(st.st_mode):
                if mode & ~0o700:
                    found.problems.append(f"{path}: directory mode {mode:04o} is wider than 0700")
            elif not stat.S_ISREG(st.st_mode) and not (
                stat.S_ISFIFO(st.st_mode) and dirpath in waiters and name.startswith(NODE_PREFIX)
            ):  # (a lock queue node is a FIFO: stores/jsonfile/fairlock.py)
                found.problems.append(f"{path}: not a regular file (a FIFO, socket or device)")
            else:
                if mode & ~0o600:
                    found.problems.append(f"{path}: file mode {mode:04o} is wider than 0600")
                if name.endswith(TEMP_SUFFIX):
                    temps.append(path)
                elif in_shard and name.endswith(".json"):
                    try:
                        records.append(RecordFile(path, read_regular(path), False))
                    except OSError as exc:
                        found.problems.append(f"{path}: unreadable: {exc.strerror or exc}")
                        all_read = False
    for err in unlisted:
        if isinstance(err, FileNotFoundError):
            continue  # removed meanwhile
        where = str(err.filename or root)
        found.problems.append(f"{where}: unreadable: {err.strerror or err}")
        # records/ itself, a directory in it, or one above it: not every record was read.
        mine = (where + os.sep).startswith(shards + os.sep) or shards.startswith(where + os.sep)
        listed = listed and not mine
    with contextlib.suppress(FileNotFoundError):  # a store with no record yet
        if not stat.S_ISDIR(os.lstat(shards).st_mode):  # a file, a symlink: not walked
            listed = False
    st = os.stat(root)
    if stat.S_IMODE(st.st_mode) & ~0o700:
        found.problems.append(
            f"{root}: directory mode {stat.S_IMODE(st.st_mode):04o} is wider than 0700"
        )
    return Walked(temps, records, all_read and listed, listed)


def check_record_files(store: Any, walked: Walked, found: Findings) -> Checked:
    """Check every record file as the store reads it (checksum, wire record,
    validation, filed under its key's name)."""
    good: list[TaskState] = []
    damaged: list[tuple[RecordFile, str]] = []
    scanned: dict[str, TaskState] | None = {} if walked.all_read else None
    check = store.check_record_file
    for file in walked.files:
        path, data, in_scan = file
        digest = os.path.basename(path).removesuffix(".json")
        try:
            rec = check(data, path, digest)
        except LedgerError as exc:
            detail = output.one_line(str(exc)).removeprefix(f"ledger: store: {path}: ")
            problem = (
                f"{path}: {detail} (move the file aside: ledger doctor --fix --drop-damaged; "
                "then, to have the record back, restore it from a snapshot or backup with "
                "`ledger restore`, which refuses while the file is there)"
            )
            found.problems.append(problem)
            damaged.append((file, problem))
            scanned = None
            continue
        good.append(rec)
        if in_scan and scanned is not None:
            scanned[digest] = rec
    return Checked(good, scanned, damaged)
