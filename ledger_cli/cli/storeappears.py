"""`claim --next --wait` and `run --next [--drain] --wait` on an SQLite file
that is not there: only a write creates a store (docs/design.md §3), so the
wait is spent looking for the file, not creating it. Once a write has created
it, the command opens it and waits out what is left (a drain: its first claim
waits a whole --wait, as each of its claims does); when none does, it exits 7
as on an empty store, and no file is left behind.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.cli.context import Settings


def wait_for_store(
    settings: Settings, wait: str, sleep: Callable[[float], None] = time.sleep
) -> str | None:
    """`wait`, or when `--store` names an SQLite file that is not there, what
    is left of it once the file is (looked for at growing pauses, 50 ms to 1 s,
    as the claims' own tries); None when it never is (the caller's exit 7)."""
    from ledger_cli.cli.inputs import parse_duration
    from ledger_cli.stores import missing_sqlite

    if settings.store is None or not missing_sqlite(settings.store):
        return wait
    deadline = time.monotonic() + parse_duration(wait, "--wait").total_seconds()
    pause = 0.05
    while missing_sqlite(settings.store):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sleep(min(pause, left))
        pause = min(pause * 2, 1.0)
    return f"{max(deadline - time.monotonic(), 0.0):.6f}"
