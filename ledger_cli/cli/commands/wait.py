"""`ledger wait KEY… | --all [--timeout D] [--interval D]` (docs/design.md §7.5).

Returns when every KEY is settled (completed, failed or blocked), printing a
line as each settles. Each poll reads only the keys not yet settled; `--all`
reads the store's status counts (a SQL store counts in the database; the JSON
store reads its live records only) until nothing is pending or claimed.
Exit 0: every KEY completed; 1: any failed or blocked (`--all`: any record of
the store is, at the end, and stderr names the first few of them; `--json`
lists every one of them under "settled", the completed ones only counted);
3: a KEY has no record (checked first); 124: the timeout ran out; 9: the store
was still failing when it did.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_duration
from ledger_cli.errors import NoKeyError, StoreError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

SETTLED = frozenset({"completed", "failed", "blocked"})
TIMED_OUT_EXIT = 124
SHOWN_UNSETTLED = 5
SHOWN_BAD = 5


def _positive(text: str | None, what: str, default: float | None) -> float | None:
    if text is None:
        return default
    seconds = parse_duration(text, what).total_seconds()
    if seconds <= 0:
        raise InputError(f"ledger: {what} must be more than 0, got {text!r}")
    return seconds


def latest_exit(store: Store, key: str) -> int | None:
    """The exit status of the key's latest attempt, or None."""
    from ledger_cli.stores.attemptlog import attempt_log

    try:
        atts = attempt_log(store).list_attempts(key)
    except StoreError:
        atts = []
    return atts[-1].exit if atts else None


def settled_outcomes(
    store: Store, recs: Sequence[TaskState]
) -> list[tuple[str | None, int | None]]:
    """The mark after each settled record's status and its `--json` exit, in
    order: a failure's as `tree` marks it (`exit 1`, `SIGTERM`, `timed out`,
    `cancelled by A: R`: cli/outcome.py, which reads the history once for
    all of them), a completion's exit (0 after a run), nothing for a blocked
    record (it never ran)."""
    failed = [(rec.key, rec.fence) for rec in recs if rec.status == "failed"]
    marks: dict[str, tuple[str | None, dict[str, Any]]] = {}
    if failed:
        from ledger_cli.cli.outcome import failure_outcomes

        marks = failure_outcomes(store, failed)
    found: list[tuple[str | None, int | None]] = []
    for rec in recs:
        if rec.status == "blocked":
            found.append((None, None))
        elif rec.status == "failed":
            mark, fields = marks[rec.key]
            found.append((mark, fields["exit"]))
        else:
            found.append((None, latest_exit(store, rec.key)))
    return found


def settled_line(rec: TaskState, mark: str | None) -> str:
    if rec.status == "blocked":
        return f"blocked {rec.key} by {rec.blocked_by}"
    return f"{rec.status} {rec.key} ({mark})" if mark else f"{rec.status} {rec.key}"


def wait(
    settings: Settings,
    keys: list[str] | None = None,
    all_: bool = False,
    timeout: str | None = None,
    interval: str | None = None,
    queue: list[str] | None = None,
) -> int:
    keys = list(dict.fromkeys(keys or ()))
    from ledger_cli.cli.queueargs import parse_queues

    in_queues = parse_queues(queue)
    if in_queues is not None and not all_:
        raise InputError("ledger: --queue goes with --all")
    if all_ and keys:
        raise InputError("ledger: wait takes KEYs or --all, not both")
    if not all_ and not keys:
        raise InputError("ledger: wait needs a KEY (or --all)")
    limit = _positive(timeout, "--timeout", None)
    every = _positive(interval, "--interval", 1.0)
    assert every is not None
    deadline = None if limit is None else time.monotonic() + limit
    with Session(settings, reads=True) as s:
        if all_:
            return _wait_all(s, every, deadline, in_queues)
        return _wait_keys(s, keys, every, deadline)


def _sleep(every: float, deadline: float | None) -> bool:
    """Sleep one interval; False when the deadline has passed."""
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(every, left))
        return True
    time.sleep(every)
    return True


def _wait_keys(s: Session, keys: list[str], every: float, deadline: float | None) -> int:
    for key in keys:  # nothing waits on a typo
        if s.load(key) is None:
            raise NoKeyError(key=key)
    unsettled = list(keys)
    settled: list[dict[str, Any]] = []
    bad = False
    failing: StoreError | None = None
    while True:
        try:
            still = []
            now: list[TaskState] = []
            for key in unsettled:
                rec = s.load(key)
                if rec is None or rec.status not in SETTLED:
                    still.append(key)
                else:
                    now.append(rec)
            for rec, (mark, exit_) in zip(now, settled_outcomes(s.store, now), strict=True):
                bad = bad or rec.status != "completed"
                settled.append(_settled_item(rec, exit_))
                if not s.settings.json:
                    output.line(settled_line(rec, mark))
            unsettled = still
            failing = None
        except StoreError as exc:
            failing = exc  # tried again until the timeout
        if not unsettled:
            break
        if not _sleep(every, deadline):
            if failing is not None:
                raise failing
            _report_timeout(s, settled, unsettled)
            return TIMED_OUT_EXIT
    if s.settings.json:
        output.json_line({"settled": settled, "unsettled": [], "timed_out": False})
    return 1 if bad else 0


def _settled_item(rec: TaskState, exit_: int | None) -> dict[str, Any]:
    blocked_by = rec.blocked_by or None
    return {"key": rec.key, "status": rec.status, "blocked_by": blocked_by, "exit": exit_}


def _report_timeout(s: Session, settled: list[dict[str, Any]], unsettled: list[str]) -> None:
    first = ", ".join(unsettled[:SHOWN_UNSETTLED])
    more = "…" if len(unsettled) > SHOWN_UNSETTLED else ""
    output.diag(f"ledger: timed out; {len(unsettled):,} still unsettled: {first}{more}")
    if s.settings.json:
        output.json_line({"settled": settled, "unsettled": unsettled, "timed_out": True})


def _queue_counts(store: Store, in_queues: frozenset[str]) -> dict[str, int]:
    """The live records (pending, claimed) of the given queues, by status."""
    from ledger_cli.engine import queues
    from ledger_cli.engine.ready import candidates

    side = queues.every(store)
    found: dict[str, int] = {}
    for rec in candidates(store):
        if side.get(rec.key, queues.DEFAULT) in in_queues:
            found[rec.status] = found.get(rec.status, 0) + 1
    return found


def counts(store: Store) -> dict[str, int]:
    """Records by status: the store's own counts, else its live records only
    (pending and claimed) from its status index (the JSON store's counts are
    None while its tally is not built: during a prune, after a crash, until
    the next writer builds it)."""
    counter = getattr(store, "status_counts", None)
    if counter is not None:
        got: dict[str, int] | None = counter()
        if got is not None:
            return got
    by_status = getattr(store, "by_status", None)
    live = by_status(("pending", "claimed")) if by_status is not None else list(store.range())
    found: dict[str, int] = {}
    for rec in live:
        found[rec.status] = found.get(rec.status, 0) + 1
    return found


def _wait_all(
    s: Session, every: float, deadline: float | None, in_queues: frozenset[str] | None = None
) -> int:
    """`--all`: until nothing is pending or claimed (in `in_queues` only, when given)."""
    failing: StoreError | None = None
    now: dict[str, int] = {}
    while True:
        try:
            now = counts(s.store) if in_queues is None else _queue_counts(s.store, in_queues)
            failing = None
            if not now.get("pending", 0) and not now.get("claimed", 0):
                break
        except StoreError as exc:
            failing = exc
        if not _sleep(every, deadline):
            if failing is not None:
                raise failing
            left = now.get("pending", 0) + now.get("claimed", 0)
            doc: dict[str, Any] | None = None
            if s.settings.json:
                # reference.md: `settled` lists every failed and blocked record here too.
                # Read before a line is printed: a store that cannot name the
                # records it counted (a lost live/ entry) fails alone (exit 9).
                settled = _settled_items(s.store, _bad(s.store, in_queues))
                unsettled = _live_keys(s.store, in_queues)
                doc = {"settled": settled, "unsettled": unsettled, "timed_out": True}
                left = len(unsettled)  # the line says what the document lists
            records = "record" if left == 1 else "records"
            output.diag(f"ledger: timed out; {left:,} {records} still pending or claimed")
            if doc is not None:
                output.json_line(doc)
            return TIMED_OUT_EXIT
    bad = _bad(s.store, in_queues)
    if s.settings.json:
        settled = _settled_items(s.store, bad)
        output.json_line({"settled": settled, "unsettled": [], "timed_out": False})
    if bad:
        shown = ", ".join(rec.key for rec in bad[:SHOWN_BAD])
        more = f" and {len(bad) - SHOWN_BAD:,} more" if len(bad) > SHOWN_BAD else ""
        failed = output.counted(len(bad), "record", commas=True)
        output.diag(f"ledger: {failed} failed or blocked: {shown}{more}")
    return 1 if bad else 0


def _bad(store: Store, in_queues: frozenset[str] | None) -> list[TaskState]:
    """The failed and blocked records (of `in_queues`, when given), by key."""
    bad = failed_or_blocked(store)
    if in_queues is not None:
        from ledger_cli.engine import queues

        side = queues.every(store)
        bad = [r for r in bad if side.get(r.key, queues.DEFAULT) in in_queues]
    return bad


def _settled_items(store: Store, bad: list[TaskState]) -> list[dict[str, Any]]:
    outcomes = settled_outcomes(store, bad)
    return [_settled_item(rec, exit_) for rec, (_mark, exit_) in zip(bad, outcomes, strict=True)]


def _live_keys(store: Store, in_queues: frozenset[str] | None) -> list[str]:
    """The keys still pending or claimed (of `in_queues`, when given), sorted:
    what `--all` was waiting for when it timed out."""
    from ledger_cli.engine import queues
    from ledger_cli.engine.ready import candidates
    from ledger_cli.engine.record import byte_order

    live = candidates(store)
    if in_queues is not None:
        side = queues.every(store)
        live = [rec for rec in live if side.get(rec.key, queues.DEFAULT) in in_queues]
    return sorted((rec.key for rec in live), key=byte_order)


def failed_or_blocked(store: Store) -> list[TaskState]:
    """The failed and blocked records, pruned ones left out (as `stats`
    counts them), sorted by key: a store's `by_status` (a SQL store selects
    them in the database; the JSON store scans, its status index holding live
    records only), else every record read."""
    from ledger_cli.engine.prune import is_pruned, visible
    from ledger_cli.engine.record import byte_order

    wanted = ("failed", "blocked")
    by_status = getattr(store, "by_status", None)
    if by_status is not None:
        found = [
            rec
            for rec in by_status(wanted)
            if rec.status != "failed" or not is_pruned(store, rec.key)
        ]
    else:
        found = [rec for rec in visible(store) if rec.status in wanted]
    return sorted(found, key=lambda rec: byte_order(rec.key))
