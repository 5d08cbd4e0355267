"""`ledger watch`: a live view of the unfinished work (docs/design.md §6.6).

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


def unfinished(
    store: Store,
    statuses: set[str] | None,
    *,
    limit: int | None = None,
    counts: dict[str, int] | None = None,
    records: dict[str, TaskState] | None = None,
) -> tuple[list[TaskState], int]:
    """The first `limit` (None: all) of the pending, claimed and blocked
    records and the failed ones something is blocked by, sorted by key, and
    how many there are in all; pruned records never (they are finished).

    From `records` when the caller has read them all (`stats.gather` on a
    store without SQL counts). Else a SQL store sorts and cuts the table in
    the database (`by_status_head`), the total is its status `counts`, and
    the failures are the keys blocked records name (`blocked_by_keys`), a
    load each: a long backlog is never read whole to draw 200 rows. Else the
    status index (`by_status`) where there is one.
    """
    from ledger_cli.engine.prune import visible

    wanted = [s for s in UNFINISHED if statuses is None or s in statuses]
    load: Callable[[str], TaskState | None] = store.load
    head: Callable[[Iterable[str], int], list[TaskState]] | None = getattr(
        store, "by_status_head", None
    )
    named: Callable[[], list[str]] | None = getattr(store, "blocked_by_keys", None)
    if (
        records is None
        and head is not None
        and named is not None
        and counts is not None
        and limit is not None
    ):
        live = head(wanted, limit)
        roots = set(named())
        total = sum(counts.get(s, 0) for s in wanted)
    else:
        if records is not None:
            every = [r for r in records.values() if r.status in UNFINISHED]
            seen = records
            load = lambda key: seen[key] if key in seen else store.load(key)  # noqa: E731
        else:
            by_status: Callable[[Iterable[str]], list[TaskState]] | None = getattr(
                store, "by_status", None
            )
            every = (
                list(by_status(UNFINISHED))
                if by_status is not None
                else [r for r in visible(store) if r.status in UNFINISHED]
            )
        roots = {r.blocked_by for r in every if r.status == "blocked"}
        live = [r for r in every if r.status in wanted]
        total = len(live)
    failed: list[TaskState] = []
    if statuses is None or "failed" in statuses:
        for key in sorted(roots):
            rec = load(key)
            if rec is not None and rec.status == "failed":
                failed.append(rec)
    rows = sorted([*live, *failed], key=lambda r: byte_order(r.key))
    return (rows if limit is None else rows[:limit]), max(total, len(live)) + len(failed)


def view(
    store: Store,
    now: Instant,
    statuses: set[str] | None,
    interval: str,
    in_queues: frozenset[str] | None = None,
) -> Group:
    from rich.console import Group
    from rich.text import Text

    from ledger_cli.cli import render
    from ledger_cli.cli.commands.stats import STATUSES, gather

    figures, records = gather(store, now)
    line = Text()
    for status in STATUSES:
        line.append_text(render.status_text(status))
        line.append(f" {figures.counts[status]}  ")
    line.append(f"ready {figures.ready}  expired leases {figures.expired_leases}")
    if figures.scheduled:
        line.append(f"  scheduled {figures.scheduled}")
    if figures.oldest_ready_age_seconds is not None:
        line.append(f"  oldest ready {render.duration(figures.oldest_ready_age_seconds)}")
    if in_queues is None:
        shown, total = unfinished(
            store, statuses, limit=MAX_ROWS, counts=figures.counts, records=records
        )
    else:
        # --queue: the table holds those queues' tasks only (each queue's
        # figures on a line of its own); the unfinished records are read whole.
        from ledger_cli.engine import queues

        side = queues.every(store)
        rows, _ = unfinished(store, statuses, records=records)
        rows = [r for r in rows if side.get(r.key, queues.DEFAULT) in in_queues]
        shown, total = rows[:MAX_ROWS], len(rows)
        for name in sorted(in_queues):
            row = figures.queues.get(name)
            line.append(f"\nqueue {name}: ")
            if row is None:
                line.append("no tasks")
                continue
            line.append(f"pending {row['pending']}  claimed {row['claimed']}  ready {row['ready']}")
            if row["limit"] is not None:
                line.append(f"  held {row['held']} of {row['limit']}")
    header = Text(f"ledger watch · every {interval} · q to quit · {now}", style="dim")
    parts: list[object] = [header, line, Text(""), render.record_table(shown, now)]
    if figures.paused:  # docs/design.md §8.3: a banner while --next claims are paused
        from ledger_cli.engine.pause import paused

        held = paused(store)
        since = held.describe() if held is not None else ""
        banner = f" PAUSED {since}: --next claims exit 7 until ledger resume "
        parts.insert(1, Text(banner, style="bold white on red"))
    if total > len(shown):
        parts.append(Text(f"… and {total - len(shown)} more", style="dim"))
    if not shown:
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
    settings: Settings,
    interval: str | None = None,
    statuses: list[str] | None = None,
    queue: list[str] | None = None,
) -> int:
    wanted = {parse_status(s) for s in statuses} if statuses else None
    from ledger_cli.cli.queueargs import parse_queues

    in_queues = parse_queues(queue)
    interval_text = interval or DEFAULT_INTERVAL
    seconds = parse_duration(interval_text, "--interval").total_seconds()
    if seconds <= 0:
        raise InputError(f"ledger: --interval must be positive, got {interval_text}")
    if sys.stdin is None or not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise InputError(NOT_A_TERMINAL, "not_a_terminal")
    from rich.live import Live

    from ledger_cli.cli import render

    fd = sys.stdin.fileno()
    with Session(settings, reads=True) as s:
        con = render.console()
        try:
            with (
                keys_unbuffered(fd),
                Live(console=con, screen=True, auto_refresh=False, transient=True) as live,
            ):
                while True:
                    screen = view(s.store, s.now(), wanted, interval_text, in_queues)
                    live.update(screen, refresh=True)
                    if wait_for_quit(fd, seconds):
                        break
        except KeyboardInterrupt:
            pass
    return 0
