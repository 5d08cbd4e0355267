"""`ledger doctor`: a JSON store's history.jsonl that ends mid-line.

A crash that tears the history's last line leaves a journal (or a wal.log
frame) whose replay cuts it: the next holder of the store lock runs it first.
A file that still ends mid-line under the lock is damage, which every writer
refuses (stores/jsonfile/historyfile.py): a problem (exit 9) naming the
file. `--fix` does not accept it (the line may be restored from a backup);
`--fix --drop-damaged` does: the torn bytes are copied into damaged/, the
file is cut back to its last whole line, and a `ledger.dropped` line says so.
The whole lines are read either way, so the checks that use the history
still run.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.cli.context import Session
    from ledger_cli.engine.history import HistoryEntry


def check_mark(s: Session, root: str, found: Findings, fix: bool, drop: bool) -> None:
    """history.started holding bytes that are no mark (historymark.py): a
    problem; `fix` writes it again from the history's first line when what
    is left of it agrees with that line, and `drop` (--drop-damaged) when it
    does not, accepting the history as it is, with a `ledger.dropped` line."""
    from ledger_cli.stores.jsonfile import fsutil, historymark
    from ledger_cli.stores.jsonfile.layout import HISTORY_MARK, HISTORY_NAME, shown

    path = shown(root, HISTORY_MARK)
    done = None
    try:
        root_fd = fsutil.open_root(root)
        if root_fd is None:
            return
        try:
            data = historymark.read_bytes(root_fd)
            if data is None or historymark.parse(data) is not None:
                return
            with s.store.batch():  # under the lock: what a writer left is final
                data = historymark.read_bytes(root_fd)
                if data is None or historymark.parse(data) is not None:
                    return
                first = _first_line(root, root_fd)
                if first is None and drop:
                    return  # a lost history: accepted as such (doctor's _accept_lost_history)
                marks = historymark.repaired(data, first or b"")
                if fix and marks is not None:
                    historymark.write(root, root_fd, marks)
                    done = f"{path}: written again from the first line of {HISTORY_NAME}"
                elif fix and drop:
                    from ledger_cli.cli.commands.doctor.lost import dropped_entry

                    historymark.write(root, root_fd, [])  # the next append writes it
                    done = f"{path} was damaged: {HISTORY_NAME} accepted as it is"
                    entry = dropped_entry(s, str(s.now()), "", done)
                    s.store.append_history([entry])  # type: ignore[attr-defined]
        finally:
            os.close(root_fd)
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    if done is not None:
        found.fixed.append(done)
        return
    if marks is not None:
        remedy = "ledger doctor --fix writes it again from the history's first line"
    else:
        why = (
            "is missing"
            if first is None
            else "is empty"
            if not first
            else "does not start with the line it names"
        )
        remedy = (
            f"{HISTORY_NAME} {why}: it may have been emptied, cut or replaced; restore "
            "both from a backup, or accept the history as it is: "
            "ledger doctor --fix --drop-damaged"
        )
    found.problems.append(f"{path}: damaged mark of the history's first line ({remedy})")


def _first_line(root: str, root_fd: int) -> bytes | None:
    """history.jsonl's first whole line (b"" when it has none; None when it is missing)."""
    from ledger_cli.stores.jsonfile import fsutil, historymark
    from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, io_scope, shown

    path = shown(root, HISTORY_NAME)
    fd = fsutil.open_regular(root_fd, HISTORY_NAME, fsutil.READ_FLAGS, path)
    if fd is None:
        return None
    with io_scope(fd, path, "cannot read"):
        return historymark.first_line(fd)


def read_history(s: Session, root: str, found: Findings, drop: bool) -> list[HistoryEntry] | None:
    """The history's whole lines (None when it cannot be read: reported),
    after its torn last line is reported, or with `drop` cut and kept."""
    from ledger_cli.stores.jsonfile import fsutil, historyfile, historymark

    try:
        root_fd = fsutil.open_root(root)
        if root_fd is not None:
            try:
                # Without the lock first: a torn line is rare, the lock is not.
                if historyfile.torn_tail(root, root_fd) is not None:
                    _torn(s, root, root_fd, found, drop)
            finally:
                os.close(root_fd)
        try:
            return list(historyfile.stream(root, None, []))
        except historymark.MarkDamageError:  # named by check_mark: read without it
            from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, shown

            path = shown(root, HISTORY_NAME)
            root_fd = fsutil.open_root(root)
            if root_fd is None:
                return []
            try:
                data = fsutil.read_file(root_fd, HISTORY_NAME, path) or b""
            finally:
                os.close(root_fd)
            return historyfile.parse_history(data, path)
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return None


def _torn(s: Session, root: str, root_fd: int, found: Findings, drop: bool) -> None:
    """Under the store lock: an append that was in progress is done by now,
    and a crash's torn line cut by the replay; what is left is damage."""
    from ledger_cli.cli.commands.doctor.lost import dropped_entry
    from ledger_cli.stores.jsonfile import historyfile
    from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, shown

    path = shown(root, HISTORY_NAME)
    with s.store.batch():
        if historyfile.torn_tail(root, root_fd) is None:
            return
        if not drop:
            found.problems.append(output.one_line(str(historyfile.damaged_history(path))))
            return
        # A cut around wal.log: its frames made durable first, so a restart
        # never replays one at an offset the cut moved (wal.py).
        s.store.checkpoint(root_fd)  # type: ignore[attr-defined]
        cut = historyfile.keep_torn_tail(root, root_fd)
        if cut is None:
            return
        size, kept = cut
        what = f"{path} ended mid-line: its torn last {size} bytes cut, kept in {kept}"
        entry = dropped_entry(s, str(s.now()), "", what)
        s.store.append_history([entry])  # type: ignore[attr-defined]
    found.fixed.append(
        output.clip(f"cut the torn last line of {path} ({size} bytes), kept in {kept}")
    )
