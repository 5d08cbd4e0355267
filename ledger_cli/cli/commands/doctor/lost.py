"""`ledger doctor`: records whose file is gone (a JSON store's lost primary data).

A record file leaves the store only through `ledger prune` (its record then
lives on in pruned/), so a key the history has writes for, that has no
record file and is not pruned, has lost its record: someone deleted the
file, or the file system lost it. That is a problem (exit 9), named by key,
and `--fix` does not accept it: it rebuilds the ready, dependents and live
indexes, but keeps the tally as it is (its counts are what makes every scan,
`list`, `snapshot`, exit 9 rather than answer without the record) and keeps
reporting the key, because the history still has its writes. The operator
restores the record (`ledger restore` of a snapshot holding it: the key is
free), or accepts the loss with `--fix --drop-damaged`, which writes a
`ledger.dropped` history line for the key; a key whose last history line is
that one is not reported again, and its live/ marker (the trace by which an
admit of the key exits 9: a claimed record lost must not be claimed again
with the same fence) goes (`free_dropped`).

A store written through the library or by the Go service keeps no history:
there the tally's counts are the only trace of a lost record, and the tally
check reports their disagreement.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.errors import StoreError
from ledger_cli.stores.sql.codec import shown

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ledger_cli.cli.commands.doctor.files import RecordFile
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.cli.commands.doctor.floor import FenceFloor
    from ledger_cli.cli.context import Session
    from ledger_cli.engine.history import HistoryEntry

LOST = "is lost (see above)"
"""What became of a key whose record file (or row) is gone while its history has writes."""
DROPPED = "ledger.dropped"
"""The history event of a key whose lost or damaged record `doctor --fix
--drop-damaged` accepted the loss of."""


def lost_keys(s: Session, on_disk: set[str], history: Iterable[HistoryEntry]) -> list[str]:
    """The keys the history has writes for whose record file is gone (not
    pruned, not dropped), in key order. `on_disk`: the digests of the record
    files the walk found (damaged ones included: those are reported as
    damaged). Each candidate is read again (a record admitted after the walk
    is no loss) and checked against pruned/."""
    from ledger_cli.engine import prune
    from ledger_cli.stores.jsonfile.records import key_digest

    last: dict[str, str] = {}
    for entry in history:
        if entry.key:
            last[entry.key] = entry.event
    lost: list[str] = []
    for key, event in sorted(last.items()):
        digest = key_digest(key)
        if event == DROPPED or digest is None or digest in on_disk:
            continue
        try:
            if s.store.load(key) is not None or prune.is_pruned(s.store, key):
                continue
        except StoreError:
            continue  # a record file there after all, damaged: reported as such
        lost.append(key)
    return lost


def dropped_keys(history: Iterable[HistoryEntry]) -> list[str]:
    """The keys whose last history line is `ledger.dropped`."""
    last: dict[str, str] = {}
    for entry in history:
        if entry.key:
            last[entry.key] = entry.event
    return [key for key, event in last.items() if event == DROPPED]


def record_path(root: str, key: str) -> str:
    from ledger_cli.stores.jsonfile.layout import shown as path_of
    from ledger_cli.stores.jsonfile.records import key_digest

    digest = key_digest(key) or ""
    return path_of(root, "records", digest[:2], digest + ".json")


def lost_problem(root: str, key: str) -> str:
    return output.clip(
        f"record {shown(key)} is lost: its file {record_path(root, key)} is missing while "
        "the history has its writes (restore it from a snapshot or backup with "
        "`ledger restore`, or accept the loss: ledger doctor --fix --drop-damaged)"
    )


ROW_REMEDY = (
    "restore it from a snapshot or backup with `ledger restore`, or accept the loss by"
    " admitting the key again; either starts it above every fence its history shows."
    " An SQL store has no --drop-damaged"
)


def lost_rows(store: object, history: Iterable[HistoryEntry], found: Findings) -> dict[str, str]:
    """An SQL store's keys the history has writes for whose row in
    `ledger_tasks` is gone (neither there nor pruned: deleted by hand): a
    problem each, as a JSON store's lost record file; and a dropped
    `ledger_history` (the row its open wrote on making it again), as a JSON
    store's lost history. What became of each key (for the needs' notes)."""
    rows: Callable[[], list[str]] | None = getattr(store, "lost_rows", None)
    if rows is None:
        return {}
    from ledger_cli.stores.sql.ddl import HISTORY_LOST

    found.problems.extend(
        f"ledger_history was dropped and made again empty at {shown(entry.time)}: every write"
        " before it has no history, so a row deleted before then is not found; restore the"
        " database from a backup, or accept the loss by deleting that row"
        f" (DELETE FROM ledger_history WHERE event = '{HISTORY_LOST}')"
        for entry in history
        if entry.event == HISTORY_LOST and not entry.key
    )
    try:
        keys = rows()
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return {}
    found.problems.extend(
        output.clip(
            f"record {shown(key)} is lost: its row in ledger_tasks is missing while the"
            f" history has its writes ({ROW_REMEDY})"
        )
        for key in keys
    )
    return dict.fromkeys(keys, LOST)


def drop_lost(s: Session, root: str, keys: Sequence[str], floor: FenceFloor) -> list[str]:
    """Accept the loss of each key: a `ledger.dropped` history line each, in
    one unit under the store lock, each key checked again inside it, the
    fence floor raised first (floor.py). The derived indexes are rebuilt by
    the index checks that follow. The lines saying what was dropped."""
    from ledger_cli.engine import prune

    done: list[str] = []
    with s.store.batch():
        now = str(s.now())
        entries = []
        for key in keys:
            if s.store.load(key) is not None or prune.is_pruned(s.store, key):
                continue
            entries.append(
                dropped_entry(
                    s,
                    now,
                    key,
                    f"key {key} dropped: its record file {record_path(root, key)} was lost",
                )
            )
            done.append(f"dropped {shown(key)}: its record file was lost (a history line says so)")
        if entries:
            floor.raise_now()
            s.store.append_history(entries)  # type: ignore[attr-defined]
    return [output.clip(line) for line in done]


def free_dropped(s: Session, root: str, floor: FenceFloor) -> None:
    """Once `--drop-damaged` has accepted the losses: the JSON store's scan of
    live/ (`by_status(drop_lost=True)`: every other read of it exits 9 on a
    lost record), which drops each marker whose record file is gone, so
    admitting a dropped key again is an ordinary admit, not a lost record
    (liveindex.refuse_lost), at or above the fence floor, raised first
    under the same lock when there is such a marker (not one whose key is
    pruned: a finished record's stale entry, no loss). Markers of losses no
    history names (a write of a damaged wal.log dropped) go too:
    --drop-damaged accepts them all."""
    if not hasattr(s.store, "check_record_file"):  # not the JSON store
        return
    from ledger_cli.stores.jsonfile import fsutil, liveindex

    with s.store.batch():
        root_fd = fsutil.open_root(root)
        if root_fd is None:
            return
        try:
            if liveindex.unbacked(root, root_fd):
                floor.raise_now()
        finally:
            os.close(root_fd)
        s.store.by_status(("pending", "claimed"), drop_lost=True)  # type: ignore[attr-defined]


def dropped_entry(s: Session, now: str, key: str, data: str) -> HistoryEntry:
    """The `ledger.dropped` history line of a loss accepted by --drop-damaged
    (`key` "" for a loss no key names: lines of the history, writes of wal.log)."""
    from ledger_cli.engine.history import HistoryEntry

    return HistoryEntry(time=now, actor=s.actor, event=DROPPED, key=key, fence=0, data=data)


def drop_damaged_files(
    s: Session,
    root: str,
    damaged: Sequence[RecordFile],
    history: Iterable[HistoryEntry],
    floor: FenceFloor,
) -> list[tuple[RecordFile, str]]:
    """Move each damaged record file into damaged/ (its bytes kept), under the
    store lock, the fence floor raised first (floor.py), each file read again
    first (a file that changed meanwhile is left, and still reported); a
    `ledger.dropped` history line each, naming the key when the history
    knows it. (file, what was done) for each moved."""
    from ledger_cli.cli.commands.doctor.files import read_regular
    from ledger_cli.stores.jsonfile import fsutil
    from ledger_cli.stores.jsonfile.layout import DAMAGED_DIR, free_name
    from ledger_cli.stores.jsonfile.records import key_digest

    names: dict[str, str] = {}
    for entry in history:
        if entry.key:
            digest = key_digest(entry.key)
            if digest is not None:
                names[digest] = entry.key
    root_fd = fsutil.open_root(root)
    if root_fd is None:
        return []
    moved: list[tuple[RecordFile, str]] = []
    try:
        with s.store.batch():
            # A rename around wal.log: its frames are made durable first, so a
            # restart never writes a record back over the move (wal.py).
            checkpoint = getattr(s.store, "checkpoint", None)
            if checkpoint is not None:
                checkpoint(root_fd)
            dfd = fsutil.open_subdir(
                root_fd, DAMAGED_DIR, os.path.join(root, DAMAGED_DIR), create=True
            )
            assert dfd is not None
            try:
                entries = []
                now = str(s.now())
                floor.raise_now()  # durable before the first move
                for file in damaged:
                    try:
                        if read_regular(file.path) != file.data:
                            continue  # rewritten meanwhile: left, and reported
                        name = os.path.basename(file.path)
                        target = free_name(dfd, name)
                        os.rename(file.path, os.path.join(root, DAMAGED_DIR, target))
                    except FileNotFoundError:
                        continue
                    except OSError as exc:
                        raise fsutil.fail(file.path, "cannot move aside", exc) from None
                    shown_path = os.path.join(root, DAMAGED_DIR, target)
                    key = names.get(name.removesuffix(".json"), "")
                    what = f"record {key}" if key else "a record of unknown key"
                    entries.append(
                        dropped_entry(
                            s,
                            now,
                            key,
                            f"{what} dropped: its damaged file {file.path} moved to {shown_path}",
                        )
                    )
                    told = f"record {shown(key)}" if key else "a record of unknown key"
                    moved.append(
                        (file, output.clip(f"dropped {told}: moved {file.path} to {shown_path}"))
                    )
                if moved:
                    fsutil.fsync_fd(dfd, os.path.join(root, DAMAGED_DIR))
                    for file, _ in moved:
                        parent = os.path.dirname(file.path)
                        pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
                        try:
                            fsutil.fsync_fd(pfd, parent)
                        finally:
                            os.close(pfd)
                if entries:
                    s.store.append_history(entries)  # type: ignore[attr-defined]
            finally:
                os.close(dfd)
    finally:
        os.close(root_fd)
    return moved
