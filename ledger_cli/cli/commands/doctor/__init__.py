"""`ledger doctor`: check a store.

Problems (exit 9): a record that does not parse or validate, a record or
history.jsonl that is gone (`lost.py`; `--fix --drop-damaged` accepts the
loss, with a history line), a history.jsonl that ends mid-line (`history.py`,
accepted the same way), a damaged history.started (`history.py`: `--fix`
writes it again when safe, `--fix --drop-damaged` accepts the history), a
JSON store's queue or schedule file the ready index tells is lost
(`indexes.py`: kept by `--fix`, accepted by `--drop-damaged`), a cycle of
needs (`cycles.py`), a file mode wider than 0600 (directories: 0700), a
symlink inside the store, an unknown format version, anything else the
store itself refuses to read. When not every record could be read (the
store would not open, `records/` could not be walked) no count is claimed:
`could not count the records`.
Notes (exit 0): needs naming keys never admitted (a pruned need is no note:
it is the terminal record it was, docs/design.md §6.4); stray temporary files
left by a crash (`--fix` removes them, holding the store lock).
The record-level checks (invalid UTF-8 from another writer, escaped and
orphaned blocks, writes without a history line) are in `records.py`, the
derived indexes' in `indexes.py`, the attempts' in `attempts.py`, the
pause's, schedules', queues' and limits' in `sidedata.py`; an SQL store's
pruned marks in `prunedmarks.py`; an SQLite
file's pages (SQLite's quick_check) in `sqlcheck.py`.

For a JSON store the directory is walked file by file (`files.py`), so every
bad record is named, not just the first; other stores are checked through
their API.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ledger_cli.cli import output
from ledger_cli.cli.commands.doctor.files import RecordFile, check_record_files, walk
from ledger_cli.cli.commands.doctor.findings import Findings, distinct
from ledger_cli.cli.commands.doctor.lost import LOST
from ledger_cli.cli.commands.doctor.records import check_needs, check_records
from ledger_cli.cli.context import Session, Settings, store_url
from ledger_cli.errors import LedgerError, StoreError

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.floor import FenceFloor
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.record import TaskState


def _pruned_keys(s: Session, found: Findings, fix: bool) -> frozenset[str] | None:
    """The keys `ledger prune` pruned: their needs' notes and their history
    (which prune dropped) are as expected. None: they could not be read. A
    damaged pruned/count (the JSON store's: derived from the shards) is
    written again by `fix`."""
    from ledger_cli.engine import prune
    from ledger_cli.stores.jsonfile.prunedcount import CountDamageError

    try:
        try:
            return prune.keys(s.store)
        except CountDamageError as exc:
            if not fix:
                raise
            s.store.rewrite_pruned_count()  # type: ignore[attr-defined]
            found.fixed.append(f"{exc.path}: written again from the shards")
            return prune.keys(s.store)
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return None


def _drop_damaged(
    s: Session,
    root: str,
    damaged: list[tuple[RecordFile, str]],
    history: list[HistoryEntry],
    found: Findings,
    floor: FenceFloor,
) -> frozenset[str]:
    """`--fix --drop-damaged`: damaged record files moved aside (lost.py); each
    one moved is no longer a problem. The digests of those moved."""
    from ledger_cli.cli.commands.doctor import lost

    try:
        moved = lost.drop_damaged_files(s, root, [f for f, _ in damaged], history, floor)
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return frozenset()
    gone = {problem for f, problem in damaged if any(m is f for m, _ in moved)}
    found.problems = [p for p in found.problems if p not in gone]
    found.fixed.extend(line for _, line in moved)
    return frozenset(os.path.basename(m.path).removesuffix(".json") for m, _ in moved)


def _check_lost(
    s: Session,
    root: str,
    files: list[RecordFile],
    history: list[HistoryEntry],
    found: Findings,
    floor: FenceFloor | None,
) -> dict[str, str]:
    """Keys whose record file is gone (lost.py): problems, or dropped with
    --fix --drop-damaged. What became of each key without a record that the
    history knows (for the needs' notes). `floor`: with --drop-damaged."""
    from ledger_cli.cli.commands.doctor import lost

    gone = dict.fromkeys(lost.dropped_keys(history), "was dropped (doctor --drop-damaged)")
    on_disk = {os.path.basename(f.path).removesuffix(".json") for f in files}
    try:
        keys = lost.lost_keys(s, on_disk, history)
        if floor is not None:
            found.fixed.extend(lost.drop_lost(s, root, keys, floor) if keys else ())
            gone.update(dict.fromkeys(keys, "was dropped (doctor --drop-damaged)"))
            lost.free_dropped(s, root, floor)
            return gone
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return gone
    found.problems.extend(lost.lost_problem(root, key) for key in keys)
    gone.update(dict.fromkeys(keys, LOST))
    return gone


def _accept_lost_history(s: Session, root: str, found: Findings) -> None:
    """`--fix --drop-damaged` on a JSON store whose history.jsonl is lost: a new
    one, whose first line (`ledger.dropped`) says the old one was lost."""
    from ledger_cli.cli.commands.doctor.lost import DROPPED
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.stores.jsonfile import fsutil, historyfile

    root_fd = fsutil.open_root(root)
    if root_fd is None:
        return
    try:
        with s.store.batch():
            if not historyfile.is_lost(root, root_fd):
                return
            historyfile.start_again(root, root_fd)
            entry = HistoryEntry(
                time=str(s.now()),
                actor=s.actor,
                event=DROPPED,
                key="",
                fence=0,
                data="history.jsonl was lost; this history starts here",
            )
            s.store.append_history([entry])  # type: ignore[attr-defined]
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    finally:
        os.close(root_fd)
    found.fixed.append(f"started a new history in place of the lost {root}/history.jsonl")


def doctor(settings: Settings, fix: bool = False, drop_damaged: bool = False) -> int:
    if drop_damaged and not fix:
        from ledger_cli.cli.inputs import InputError

        raise InputError("ledger: --drop-damaged goes with --fix (doctor --fix --drop-damaged)")
    found = Findings()
    from ledger_cli.stores import redact_url

    url = redact_url(store_url(settings))  # never print a password
    session = _open(settings, found, fix, drop_damaged)
    if session is None:
        return _report(settings, url, None, found)  # no count: nothing was read
    counted = True  # every record was read: else no count is claimed, only the problems
    with session as s:
        root: str | None = getattr(s.store, "path", None)
        from ledger_cli.cli.commands.doctor.sqlcheck import check_key_types, check_pages

        check_pages(s.store, root or "", found)  # SQLite's own check of its pages
        check_key_types(s.store, root or "", found)
        temps: list[str] = []
        records: list[TaskState] = []
        damaged_files: frozenset[str] = frozenset()  # digests of record files that do not read
        dropped: frozenset[str] = frozenset()  # those of them --drop-damaged moved aside
        walked = root is not None and os.path.isdir(root) and hasattr(s.store, "check_record_file")
        if walked:
            assert root is not None
            # File by file, and without range(): the JSON store's scan would
            # sweep the temporary files this command only reports.
            files = walk(root, found)
            temps = files.temps
            checked = check_record_files(s.store, files, found)
            records = checked.records
            damaged_files = frozenset(
                os.path.basename(f.path).removesuffix(".json") for f, _ in checked.damaged
            )
            counted = files.listed
            seen_files = getattr(s.store, "seen_files", None)
            if seen_files is not None and checked.scanned is not None:
                # The index checks' first pass (without the lock, as the walk)
                # takes these records instead of reading every file again.
                seen_files(checked.scanned)
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
            from ledger_cli.engine import badrows

            try:  # every row that does not decode or validate named (an SQL store's)
                with badrows.around(s.store) as bad:
                    records = list(s.store.range())
                found.problems.extend(output.one_line(why) for why in bad.found.values())
            except StoreError as exc:
                found.problems.append(output.one_line(str(exc)))
                counted = False
            for rec in records:
                try:
                    rec.validate()
                except LedgerError as exc:
                    found.problems.append(f"record {rec.key}: {output.one_line(str(exc))}")
        if walked:
            assert root is not None
            from ledger_cli.cli.commands.doctor.history import check_mark

            check_mark(s, root, found, fix, drop_damaged)
        if walked and drop_damaged:
            assert root is not None
            _accept_lost_history(s, root, found)
        read_history = getattr(s.store, "read_history", None)
        history: list[HistoryEntry] | None = None
        if walked:
            assert root is not None
            from ledger_cli.cli.commands.doctor.history import read_history as json_history

            history = json_history(s, root, found, drop_damaged)  # a torn last line too
        elif read_history is not None:
            try:
                history = list(read_history())
            except StoreError as exc:
                found.problems.append(output.one_line(str(exc)))
        gone: dict[str, str] = {}
        if walked and history is not None:
            assert root is not None
            floor = None
            if drop_damaged:
                from ledger_cli.cli.commands.doctor.floor import FenceFloor, drop_floor

                damaged = (f.data for f, _ in checked.damaged)
                floor = FenceFloor(s.store, drop_floor(records, history, damaged), found)
                if checked.damaged:
                    dropped = _drop_damaged(s, root, checked.damaged, history, found, floor)
            gone = _check_lost(s, root, files.files, history, found, floor)
        elif not walked:
            from ledger_cli.cli.commands.doctor.lost import lost_rows

            gone = lost_rows(s.store, history or (), found)  # an SQL store's rows deleted by hand
        from ledger_cli.cli.commands.doctor.prunedmarks import check_pruned_marks

        check_pruned_marks(s.store, found, fix)  # before the keys: --fix drops stray marks
        pruned_read = _pruned_keys(s, found, fix)
        pruned = pruned_read or frozenset()
        check_needs(records, found, gone, pruned, damaged_files - dropped)
        from ledger_cli.cli.commands.doctor.cycles import check_cycles

        check_cycles(records, found)
        from ledger_cli.cli.commands.doctor.fences import check_fences

        check_fences(s.store, records, found, pruned)
        unreadable = bool(damaged_files - dropped)  # record files that still do not read
        check_records(s, records, found, fix, history, pruned, damaged_files - dropped)
        from ledger_cli.cli.commands.doctor.indexes import check_indexes

        check_indexes(
            s.store,
            found,
            fix,
            lost=LOST in gone.values(),
            unreadable=unreadable,
            drop_damaged=drop_damaged,
        )
        from ledger_cli.cli.commands.doctor.attempts import check_attempts
        from ledger_cli.cli.commands.doctor.sidedata import check_side_data

        check_side_data(s.store, found)

        # A lost record's attempts are kept: they go with the record, restored or dropped.
        lost_keys = {key for key, why in gone.items() if why == LOST}
        check_attempts(s.store, found, fix, lost_keys, s.blocks, drop_damaged, s)
    # An SQL store keeps a pruned record as a row; the JSON store moves it
    # aside: both count the records that are not pruned, and the pruned apart.
    kept = sum(1 for rec in records if rec.key not in pruned)
    n_pruned = len(pruned) if counted and pruned_read is not None else None
    return _report(settings, url, kept if counted else None, found, n_pruned)


def _open(settings: Settings, found: Findings, fix: bool, drop_damaged: bool) -> Session | None:
    """The store, opened for reading; None when it cannot be (reported). A
    JSON store whose wal.log is damaged is refused by every command, and
    here reported; `--fix` sets the log aside when every write it held was
    applied, and `--fix --drop-damaged` even after a restart (the writes past
    the damage are lost, but for the record files they reached, which no
    replay rolls back: a history line says so; wal.set_aside)."""
    from ledger_cli.stores.jsonfile.wal import LogDamageError

    try:
        s = Session(settings, reads=True)
    except LogDamageError as exc:
        if not fix:
            found.problems.append(output.one_line(str(exc)))
            return None
        from ledger_cli.stores.jsonfile import JsonFileStore

        try:
            store = JsonFileStore(exc.root, repair_log="lossy" if drop_damaged else "applied")
        except StoreError as again:
            found.problems.append(output.one_line(str(again)))
            return None
        s = Session(settings, store=store, reads=True)
        if store.log_repaired is not None:
            what, lost = store.log_repaired
            found.fixed.append(what)
            if lost:
                _log_dropped(s, what)
        return s
    _check_log(s, found, fix)
    return s


def _check_log(s: Session, found: Findings, fix: bool) -> None:
    """A JSON store's wal.log, every frame this boot applied read whole (which
    no command reads again before a restart): a damaged one is a problem, its
    writes in the record files; `--fix` makes them durable and sets the log
    aside (stores/jsonfile/walcheck.py)."""
    check_log = getattr(s.store, "check_log", None)
    if check_log is None:
        return
    try:
        done = check_log(fix)
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    if done is not None:
        found.fixed.append(done)


def _log_dropped(s: Session, what: str) -> None:
    """The `ledger.dropped` history line of writes lost with a damaged wal.log."""
    from ledger_cli.cli.commands.doctor.lost import dropped_entry

    entry = dropped_entry(s, str(s.now()), "", what)
    with s.store.batch():
        s.store.append_history([entry])  # type: ignore[attr-defined]


def _report(
    settings: Settings, url: str, records: int | None, found: Findings, pruned: int | None = None
) -> int:
    """The findings; `records` None: not every record could be read, so no
    count is claimed (`could not count the records`, `--json`: null, and
    so is `pruned`)."""
    problems = distinct(found.problems)
    code = StoreError.exit_code if problems else 0
    if settings.json:
        doc: dict[str, Any] = {
            "store": url,
            "records": records,
            "pruned": pruned,
            "problems": problems,
            "notes": found.notes,
            "fixed": found.fixed,
        }
        output.json_line(doc)
        return code
    if records is None:
        output.human_line(f"store {url}: could not count the records")
    else:
        count = output.counted(records, "record") + (f", {pruned} pruned" if pruned else "")
        output.human_line(f"store {url}: {count}")
    for p in problems:
        output.human_line(f"problem: {p}")
    for n in found.notes:
        output.human_line(f"note: {n}")
    for f in found.fixed:
        output.human_line(f"fixed: {f}")
    if not problems and not found.notes:
        output.line("no problems found")
    return code
