"""`ledger watch`: a live view of the unfinished work (docs/design.md §6.6).

On a terminal: rich's `Live` on the alternate screen, showing the stats line
(`stats.collect`, the same figures as `ledger stats`) and a table of the
unfinished tasks (pending, claimed, blocked, and failed roots that block
something) cut to the window's height with the count of the rest kept in
view (`fit`), re-read every `--interval` from a store opened as a fresh
command would (`FreshReads`): a store gone or damaged is its `ledger: …` line in
the view (`failed`) until it reads again. `q` or Ctrl-C leaves with the
terminal as it was (screen, cursor, and the keyboard mode): exit 0, or the
last refresh's error and its code; SIGTERM, SIGHUP and SIGQUIT the same way,
exit 128+N (`stopping_signals`). Anywhere else it refuses with exit 2: a
pipe wants `list` or `stats`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ledger_cli.cli.commands.watch.terminal import (
    keys_unbuffered,
    stopping_signals,
    wait_for_quit,
)
from ledger_cli.cli.context import Settings
from ledger_cli.cli.freshreads import FreshReads
from ledger_cli.cli.inputs import InputError, parse_duration, parse_status
from ledger_cli.engine.record import byte_order
from ledger_cli.errors import LedgerError

if TYPE_CHECKING:
    from rich.console import Console, Group, RenderableType
    from rich.text import Text

    from ledger_cli.cli.tablefit import FittedTable
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
    console: Console | None = None,
) -> Group:
    """The screen: the header, the pause banner, the stats line, and as many
    rows of the table as the console's height leaves room for, with the line
    that counts the rest kept on the screen (`fit`); all of them without a
    console. An SQL store's are read in one snapshot (`stats.instant`)."""
    from ledger_cli.cli.commands.stats import instant

    with instant(store):
        return _view(store, now, statuses, interval, in_queues, console)


def _view(
    store: Store,
    now: Instant,
    statuses: set[str] | None,
    interval: str,
    in_queues: frozenset[str] | None,
    console: Console | None,
) -> Group:
    from rich.console import Group
    from rich.text import Text

    from ledger_cli.cli import render
    from ledger_cli.cli.commands.stats import STATUSES, gather

    figures, records = gather(store, now, per_queue=in_queues is not None)
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
            line.append(f"\nqueue {render.safe(name)}: ")
            if row is None:
                line.append("no tasks")
                continue
            line.append(f"pending {row['pending']}  claimed {row['claimed']}  ready {row['ready']}")
            if row["limit"] is not None:
                line.append(f"  held {row['held']} of {row['limit']}")
    above: list[RenderableType] = [header(interval, now), line, Text("")]
    if figures.paused:  # docs/design.md §8.3: a banner while --next claims are paused
        from ledger_cli.engine.pause import paused

        held = paused(store)
        # The actor and reason are untrusted text: a bidi override drawn raw
        # would reorder the banner (docs/design.md §5.3).
        since = render.safe(held.describe()) if held is not None else ""
        banner = f" PAUSED {since}: --next claims exit 7 until ledger resume "
        above.insert(1, Text(banner, style="bold white on red"))
    if not shown:
        empty = nothing(statuses, in_queues)
        return Group(*above, render.record_table([], now), Text(empty, style="dim"))
    count = len(shown) if console is None else fit(console, above, shown, total, now)
    parts = list(above) if count else above[:-1]  # no table: no blank line before it
    if count:
        parts.append(table(shown[:count], now))
    if total > count:
        parts.append(Text(f"… and {total - count} more", style="dim"))
    return Group(*parts)


def nothing(statuses: set[str] | None, in_queues: frozenset[str] | None) -> str:
    """The line under an empty table, true of what was asked for: `nothing
    unfinished`, or the statuses of `--status` (`no claimed tasks`; a failure
    is shown only while it blocks a task), in the queues of `--queue`."""
    from ledger_cli.cli import render

    if statuses is None:
        text = "nothing unfinished"
    else:
        live = [s for s in UNFINISHED if s in statuses]
        clauses = [f"no {' or '.join(live)} tasks"] if live else []
        if "failed" in statuses:
            clauses.append("no failed task blocks another")
        text = ", and ".join(clauses)
    if in_queues is not None:
        names = ", ".join(render.safe(q) for q in sorted(in_queues))
        text += f" in queue{'s' if len(in_queues) > 1 else ''} {names}"
    return text


def header(interval: str, now: Instant) -> Text:
    from rich.text import Text

    return Text(f"ledger watch · every {interval} · q to quit · {now}", style="dim")


def fit(
    console: Console, above: list[RenderableType], rows: list[TaskState], total: int, now: Instant
) -> int:
    """How many of `rows` the table draws below `above` on the console's
    screen, keeping the last line for `… and N more` whenever some of the
    `total` are left out: a short terminal still says how many it hides.
    A row the width wraps (a long key, a narrow window) takes several lines,
    so the table is measured as drawn: the most rows whose table fits, found
    by halving (a row takes at least one line, the table's head two)."""
    options = console.options
    room = console.size.height - sum(
        len(console.render_lines(part, options, pad=False)) for part in above
    )

    def height(count: int) -> int:
        return len(console.render_lines(table(rows[:count], now), options, pad=False))

    if rows and len(rows) >= total and len(rows) <= room - 2 and height(len(rows)) <= room:
        return len(rows)  # every row, and no line for the rest
    spare = room - 1  # the last line says how many more
    low, high = 0, min(len(rows), spare - 2)
    while low < high:
        middle = (low + high + 1) // 2
        if height(middle) <= spare:
            low = middle
        else:
            high = middle - 1
    return max(low, 0)


def table(rows: list[TaskState], now: Instant) -> FittedTable:
    """`list`'s table of `rows` (its names folded, never cut: `render.FOLDED`)."""
    from ledger_cli.cli import render

    return render.record_table(rows, now)


def failed(interval: str, now: Instant, error: LedgerError) -> Group:
    """The screen while the store cannot be read: the header (its clock says
    the view is alive) and the error's line, as a fresh command prints it."""
    from rich.console import Group
    from rich.text import Text

    from ledger_cli.cli import render

    return Group(header(interval, now), Text(render.safe(error.explained()), style="bold red"))


def watch(
    settings: Settings,
    interval: str | None = None,
    statuses: list[str] | None = None,
    queue: list[str] | None = None,
) -> int:
    """The loop. A refresh the store refuses (gone, damaged, out of reach)
    draws its `ledger: …` line in place of the figures and the view goes on:
    the next refresh reads again, and a store mended or made again shows.
    Leaving while the last refresh failed prints that line and exits its
    code (9), as `ledger stats` would; else q and Ctrl-C exit 0, a stopping
    signal 128+N."""
    wanted = {parse_status(s) for s in statuses} if statuses else None
    if wanted is not None and "completed" in wanted:
        raise InputError(
            "ledger: watch shows unfinished tasks, never completed ones"
            " (use list --status completed)"
        )
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
    from ledger_cli.cli.inputs import parse_now
    from ledger_cli.engine.instant import Instant

    fd = sys.stdin.fileno()
    fixed = parse_now(settings.now, settings.now_from) if settings.now else None
    reads = FreshReads(settings)  # the first open: a store that is not there exits 9 at once
    error: LedgerError | None = None
    came: list[int] = []  # the stopping signal, once one arrived
    try:
        con = render.console()
        with (
            stopping_signals(came),
            keys_unbuffered(fd),
            Live(console=con, screen=True, auto_refresh=False, transient=True) as live,
        ):
            while True:
                screen: RenderableType
                try:
                    s = reads.open()
                    screen = view(s.store, s.now(), wanted, interval_text, in_queues, con)
                    error = None
                except LedgerError as exc:
                    error = exc
                    screen = failed(interval_text, fixed or Instant.now(), exc)
                reads.done(ok=error is None)
                live.update(screen, refresh=True)
                if wait_for_quit(fd, seconds):
                    break
    except KeyboardInterrupt:
        pass
    except BaseException:
        # Stopped, or what restoring the terminal raised after it: a hangup
        # can take the terminal away first (EIO), and that is no new error.
        if not came:
            raise
    finally:
        reads.done(ok=False)
    if came:
        return 128 + came[0]
    if error is not None:
        raise error
    return 0
