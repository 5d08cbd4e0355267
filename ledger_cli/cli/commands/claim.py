"""`ledger claim KEY` and `ledger claim --next`: take a lease, print its fence."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import (
    InputError,
    owner_and_lease,
    parse_duration,
)
from ledger_cli.errors import LedgerError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ledger_cli.cli.context import Attempt
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.pause import PauseInfo
    from ledger_cli.engine.queues import Slots
    from ledger_cli.engine.record import TaskState


class NothingReadyError(LedgerError):
    """`claim --next` / `run --next` found no ready task (exit 7)."""

    code = "nothing_ready"
    exit_code = 7
    message = "ledger: nothing is ready to claim"


class PausedError(NothingReadyError):
    """`claim --next` / `run --next` on a paused store (docs/design.md §8.3; exit 7):
    `ledger: claiming is paused (since T by ACTOR: REASON); ledger resume starts it again`.

    A NothingReadyError, so a `--drain` worker stops as if nothing were ready."""

    code = "paused"

    def __init__(self, since: str) -> None:
        super().__init__(f"ledger: claiming is paused ({since}); ledger resume starts it again")


def claim(
    settings: Settings,
    key: str | None,
    owner: str,
    lease: str,
    next_: bool = False,
    wait: str | None = None,
    give_up_after: str | None = None,
    queue: list[str] | None = None,
) -> int:
    if give_up_after is not None and wait is None:  # no outage is ridden out without it
        raise InputError("ledger: --give-up-after goes with --wait")
    give_up = 0.0
    if next_ or give_up_after is not None:  # claim KEY rides out no outage: no outage.py
        from ledger_cli.cli.outage import parse_give_up

        give_up = parse_give_up(give_up_after)
    wanted = None
    if queue:
        from ledger_cli.cli.queueargs import parse_queues

        wanted = parse_queues(queue)
    if next_:
        if key is not None:
            raise InputError("ledger: claim takes a KEY or --next, not both")
        if settings.now:  # the clock's now cannot reach the year 9999: nothing to import
            from ledger_cli.cli.when import check_lease

            check_lease(settings, lease, owner_and_lease(owner, lease)[1])
        if wait is not None:  # a store that is not there is waited for, not created
            from ledger_cli.cli.storeappears import wait_for_store

            wait = wait_for_store(settings, wait)
            if wait is None:
                raise NothingReadyError()
        from ledger_cli.cli.outage import open_session

        # Without --wait there is nothing to claim in a store that does not exist.
        with open_session(settings, give_up if wait is not None else None, wait is None) as s:
            got, fence, _ = claim_next_timed(s, owner, lease, wait, give_up, queues=wanted)
        if settings.json:
            output.json_line(
                {
                    "key": got.key,
                    "fence": fence,
                    "record": output.record(got),
                    "task": output.task(got.task),
                }
            )
        else:
            output.line(f"{got.key} {fence}")
        return 0
    if key is None:
        raise InputError("ledger: claim needs a KEY (or --next)")
    if wait is not None:
        raise InputError("ledger: --wait goes with --next")
    if wanted is not None:
        raise InputError("ledger: --queue goes with --next")
    owner, lease_td = owner_and_lease(owner, lease)
    if settings.now:  # (the clock's now cannot reach the year 9999: nothing to import)
        from ledger_cli.cli.when import check_lease

        check_lease(settings, lease, lease_td)
    with Session(settings, existing=True) as s:
        fence, rec = claim_key(s, key, owner, lease_td)
    output.fence_line(settings.json, key, fence, rec)
    return 0


def claim_key(
    s: Session,
    key: str,
    owner: str,
    lease_td: timedelta,
    then: Callable[[TaskState, int], None] | None = None,
) -> tuple[int, TaskState | None]:
    """Claim KEY in one unit, its queue's slot checked first; `then(record,
    fence)` runs inside that unit (`run` records its first attempt's start)."""
    for attempt in s.writes(s.unit_now()):  # now: once the write lock is held
        with attempt:
            now = attempt.clock(key)
            check_slot(s, key, now)
            fence = s.ledger.claim(s.actor, key, owner, lease_td, now)
            rec = s.load(key)
            if then is not None and rec is not None:
                then(rec, fence)
    return fence, rec


def check_slot(s: Session, key: str, now: Instant) -> None:
    """In the claim's unit: refuse (exit 4) a claimable task whose queue is at
    its limit; anything else is left to the claim's own checks."""
    from ledger_cli.engine import queues

    rec = s.load(key)
    if rec is not None and rec.status in ("pending", "claimed"):
        queues.check_slot(s.store, key, now)


def _nameable(key: str) -> bool:
    """A key `--next` can print so that a worker can name it back (`ready.nameable`)."""
    from ledger_cli.engine.ready import nameable

    return nameable(key)


def claim_next(s: Session, owner: str, lease: str, wait: str | None) -> tuple[TaskState, int]:
    """Claim the oldest ready record (ledger.ready), polling up to `wait`.

    The scan (through the store's ready index) and the claim happen inside one
    `store.batch()`; a candidate lost to a concurrent claimer is skipped, not an
    error.
    """
    rec, fence, _ = claim_next_timed(s, owner, lease, wait)
    return rec, fence


def claim_next_timed(
    s: Session,
    owner: str,
    lease: str,
    wait: str | None,
    give_up: float | None = None,
    in_unit: Callable[[TaskState, int], None] | None = None,
    queues: frozenset[str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[TaskState, int, float]:
    """`claim_next`, and the monotonic time just before the winning claim
    was sent (the lease is proved from then: cli/commands/run/leasekeeper.py).
    `sleep` makes the pauses between tries (`run`'s ends them at a signal).

    With `wait`, a store outage (cli/outage.py) is waited out, over a new
    connection, up to `give_up` seconds of failures (the --wait clock stops
    meanwhile); without, it is an error at once (exit 9). `in_unit(rec,
    fence)` runs in the claim's unit once it claimed (`run`: the attempt's start).
    `queues`: claim only from those queues (None: every queue); a queue at its
    limit is passed over (engine/queues.py).
    """
    from ledger_cli.cli.outage import DEFAULT_GIVE_UP, Outage, cut_after, is_outage, margin_of
    from ledger_cli.errors import EmptyOwnerError, InvalidLeaseError, StoreError

    owner, lease_td = owner_and_lease(owner, lease)
    # The engine would say so at the first claim; say it even when nothing is ready.
    if owner == "":
        raise EmptyOwnerError()
    if lease_td <= timedelta(0):
        raise InvalidLeaseError()
    wait_s = parse_duration(wait, "--wait").total_seconds() if wait is not None else 0.0
    deadline = time.monotonic() + wait_s
    pause = 0.05
    outage = Outage("claim --next --wait", DEFAULT_GIVE_UP if give_up is None else give_up)
    # A claim still unanswered when the lease it asks for would be over (less
    # the margin `run` keeps) could grant nothing a runner can prove: a call
    # blocked on a stalled connection is cut then, and fails as an outage.
    lease_s = lease_td.total_seconds()
    while True:
        sent = time.monotonic()
        held: list[PauseInfo] = []
        full: list[str] = []
        claimed: tuple[TaskState, int] | None = None
        try:
            with cut_after(s.store, lease_s - margin_of(lease_s)):
                # One unit, at the store's clock (None: read with its first ready
                # query; PostgreSQL: no round trip of its own) or --now. One lock
                # hold (a transaction on SQL stores) for the scan and the claim:
                # on PostgreSQL the scan locks its candidate (FOR UPDATE SKIP
                # LOCKED), so concurrent claimers spread over the queue instead of
                # piling onto one.
                for attempt in s.writes(s.unit_now(), "ready_at_clock"):
                    with attempt:
                        del held[:], full[:]
                        claimed = None  # a run rolled back claimed nothing
                        claimed = claim_in_unit(
                            s, attempt, owner, lease_td, held, in_unit, queues, full
                        )
        except StoreError as exc:
            if wait is None or not is_outage(exc):
                raise
            sleep(outage.failed(exc, began=sent))
            deadline += time.monotonic() - sent
            continue
        outage.ok()
        if claimed is not None:
            return claimed[0], claimed[1], sent
        left = deadline - time.monotonic()
        if left <= 0:
            if held:
                raise PausedError(held[0].describe())
            if full:  # what a ready task there would wait for
                raise NothingReadyError(f"{NothingReadyError.message}; {'; '.join(full)}")
            raise NothingReadyError()
        sleep(min(pause, left))
        pause = min(pause * 2, 1.0)


def claim_in_unit(
    s: Session,
    attempt: Attempt,
    owner: str,
    lease_td: timedelta,
    held: list[PauseInfo],
    in_unit: Callable[[TaskState, int], None] | None = None,
    queues: frozenset[str] | None = None,
    full: list[str] | None = None,
) -> tuple[TaskState, int] | None:
    """Claim the first ready record that can be, in the caller's open unit
    `attempt` at its now (None: the store's clock, read with the first ready
    query); on a paused store claim nothing and append the pause to `held`.
    When nothing was claimed, `full` (if given) gets a line for each queue
    passed over at its limit (of `queues`, when given).
    `run --drain` calls this in the unit that records a task's outcome, so
    that the outcome and the next claim commit together."""
    from ledger_cli.engine import ready
    from ledger_cli.engine.pause import paused
    from ledger_cli.engine.queues import QueueChoice

    # Read in the unit that claims: a claim either saw the pause or
    # landed before `pause` returned.
    pause_now = paused(s.store, for_claim=True)
    if pause_now is not None:
        held.append(pause_now)
        return None
    # The queues at their limit are known once the unit's clock is: a
    # store that filters by queue never reads their tasks.
    queues_at = QueueChoice(s.store, queues)
    now = attempt.now
    found = (
        (now, ready.ready_iter(s.store, s.load, now, queues_at(now)))
        if now is not None
        else ready.ready_at_clock(s.store, s.load, queues_at)  # None: no candidate
    )
    claimed = None
    if found is not None:
        attempt.now = found[0]
        claimed = _claim_first(s, found[1], owner, lease_td, found[0], queues, queues_at.slots)
    if claimed is not None and in_unit is not None:
        in_unit(*claimed)
    slots = queues_at.slots
    if claimed is None and full is not None and slots is not None:
        at_limit = sorted(q for q in slots.full_queues() if queues is None or q in queues)
        full.extend(slots.describe(q) for q in at_limit)
    return claimed


def _claim_first(
    s: Session,
    ready_now: Iterable[TaskState],
    owner: str,
    lease: timedelta,
    now: Instant,
    wanted: frozenset[str] | None = None,
    slots: Slots | None = None,
) -> tuple[TaskState, int] | None:
    """Claim the first of the ready records that can be claimed (in the open
    unit), from the `wanted` queues only, passing over a queue at its limit:
    the count and the claim are in the same unit, so no two claimers can both
    take a queue's last slot. `slots`: the unit's, when read before the walk."""
    from ledger_cli.engine import queues
    from ledger_cli.engine.leases import next_fence_fits
    from ledger_cli.errors import LeaseActiveError, NoKeyError, NotClaimedError

    # Without --queue and without limits, no candidate's queue is read.
    if slots is None:
        slots = queues.Slots(s.store, now)
    filtering = wanted is not None or bool(slots.limits)
    for cand in ready_now:
        if not _nameable(cand.key):
            continue  # invalid UTF-8 (another writer's bytes): no output could name it
        if not next_fence_fits(s.store, cand):
            continue  # at the store's largest fence: never claimable (`claim KEY` says so)
        queue = queues.of(s.store, cand.key) if filtering else queues.DEFAULT
        if (wanted is not None and queue not in wanted) or slots.full(queue):
            continue
        if not slots.lock_slot(queue):
            continue  # others took its last slot meanwhile (PostgreSQL)
        try:
            fence = s.ledger.claim(s.actor, cand.key, owner, lease, now)
        except (LeaseActiveError, NotClaimedError, NoKeyError):
            continue  # lost to a concurrent claimer (or blocked meanwhile)
        slots.took(queue)
        rec = s.load(cand.key)
        return (rec if rec is not None else cand), fence
    return None
