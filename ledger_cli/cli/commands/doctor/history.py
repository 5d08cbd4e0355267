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


def read_history(s: Session, root: str, found: Findings, drop: bool) -> list[HistoryEntry] | None:
    """The history's whole lines (None when it cannot be read: reported),
    after its torn last line is reported, or with `drop` cut and kept."""
    from ledger_cli.stores.jsonfile import fsutil, historyfile

    try:
        root_fd = fsutil.open_root(root)
        if root_fd is not None:
            try:
                # Without the lock first: a torn line is rare, the lock is not.
                if historyfile.torn_tail(root, root_fd) is not None:
                    _torn(s, root, root_fd, found, drop)
            finally:
                os.close(root_fd)
        return list(historyfile.stream(root, None, []))
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
