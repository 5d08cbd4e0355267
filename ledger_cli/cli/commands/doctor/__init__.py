"""`ledger doctor`: check a store.

Problems (exit 9): a record that does not parse or validate, a file mode
wider than 0600 (directories: 0700), a symlink inside the store, an unknown
format version, anything else the store itself refuses to read.
Notes (exit 0): needs naming keys never admitted; stray temporary files left
by a crash (`--fix` removes them, holding the store lock).
The record-level checks (invalid UTF-8 from another writer, escaped and
orphaned blocks, writes without a history line) are in `records.py`, the
derived indexes' in `indexes.py`, the attempts' in `attempts.py`.

For a JSON store the directory is walked file by file, so every bad record
is named, not just the first; other stores are checked through their API.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import TYPE_CHECKING, Any

from ledger_cli.cli import output
from ledger_cli.cli.commands.doctor.findings import Findings
from ledger_cli.cli.commands.doctor.records import check_records
from ledger_cli.cli.context import Session, Settings, store_url
from ledger_cli.errors import LedgerError, StoreError

if TYPE_CHECKING:
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.record import TaskState

TEMP_SUFFIX = ".tmp"
RECORDS_DIR = "records"


def _read_regular(path: str) -> bytes:
    """A file's bytes, never through a symlink nor blocking on a FIFO swapped in."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def _record_file(path: str, found: Findings, records: list[tuple[str, bytes]]) -> None:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return  # removed meanwhile
    except OSError as exc:
        if os.path.islink(path):
            found.problems.append(f"{path}: a symlink inside the store")
        else:
            found.problems.append(f"{path}: unreadable: {exc.strerror or exc}")
        return
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if not stat.S_ISREG(st.st_mode):
            found.problems.append(f"{path}: not a regular file (a FIFO, socket or device)")
            return
        if mode & ~0o600:
            found.problems.append(f"{path}: file mode {mode:04o} is wider than 0600")
        chunks = []
        while chunk := os.read(fd, max(st.st_size + 1, 4096)):
            chunks.append(chunk)
        records.append((path, b"".join(chunks)))
    except OSError as exc:
        found.problems.append(f"{path}: unreadable: {exc.strerror or exc}")
    finally:
        os.close(fd)


def _walk(root: str, found: Findings) -> tuple[list[str], list[tuple[str, bytes]]]:
    """Modes, symlinks, temp files; returns (temp files, record files' bytes)."""
    temps: list[str] = []
    records: list[tuple[str, bytes]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        in_shard = os.path.basename(os.path.dirname(dirpath)) == RECORDS_DIR
        prefix = dirpath + os.sep
        for name in [*dirnames, *filenames]:
            path = prefix + name
            if in_shard and name.endswith(".json") and name in filenames:
                # A record file: one open (never through a symlink) and fstat,
                # not an lstat, then an open: the walk's cost is the records'.
                _record_file(path, found, records)
                continue
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # removed meanwhile
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                found.problems.append(f"{path}: a symlink inside the store")
            elif stat.S_ISDIR(st.st_mode):
                if mode & ~0o700:
                    found.problems.append(f"{path}: directory mode {mode:04o} is wider than 0700")
            elif not stat.S_ISREG(st.st_mode):
                found.problems.append(f"{path}: not a regular file (a FIFO, socket or device)")
            else:
                if mode & ~0o600:
                    found.problems.append(f"{path}: file mode {mode:04o} is wider than 0600")
                if name.endswith(TEMP_SUFFIX):
                    temps.append(path)
                elif os.path.basename(os.path.dirname(dirpath)) == RECORDS_DIR and name.endswith(
                    ".json"
                ):
                    try:
                        records.append((path, _read_regular(path)))
                    except OSError as exc:
                        found.problems.append(f"{path}: unreadable: {exc.strerror or exc}")
    st = os.stat(root)
    if stat.S_IMODE(st.st_mode) & ~0o700:
        found.problems.append(
            f"{root}: directory mode {stat.S_IMODE(st.st_mode):04o} is wider than 0700"
        )
    return temps, records


def _check_record_files(
    store: Any, files: list[tuple[str, bytes]], found: Findings
) -> list[TaskState]:
    """Check every record file as the store reads it (checksum, wire record,
    validation, filed under its key's name); the good records."""
    good: list[TaskState] = []
    for path, data in files:
        digest = os.path.basename(path).removesuffix(".json")
        try:
            good.append(store.check_record_file(data, path, digest))
        except LedgerError as exc:
            detail = output.one_line(str(exc)).removeprefix(f"ledger: store: {path}: ")
            found.problems.append(f"{path}: {detail}")
    return good


def _check_needs(records: list[TaskState], found: Findings) -> None:
    keys = {rec.key for rec in records}
    for rec in records:
        for need in dict.fromkeys(rec.needs or ()):
            if need not in keys:
                found.notes.append(f"{rec.key}: needs {need}, which was never admitted")


def doctor(settings: Settings, fix: bool = False) -> int:
    found = Findings()
    from ledger_cli.stores.resolve import redact_url

    url = redact_url(store_url(settings))  # never print a password
    with Session(settings) as s:
        root: str | None = getattr(s.store, "path", None)
        temps: list[str] = []
        records: list[TaskState] = []
        walked = root is not None and os.path.isdir(root) and hasattr(s.store, "check_record_file")
        if walked:
            assert root is not None
            # File by file, and without range(): the JSON store's scan would
            # sweep the temporary files this command only reports.
            temps, files = _walk(root, found)
            records = _check_record_files(s.store, files, found)
            seen_files = getattr(s.store, "seen_files", None)
            if seen_files is not None and len(records) == len(files):
                # The index checks' scan (under the lock) decodes only what changed.
                seen_files(
                    {
                        os.path.basename(path).removesuffix(".json"): (data, rec)
                        for (path, data), rec in zip(files, records, strict=True)
                    }
                )
        if temps and fix:
            # Under the store lock no writer is active: every .tmp is a crash's leftover.
            with s.store.batch():
                for path in temps:
                    try:
                        os.unlink(path)
                        found.fixed.append(f"removed {path}")
                    except FileNotFoundError:
                        pass
        else:
            found.notes.extend(
                f"{path}: a temporary file left by a crash (--fix removes it)" for path in temps
            )
        if not walked:
            try:
                records = list(s.store.range())
            except StoreError as exc:
                found.problems.append(output.one_line(str(exc)))
            for rec in records:
                try:
                    rec.validate()
                except LedgerError as exc:
                    found.problems.append(f"record {rec.key}: {output.one_line(str(exc))}")
        read_history = getattr(s.store, "read_history", None)
        history: list[HistoryEntry] | None = None
        if read_history is not None:
            try:
                history = list(read_history())
            except StoreError as exc:
                found.problems.append(output.one_line(str(exc)))
        _check_needs(records, found)
        check_records(s, records, found, fix, history)
        from ledger_cli.cli.commands.doctor.indexes import (
            check_deps_index,
            check_ready_index,
            check_tally,
        )

        # The dependents index first: the JSON store's ready index finds the tasks
        # a completed need makes ready through it. The JSON store reads its
        # records once for the three (without the lock; under it to confirm).
        with contextlib.ExitStack() as stack:
            one_scan = getattr(s.store, "one_scan", None)
            if one_scan is not None:
                with contextlib.suppress(StoreError):  # then each check reports it
                    stack.enter_context(one_scan())
            check_deps_index(s.store, found, fix)
            check_ready_index(s.store, found, fix)
            check_tally(s.store, found, fix)
        from ledger_cli.cli.commands.doctor.attempts import check_attempts

        check_attempts(s.store, found, fix)
    problems = list(dict.fromkeys(found.problems))
    code = StoreError.exit_code if problems else 0
    if settings.json:
        doc: dict[str, Any] = {
            "store": url,
            "records": len(records),
            "problems": problems,
            "notes": found.notes,
            "fixed": found.fixed,
        }
        output.json_line(doc)
        return code
    output.line(f"store {url}: {len(records)} records")
    for p in problems:
        output.line(f"problem: {p}")
    for n in found.notes:
        output.line(f"note: {n}")
    for f in found.fixed:
        output.line(f"fixed: {f}")
    if not problems and not found.notes:
        output.line("no problems found")
    return code
