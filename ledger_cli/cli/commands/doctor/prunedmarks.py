"""`ledger doctor`'s check of an SQL store's pruned marks (docs/design.md §6.4).

An SQL store keeps a pruned record as its row in `ledger_tasks` plus its key
in `ledger_pruned`. No prune writes a mark on a key without a row or on an
unfinished record; a row deleted by hand does, and then the key is neither
kept nor free: `admit` starts it anew (its old sequence forgotten) and every
listing and stats hides the new record as pruned, while stats counts a
pruned record there is not. Each such mark is a problem (exit 9), as a
pruned shard of the JSON store other than its count is. `--fix` drops the
mark: the pruned record it stood for is gone (restore it from a snapshot
to keep its key admitted), and the record the key holds now, if any, is
listed again.

A mark deleted by hand is not found: the record it marked reads as an
ordinary finished record without a task or history, as one the Go service
wrote can (docs/design.md §6.4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.engine.record import go_quote
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.cli.commands.doctor.findings import Findings


def _line(key: str, status: str | None) -> str:
    shown = go_quote(key)
    if status is None:
        what = (
            f"which has no record: its pruned record was deleted, so `admit {shown}`"
            " would start it anew and hide it as pruned"
        )
    else:
        what = (
            f"whose record is {status}, not finished: it is hidden from list and stats"
            " as pruned (its pruned record was deleted and the key admitted again)"
        )
    return f"ledger_pruned marks key {shown}, {what}"


def check_pruned_marks(store: object, found: Findings, fix: bool) -> None:
    """A problem for each stray mark; `fix`: the marks dropped, each line fixed."""
    stray: Callable[[], list[tuple[str, str | None]]] | None = getattr(
        store, "stray_pruned_marks", None
    )
    if stray is None:
        return
    try:
        marks = stray()
        if marks and fix:
            store.drop_pruned_marks([key for key, _ in marks])  # type: ignore[attr-defined]
            found.fixed.extend(f"{_line(key, st)}: the mark dropped" for key, st in marks)
            return
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    found.problems.extend(f"{_line(key, st)} (doctor --fix drops the mark)" for key, st in marks)
