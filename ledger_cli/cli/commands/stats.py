"""`ledger stats`: counts for dashboards and alerts (docs/design.md §6.5).

One function, `collect`, computes every figure (the same Ready rule as
`claim --next`, from `ready.py`), so that `stats`, `watch` and anything
later read one definition. Rendered three ways: a small rich table, `--json`,
and the Prometheus text exposition format (`--prometheus`, written by the
`prometheus_client` library, imported only here). `-o FILE` writes atomically
(temp file, fsync, rename, directory fsync) for node_exporter's textfile
collector.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from ledger_cli.cli import outfile, output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from contextlib import AbstractContextManager

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

STATUSES = ("pending", "claimed", "completed", "failed", "blocked")


@dataclasses.dataclass(frozen=True, slots=True)
class Stats:
    counts: dict[str, int]
    pruned: int
    ready: int
    expired_leases: int
    oldest_ready_age_seconds: float | None
    ready_invalid_keys: int = 0
    """Ready by the rule, but keyed with bytes that are not valid UTF-8 (the
    Go service's): `claim --next` never hands one out, so `ready` and the
    oldest age leave them out and count them here."""
    paused: bool = False  # docs/design.md §8.3
    scheduled: int = 0  # docs/design.md §8.1: pending tasks not yet due
    queues: dict[str, dict[str, int | None]] = dataclasses.field(default_factory=dict)
    """Per queue (docs/design.md §8.7): pending, claimed, ready, limit, held."""

    def to_obj(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "pruned": self.pruned,
            "ready": self.ready,
            "expired_leases": self.expired_leases,
            "oldest_ready_age_seconds": self.oldest_ready_age_seconds,
            "ready_invalid_keys": self.ready_invalid_keys,
            "paused": self.paused,
            "scheduled": self.scheduled,
            "queues": self.queues,
        }

    def note(self) -> str | None:
        """The line that shows the ready tasks `claim --next` passes by, if any."""
        n = self.ready_invalid_keys
        if not n:
            return None
        return (
            f"{n} more task(s) ready but keyed with bytes that are not valid UTF-8 (written"
            " by another program, such as the Go service): claim --next never hands them"
            " out, so ready and oldest ready leave them out; ledger doctor names them"
        )


def pruned_count(store: Store) -> int:
    """How many records `ledger prune` has pruned (the store's own count)."""
    from ledger_cli.engine.prune import count_pruned

    return count_pruned(store)


def collect(store: Store, now: Instant, per_queue: bool = True) -> Stats:
    """Every figure of `ledger stats` at `now` (`gather`'s figures)."""
    return gather(store, now, per_queue)[0]


TRIES_UNLOCKED = 2
"""Reads of the JSON store's figures without its lock before they are read under it."""


def instant(store: Store) -> AbstractContextManager[None]:
    """The store's read snapshot (an SQL store's `snapshot()`: every read in the
    block sees one instant, and none blocks a writer), else a block that does
    nothing."""
    snap: Callable[[], AbstractContextManager[None]] | None = getattr(store, "snapshot", None)
    if snap is None:
        import contextlib

        return contextlib.nullcontext()
    return snap()


def gather(
    store: Store, now: Instant, per_queue: bool = True
) -> tuple[Stats, dict[str, TaskState] | None]:
    """`_gather`'s figures, consistent with one another: they describe the
    store at one instant (docs/design.md §6.5).

    `per_queue=False` leaves the per-queue figures out (`Stats.queues` empty):
    they read every task outside `default`, so only the outputs that show
    them (`--json`, `--prometheus`, `--queue`) pay for them.

    An SQL store's figures are read in its `snapshot()` (PostgreSQL: one
    REPEATABLE READ, READ ONLY transaction; SQLite: one deferred read
    transaction, which in WAL mode sees one snapshot): writers go on beside it.

    The JSON store's figures are read without the lock, each file as it is
    then: read across a commit, a task could be counted pending and its queue
    claimed, a queue show more claimed than its limit, a record be counted
    completed and pruned both. Figures read between two equal
    `commit_stamp()`s (changed by every commit, None while one is being
    applied: jsonfile/commitstamp.py) saw no commit; after TRIES_UNLOCKED
    reads that saw one, they are read again under the lock (`reads_locked`:
    a commit's wait, then the same reads)."""
    stamp: Callable[[], bytes | None] | None = getattr(store, "commit_stamp", None)
    locked: Callable[[], AbstractContextManager[None]] | None = getattr(store, "reads_locked", None)
    if stamp is None or locked is None:
        with instant(store):
            return _gather(store, now, per_queue)
    for _ in range(TRIES_UNLOCKED):
        before = stamp()
        got = _gather(store, now, per_queue)
        if before is not None and stamp() == before:
            return got
    with locked():
        return _gather(store, now, per_queue)


def _gather(
    store: Store, now: Instant, per_queue: bool
) -> tuple[Stats, dict[str, TaskState] | None]:
    """Every figure of `ledger stats` at `now`, pruned records left out of
    every count but `pruned` (docs/design.md §6.4); and, when they had to be read for
    the counts, the unpruned records by key (`watch` draws its table from
    them), else None.

    A SQL store counts by status in the database (`status_counts()`), its
    status index serves the claimed records, and the ready figures come from
    its ready index (`ready.count_ready`: the pending candidates that name no
    needs are counted in SQL, the others judged by the Ready rule): they cost
    what the claimed candidates and those with needs cost, not what the whole
    store costs. Any other store has to read every unpruned record for the
    counts, so the same pass judges the Ready rule over them too (the
    brute-force evaluation the ready indexes are tested against), instead of
    reading each candidate again. On the JSON store that pass takes no lock:
    a record written while it runs is counted as it was read, or (a record
    new since the scan passed its directory) not at all.
    """
    from ledger_cli.engine import ready

    counter: Callable[[], dict[str, int] | None] | None = getattr(store, "status_counts", None)
    by_status: Callable[[Iterable[str]], list[TaskState]] | None = getattr(store, "by_status", None)
    counts = dict.fromkeys(STATUSES, 0)
    # None from the JSON store while its tally is not built: read the records.
    counted = counter() if counter is not None and by_status is not None else None
    if counted is not None and by_status is not None:
        for status, n in counted.items():
            if status in counts:
                counts[status] = n
        # The JSON store's tally names its claimed records (its status index,
        # live/, would read the pending ones too).
        claimed: Callable[[], list[TaskState]] | None = getattr(store, "claimed_records", None)
        held = claimed() if claimed is not None else by_status(("claimed",))
        expired = sum(r.lease_until <= now for r in held)
        ready_count, oldest_ready, apart = ready.count_ready(store, store.load, now)
        records: dict[str, TaskState] | None = None
    else:
        from ledger_cli.engine.prune import visible

        # The JSON store streams its records without the lock (as `list
        # --jsonl` reads them): a writer never waits for a `stats` or a `watch`
        # refresh, however long the scan. Each record is read once, whole.
        scan: Callable[[], Iterable[TaskState]] | None = getattr(store, "scan_visible", None)
        records = {r.key: r for r in (scan() if scan is not None else visible(store))}
        expired = 0
        for rec in records.values():
            if rec.status in counts:
                counts[rec.status] += 1
            if rec.status == "claimed" and rec.lease_until <= now:
                expired += 1

        def load(key: str) -> TaskState | None:  # a pruned need: from the store
            return records[key] if key in records else store.load(key)

        from ledger_cli.engine import schedule

        kept = schedule.every(store) if schedule.any_kept(store) else None
        found = ready.ready_records(records.values(), load, now, kept)
        claimable = [r for r in found if ready.nameable(r.key)]  # as claim --next
        apart = len(found) - len(claimable)
        ready_count = len(claimable)
        # The smallest CreatedAt, not the first in the Ready order (ready.count_ready).
        oldest_ready = min(claimable, key=lambda r: r.created_at.unix_ns, default=None)
    oldest = None
    if oldest_ready is not None:
        oldest = max(now.unix_ns - oldest_ready.created_at.unix_ns, 0) / 1e9
    from ledger_cli.engine import queues
    from ledger_cli.engine.pause import paused

    is_paused = paused(store) is not None
    figures = Stats(
        counts,
        pruned_count(store),
        ready_count,
        expired,
        oldest,
        apart,
        is_paused,
        _scheduled(store, now),
        queues.figures(store, now, counts, ready_count) if per_queue else {},
    )
    return figures, records


def _scheduled(store: Store, now: Instant) -> int:
    """Pending tasks whose not-before is still ahead (docs/design.md §8.1)."""
    from ledger_cli.engine import schedule

    if not schedule.any_kept(store):
        return 0
    count = 0
    for key, (nb, _) in schedule.every(store).items():
        if nb > now:
            rec = store.load(key)
            count += rec is not None and rec.status == "pending" and nb > rec.created_at
    return count


def prometheus_text(stats: Stats) -> str:
    """The Prometheus text exposition format (HELP and TYPE for every gauge)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry(auto_describe=True)
    tasks = Gauge("ledger_tasks", "Tasks in the ledger by status.", ["status"], registry=registry)
    for status in STATUSES:
        tasks.labels(status=status).set(stats.counts[status])
    gauges = (
        ("ledger_pruned_tasks", "Tasks pruned (their keys kept for idempotency).", stats.pruned),
        ("ledger_ready_tasks", "Tasks ready to claim now (claim --next).", stats.ready),
        ("ledger_expired_leases", "Claimed tasks whose lease has run out.", stats.expired_leases),
        (
            "ledger_oldest_ready_age_seconds",
            "Age of the oldest ready task (0 with nothing ready).",
            stats.oldest_ready_age_seconds or 0,
        ),
        ("ledger_paused", "1 while --next claims are paused (ledger pause), else 0.", stats.paused),
        ("ledger_scheduled_tasks", "Pending tasks not yet due (--not-before).", stats.scheduled),
    )
    for name, help_text, value in gauges:
        Gauge(name, help_text, registry=registry).set(value)
    # Each queue's figures (`stats --json`'s "queues"), labelled by queue.
    per_queue = Gauge(
        "ledger_queue_tasks",
        "Pending and claimed tasks by queue and status.",
        ["queue", "status"],
        registry=registry,
    )
    ready = Gauge(
        "ledger_queue_ready_tasks",
        "Tasks ready to claim now, by queue.",
        ["queue"],
        registry=registry,
    )
    held = Gauge(
        "ledger_queue_held_slots",
        "Live leases by queue (the slots a limit counts).",
        ["queue"],
        registry=registry,
    )
    limit = Gauge(
        "ledger_queue_limit",
        "A queue's limit (ledger limit), for queues with one.",
        ["queue"],
        registry=registry,
    )
    for queue, row in stats.queues.items():
        for status in ("pending", "claimed"):
            per_queue.labels(queue=queue, status=status).set(row[status] or 0)
        ready.labels(queue=queue).set(row["ready"] or 0)
        held.labels(queue=queue).set(row["held"] or 0)
        if row["limit"] is not None:
            limit.labels(queue=queue).set(row["limit"])
    return generate_latest(registry).decode("utf-8")


def human(stats: Stats, to_file: bool, queues: bool = False) -> str:
    """The text table; with `queues` (stats --queue), a row per queue after it."""
    import io

    from rich.table import Table

    from ledger_cli.cli import render

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    for status in STATUSES:
        table.add_row(render.status_text(status), str(stats.counts[status]))
    table.add_row("ready", str(stats.ready))
    table.add_row("expired leases", str(stats.expired_leases))
    oldest = stats.oldest_ready_age_seconds
    table.add_row("oldest ready", "-" if oldest is None else render.duration(oldest))
    table.add_row("pruned", str(stats.pruned))
    note = "" if stats.note() is None else f"note: {stats.note()}\n"
    if stats.scheduled:
        table.add_row("scheduled", str(stats.scheduled))
    if stats.paused:
        table.add_row("paused", "yes: --next claims exit 7 until ledger resume (--wait waits)")
    if queues:
        from rich.text import Text  # a queue name is shown as text, never as markup

        for name, row in stats.queues.items():
            held = "" if row["limit"] is None else f", held {row['held']} of {row['limit']}"
            figures = f"pending {row['pending']}, claimed {row['claimed']}, ready {row['ready']}"
            table.add_row(Text(f"queue {render.safe(name)}"), figures + held)
    if to_file:  # plain text, no colours
        buf = io.StringIO()
        render.console(file=buf, width=60).print(table)
        return buf.getvalue() + note
    con = render.console(width=60)
    with con.capture() as cap:
        con.print(table)
    return cap.get() + note


def stats(
    settings: Settings,
    prometheus: bool = False,
    out: str | None = None,
    queue: list[str] | None = None,
) -> int:
    if prometheus and settings.json:
        raise InputError("ledger: give --json or --prometheus, not both")
    from ledger_cli.cli.queueargs import parse_queues

    wanted = parse_queues(queue)
    with Session(settings, reads=True) as s:
        shown = prometheus or settings.json or wanted is not None
        figures = collect(s.store, s.now(), per_queue=shown)
    if wanted is not None:
        # --queue: the per-queue figures of those queues only (a named queue
        # with no task and no limit reads as zeros); the counts stay the store's.
        empty: dict[str, int | None] = {
            "pending": 0, "claimed": 0, "ready": 0, "limit": None, "held": 0
        }  # fmt: skip
        rows = {q: figures.queues.get(q, dict(empty)) for q in sorted(wanted)}
        figures = dataclasses.replace(figures, queues=rows)
    if prometheus:
        text = prometheus_text(figures)
    elif settings.json:
        text = output.dumps(figures.to_obj()) + "\n"
    else:
        text = human(figures, to_file=out not in (None, "-"), queues=wanted is not None)
    if out is None or out == "-":
        sys.stdout.write(text)
        return 0
    outfile.write_atomically(out, text.encode("utf-8"))
    return 0
