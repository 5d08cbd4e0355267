"""`ledger doctor`'s check of the ready index (SPEC §6.1): the index a store keeps
for `claim --next` must agree with the records; `--fix` rebuilds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ledger_cli.cli import output
from ledger_cli.errors import StoreError


class _Findings(Protocol):
    problems: list[str]
    fixed: list[str]


def check_ready_index(store: object, found: _Findings, fix: bool) -> None:
    """Problems when the index disagrees with the records; `fix` rebuilds it first."""
    check: Callable[[], list[str]] | None = getattr(store, "check_ready_index", None)
    rebuild: Callable[[], None] | None = getattr(store, "rebuild_ready_index", None)
    if check is None or rebuild is None:
        return
    try:
        problems = check()
        if problems and fix:
            rebuild()
            found.fixed.append("rebuilt the ready index from the records")
            problems = check()
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    found.problems.extend(f"{p} (ledger doctor --fix rebuilds the index)" for p in problems)
