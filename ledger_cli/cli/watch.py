"""`ledger watch`: a live view of the unfinished work (SPEC §6.6).

On a terminal: rich's `Live` on the alternate screen, showing the stats line
(`stats.collect`, the same figures as `ledger stats`) and a table of the
unfinished tasks (pending, claimed, blocked, and failed roots that block
something), re-read every `--interval`. `q` or Ctrl-C leaves with exit 0 and
the terminal as it was (screen, cursor, and the keyboard mode). Anywhere else
it refuses with exit 2: a pipe wants `list` or `stats`.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_duration, parse_status
from ledger_cli.engine.record import byte_order

if TYPE_CHECKING:
    from rich.console import Group

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

NOT_A_TERMINAL = "ledger: watch needs a terminal (use list or stats)"
DEFAULT_INTERVAL = "2s"
UNFINISHED = ("pending", "claimed", "blocked")
MAX_ROWS = 200
"""Rows drawn at most (a terminal shows fewer; the stats line counts them all)."""


def unfinished(store: Store, statuses: set[str] | None) -> list[TaskState]:
    """Pending, claimed and blocked records, and the failed ones something is
    blocked by, sorted by key; pruned records never (they are finished).

    Through the store's status index (`by_status`) where it has one, and a
    load per failure named by a block, instead of reading every record.
    """
    from ledger_cli.engine.prune import visible

    by_status: Callable[[Iterable[str]], list[TaskState]] | None = getattr(store, "by_status", None)
    live = (
        list(by_status(UNFINISHED))
        if by_status is not None
        else [r for r in visible(store) if r.status in UNFINISHED]
    )
    rows = list(live)
    for key in sorted({r.blocked_by for r in live if r.status == "blocked"}):
        rec = store.load(key)
        if rec is not None and rec.status == "failed":
            rows.append(rec)
    if statuses:
        rows = [r for r in rows if r.status in statuses]
    return sorted(rows, key=lambda r: byte_order(r.key))


def view(store: Store, now: Instant, statuses: set[str] | None, interval: str) -> Group:
    from rich.console import Group
    from rich.text import Text

    from ledger_cli.cli import render
    from ledger_cli.cli.stats import STATUSES, collect

    figures = collect(store, now)
    line = Text()
    for status in STATUSES:
        line.append_text(render.status_text(status))
        line.append(f" {figures.counts[status]}  ")
    line.append(f"ready {figures.ready}  expired leases {figures.expired_leases}")
    if figures.oldest_ready_age_seconds is not None:
        line.append(f"  oldest ready {render.duration(figures.oldest_ready_age_seconds)}")
    rows = unfinished(store, statuses)
    header = Text(f"ledger watch · every {interval} · q to quit · {now}", style="dim")
    shown = rows[:MAX_ROWS]
    parts: list[object] = [header, line, Text(""), render.record_table(shown, now)]
    if len(rows) > len(shown):
        parts.append(Text(f"… and {len(rows) - len(shown)} more", style="dim"))
    if not rows:
        parts.append(Text("nothing unfinished", style="dim"))
    return Group(*parts)  # type: ignore[arg-type]


@contextlib.contextmanager
def keys_unbuffered(fd: int) -> Iterator[None]:
    """Single keys without Enter (cbreak: Ctrl-C still interrupts); restored after."""
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def wait_for_quit(fd: int, seconds: float) -> bool:
    """Wait up to `seconds` for a key; True when it is `q` (or the input closed)."""
    ready, _, _ = select.select([fd], [], [], seconds)
    if not ready:
        return False
    data = os.read(fd, 64)
    return data == b"" or b"q" in data or b"Q" in data


def watch(
    settings: Settings, interval: str | None = None, statuses: list[str] | None = None
) -> int:
    wanted = {parse_status(s) for s in statuses} if statuses else None
    interval_text = interval or DEFAULT_INTERVAL
    seconds = parse_duration(interval_text, "--interval").total_seconds()
    if seconds <= 0:
        raise InputError(f"ledger: --interval must be positive, got {interval_text}")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise InputError(NOT_A_TERMINAL, "not_a_terminal")
    from rich.live import Live

    from ledger_cli.cli import render

    fd = sys.stdin.fileno()
    with Session(settings) as s:
        con = render.console()
        try:
            with (
                keys_unbuffered(fd),
                Live(console=con, screen=True, auto_refresh=False, transient=True) as live,
            ):
                while True:
                    live.update(view(s.store, s.now(), wanted, interval_text), refresh=True)
                    if wait_for_quit(fd, seconds):
                        break
        except KeyboardInterrupt:
            pass
    return 0
