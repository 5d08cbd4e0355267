"""Claim, Renew, Release and Takeover: time-boxed leases with fencing (docs/design.md §2.3-2.5)."""

from __future__ import annotations

from datetime import timedelta

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import CLAIMED, PENDING, TaskState
from ledger_cli.errors import (
    EmptyOwnerError,
    FencedError,
    InvalidLeaseError,
    LeaseActiveError,
    NotClaimedError,
    NotStaleError,
    ValidationError,
    state_detail,
)

_ZERO_LEASE = timedelta(0)


def _state(cur: TaskState) -> str:
    """What the CLI prints after a refusal's sentinel: the record's state."""
    return state_detail(cur.key, cur.status, cur.blocked_by, cur.owner)


def _fence(cur: TaskState) -> str:
    return f" (the current fence of {cur.key} is {cur.fence})"


def _check_owner_and_lease(owner: str, lease: timedelta) -> None:
    if owner == "":
        raise EmptyOwnerError()
    if lease <= _ZERO_LEASE:
        raise InvalidLeaseError()


def _refuse_if_ancestor_blocks(
    core: Core, actor: str, now: Instant, key: str, cur: TaskState
) -> None:
    """A failed or blocked ancestor blocks the record (a refusal that writes)."""
    if not cur.needs:
        return  # no ancestors: the walks (engine/dependencies.py) stay unimported
    from ledger_cli.engine.dependencies import blocking_ancestor

    blocker = blocking_ancestor(core, cur.needs)
    if blocker is not None:
        from ledger_cli.engine.reopen import block_one

        block_one(core, actor, now, key, cur, blocker)  # under engine/serial.py's lock
        raise NotClaimedError(detail=f" ({key} is blocked by {blocker})")


UINT64_MAX = 2**64 - 1
"""The largest sequence or fence Go's uint64 holds: the JSON store's and PostgreSQL's."""


def number_max(store: object) -> int:
    """The largest sequence or fence `store` holds: its `NUMBER_MAX` (SQLite's
    signed 64-bit INTEGER: 2^63-1), else UINT64_MAX."""
    limit: int = getattr(store, "NUMBER_MAX", UINT64_MAX)
    return limit


def next_fence_fits(store: object, rec: TaskState) -> bool:
    """Whether `store` can hold the fence of `rec`'s next claim (docs/design.md
    §2.3): a record at the store's largest fence can never be claimed again."""
    return rec.fence < number_max(store)


def _grant(
    core: Core,
    actor: str,
    key: str,
    owner: str,
    lease: timedelta,
    now: Instant,
    cur: TaskState,
    event: str,
    done: str,
) -> int | None:
    """The write of a claim or a takeover, once its own checks passed: refused
    when an ancestor failed or is blocked (the record is blocked), else the
    next fence, announced as `event` (`key K {done} by OWNER`); None when the
    CAS lost and the caller must reload. A record at the largest fence the
    store holds is refused first (ValidationError, exit 8): its next fence
    cannot be stored (Go's would wrap to 0)."""
    if not next_fence_fits(core.store, cur):
        raise ValidationError(
            f"ledger: {key} is at fence {cur.fence}, the largest this store holds: "
            "no claim can follow it (docs/design.md §2.3)"
        )
    _refuse_if_ancestor_blocks(core, actor, now, key, cur)
    fence = cur.fence + 1
    nxt = cur.replace(
        status=CLAIMED,
        owner=owner,
        fence=fence,
        lease_until=now + lease,
        updated_by=actor,
        updated_at=now,
    )
    if core.swap(key, cur, nxt):
        core.emit(event, key, f"key {key} {done} by {owner}")
        return fence
    return None


def claim(core: Core, actor: str, key: str, owner: str, lease: timedelta, now: Instant) -> int:
    _check_owner_and_lease(owner, lease)
    while True:
        cur = core.require(key)
        if cur.status == CLAIMED:
            if cur.lease_until > now:
                raise LeaseActiveError(detail=_state(cur))
        elif cur.status != PENDING:
            raise NotClaimedError(detail=_state(cur))
        fence = _grant(core, actor, key, owner, lease, now, cur, events.CLAIMED, "claimed")
        if fence is not None:
            return fence


def takeover(core: Core, actor: str, key: str, owner: str, lease: timedelta, now: Instant) -> int:
    _check_owner_and_lease(owner, lease)
    while True:
        cur = core.require(key)
        if cur.status != CLAIMED:
            raise NotClaimedError(detail=_state(cur))
        if cur.lease_until > now:
            raise NotStaleError(detail=_state(cur))
        fence = _grant(core, actor, key, owner, lease, now, cur, events.TAKEN_OVER, "taken over")
        if fence is not None:
            return fence


def renew(
    core: Core, actor: str, key: str, owner: str, fence: int, lease: timedelta, now: Instant
) -> None:
    if lease <= _ZERO_LEASE:
        raise InvalidLeaseError()
    while True:
        cur = core.require(key)
        if cur.status != CLAIMED:
            raise NotClaimedError(detail=_state(cur))
        if cur.fence != fence:
            raise FencedError(detail=_fence(cur))
        nxt = cur.replace(lease_until=now + lease, updated_by=actor, updated_at=now)
        if core.swap(key, cur, nxt):
            core.emit(events.RENEWED, key, f"key {key} renewed by {owner}")
            return


def release(core: Core, actor: str, key: str, owner: str, fence: int, now: Instant) -> None:
    while True:
        cur = core.require_held(key, fence)
        nxt = cur.replace(
            status=PENDING,
            owner="",
            lease_until=Instant.ZERO,
            updated_by=actor,
            updated_at=now,
        )
        if core.swap(key, cur, nxt):
            core.emit(events.RELEASED, key, f"key {key} released by {owner}")
            return
