"""Dependency invariants of a ledger, checked over its records and repaired
with the engine's own walks.

Two mirror-image breaches of "a record is blocked exactly when a failure lies
in its transitive needs":

- an **escaped block** (docs/design.md §2.8, §4.2 `doctor`): a `pending`
  or `claimed` record whose transitive needs hold a `failed` record. Go's
  escape windows leave such records behind (a dependent admitted before its
  need, the need then blocked at admission, or admitted inside a failure
  walk's window). `--next` never hands one out and nothing blocks it until
  someone claims it by key. Repair: block it as Claim's walk would,
  `BlockedBy` = the nearest failed or blocked key of its needs
  (`dependencies.nearest_blocking`, `reopen.block_one`).
- an **orphaned block** (docs/design.md §6.2): a `blocked` record while no record in
  its transitive needs is `failed` (its failure was retried, or the row was
  edited). Repair: `pending`, `BlockedBy` "" (Owner and lease are already
  cleared on a blocked record; everything else is kept).

"Transitive needs" follow every need through records of every status
(a blocked or completed need is walked through); a need never admitted ends
the path. Both finders are pure functions of a list of records, linear in
records plus needs, so `doctor`, `tree`, `stats` and `retry` share them.

    escaped = find_escaped_blocks(records)   # [EscapedBlock(key, status, failure)]
    orphans = find_orphaned_blocks(records)  # [OrphanedBlock(key, blocked_by)]
    fix_escaped_block(core, actor, now, found)   # -> True when it blocked it
    fix_orphaned_block(core, actor, now, found)  # -> True when it un-blocked it
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.dependencies import nearest_blocking
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import BLOCKED, CLAIMED, FAILED, PENDING, TaskState, byte_order

__all__ = [
    "UNBLOCKED",
    "EscapedBlock",
    "OrphanedBlock",
    "failure_roots",
    "find_escaped_blocks",
    "find_orphaned_blocks",
    "fix_escaped_block",
    "fix_orphaned_block",
]

UNBLOCKED = events.UNBLOCKED
"""The event (and history line) of an orphaned block's repair (docs/design.md §6.2's name),
the same as `retry`'s un-blocking walk writes."""

_LIVE = frozenset({PENDING, CLAIMED})


@dataclasses.dataclass(frozen=True, slots=True)
class EscapedBlock:
    """A pending or claimed record with a failed record in its transitive needs.

    `failure` is the nearest such failed record (fewest needs away, then key order).
    """

    key: str
    status: str
    failure: str


@dataclasses.dataclass(frozen=True, slots=True)
class OrphanedBlock:
    """A blocked record with no failed record in its transitive needs."""

    key: str
    blocked_by: str


def failure_roots(records: Iterable[TaskState]) -> dict[str, str]:
    """Every key whose transitive needs hold a failed record -> the nearest one.

    One breadth-first walk from all failed records at once along "is needed
    by" edges: the first failure to reach a key is its nearest (ties: the
    failure first in key byte order). Failed records themselves are included
    only when a failure lies below them too.
    """
    by_key: dict[str, TaskState] = {}
    dependents: dict[str, list[str]] = {}
    for rec in records:
        by_key[rec.key] = rec
    for rec in by_key.values():
        for need in dict.fromkeys(rec.needs or ()):
            dependents.setdefault(need, []).append(rec.key)
    failed = sorted((k for k, r in by_key.items() if r.status == FAILED), key=byte_order)
    root: dict[str, str] = {}
    queue: deque[tuple[str, str]] = deque((k, k) for k in failed)
    while queue:
        key, origin = queue.popleft()
        for dep in sorted(dependents.get(key, ()), key=byte_order):
            if dep not in root:
                root[dep] = origin
                queue.append((dep, origin))
    return root


def find_escaped_blocks(records: Iterable[TaskState]) -> list[EscapedBlock]:
    """Escaped blocks among `records` (all of a store's records), sorted by key."""
    recs = list(records)
    roots = failure_roots(recs)
    found = [
        EscapedBlock(rec.key, rec.status, roots[rec.key])
        for rec in recs
        if rec.status in _LIVE and rec.key in roots
    ]
    return sorted(found, key=lambda e: byte_order(e.key))


def find_orphaned_blocks(records: Iterable[TaskState]) -> list[OrphanedBlock]:
    """Orphaned blocks among `records` (all of a store's records), sorted by key."""
    recs = list(records)
    roots = failure_roots(recs)
    found = [
        OrphanedBlock(rec.key, rec.blocked_by)
        for rec in recs
        if rec.status == BLOCKED and rec.key not in roots
    ]
    return sorted(found, key=lambda o: byte_order(o.key))


def fix_escaped_block(core: Core, actor: str, now: Instant, found: EscapedBlock) -> bool:
    """Block the record as Claim's walk would; False when it no longer is one
    (finished, blocked or its needs changed meanwhile: nothing written)."""
    from ledger_cli.engine.reopen import block_one

    cur = core.store.load(found.key)
    if cur is None or cur.status not in _LIVE:
        return False
    blocker = nearest_blocking(core.store.load, cur.needs)
    if blocker is None:
        return False
    block_one(core, actor, now, found.key, cur, blocker)
    after = core.store.load(found.key)
    return after is not None and after.status == BLOCKED


def fix_orphaned_block(core: Core, actor: str, now: Instant, found: OrphanedBlock) -> bool:
    """Un-block the record (pending, BlockedBy ""); False when it is no longer
    blocked or a failure is back in its needs (then at most its BlockedBy is
    re-pointed at that failure).

    The same step as `retry`'s un-blocking walk (`reopen.reexamine`), so it
    reads the needs again after the write, as Go's recheckNeeds does: a
    failure that lands meanwhile blocks the record again, and the repair
    opens no escape window.
    """
    from ledger_cli.engine.reopen import reexamine

    cur = core.store.load(found.key)
    if cur is None or cur.status != BLOCKED:
        return False
    _, unblocked = reexamine(core, actor, now, cur, note="")
    return unblocked
