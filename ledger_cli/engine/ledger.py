"""Ledger: the public face of the engine. Each method is one Go method."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ledger_cli.engine.core import Core
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import BLOCKED, TaskState, check_str, go_quote
from ledger_cli.errors import RestoreConflictError, ValidationError

if TYPE_CHECKING:
    from typing import Any

    from ledger_cli.engine.blocks import Blocks
    from ledger_cli.engine.conflict import Outcome
    from ledger_cli.engine.events import Bus
    from ledger_cli.engine.snapshot import Snapshot
    from ledger_cli.engine.status import Status
    from ledger_cli.engine.store import Store

TimeLike = Instant | datetime


def _names(actor: object = "", key: object = "", owner: object = "") -> None:
    """The actor, key and owner of a call on a record, before any store is
    read, with one rule on every store (docs/design.md §2.11, departure 6):
    each a str (`check_str`), and beyond ASCII valid Unicode, the key as an
    operation names one (engine/arguments.py, imported only then): else
    ValidationError (exit 8), nothing written. The command line checks its
    own first (exit 2); these cost its hot commands a few type tests."""
    who, name, holder = check_str(actor, "actor"), check_str(key, "key"), check_str(owner, "owner")
    if not (who.isascii() and name.isascii() and holder.isascii()):
        from ledger_cli.engine import arguments

        arguments.check_text(who, "actor")
        arguments.check_named_key(name)
        arguments.check_text(holder, "owner")


class Ledger:
    """Admission, leases with fencing, and dependency blocking over a Store.

    `store=None` means a fresh unbounded MemStore; `bus` is any object with
    `emit(event)`, or None to disable events. Each method imports the module
    of its own rules (admission, leases, completion, …): a command's process
    loads only those it uses.
    """

    def __init__(
        self,
        store: Store | None = None,
        bus: Bus | None = None,
        blocks: Blocks | None = None,
        hold_leases: bool = False,
        behind_completed: bool = False,
    ) -> None:
        """`blocks`: a driver that commits the long walks of a failed
        completion, retry, cancel and prune in short blocks (engine/blocks.py);
        None: each runs in the caller's batch, or in none, as Go's would.
        `hold_leases`: a rebase, cancel or un-block of a task under a live
        lease keeps it from `--next` until that lease ends (docs/design.md
        §8.1; engine/schedule.py `wait_out`); False: Go's behaviour.
        `behind_completed`: an admission whose completed needs have a failed or
        blocked record among their own transitive needs is blocked by it, as
        the failure would have blocked it had it been admitted first
        (docs/design.md §2.2); False: Go's one-level check, which leaves such
        a task pending and never ready."""
        if store is None:
            from ledger_cli.engine.memstore import MemStore

            store = MemStore()
        self._core = Core(store, bus, blocks, hold_leases, behind_completed)

    @property
    def store(self) -> Store:
        return self._core.store

    def admit(self, actor: str, key: str, seq: int, task: Any, now: TimeLike, *needs: str) -> bool:
        from ledger_cli.engine import admission

        return admission.admit(
            self._core, actor, key, seq, task, Instant.coerce(now), tuple(needs) or None
        )

    def admit_outcome(
        self,
        actor: str,
        key: str,
        seq: int,
        task: Any,
        now: TimeLike,
        *needs: str,
        not_before: TimeLike | None = None,
        priority: int = 0,
        queue: str = "default",
    ) -> Outcome:
        """`admit`, telling what happened: admitted, duplicate, stale or conflict.

        An extension beyond the Go package (docs/design.md §8.4; engine/conflict.py):
        the same writes as `admit`, whose bool is `outcome.admitted`; a write
        also keeps `not_before` and `priority` (docs/design.md §8.1, §8.2;
        engine/schedule.py) and the task's `queue` (engine/queues.py).
        Unlike `admit` (Go's, which writes one), it
        refuses needs that would close a cycle with `CycleError` before
        writing anything (engine/cycles.py).
        """
        from ledger_cli.engine import conflict
        from ledger_cli.engine.schedule import normal

        nb = Instant.coerce(not_before) if not_before is not None else None
        if nb is not None or queue != "default":
            # What the command line checks besides the numbers (docs/design.md §2.11,
            # departure 6), before any store is read; imported only then.
            from ledger_cli.engine import arguments

            if nb is not None:
                arguments.check_not_before(nb)
            if isinstance(queue, str):  # any other type: record.check_queue's error
                arguments.check_queue_name(queue)
        return conflict.admit(
            self._core,
            actor,
            key,
            seq,
            task,
            Instant.coerce(now),
            tuple(needs) or None,
            normal(nb, priority),
            queue,
        )

    def claim(self, actor: str, key: str, owner: str, lease: timedelta, now: TimeLike) -> int:
        from ledger_cli.engine import leases

        _names(actor, key, owner)
        return leases.claim(self._core, actor, key, owner, lease, Instant.coerce(now))

    def renew(
        self, actor: str, key: str, owner: str, fence: int, lease: timedelta, now: TimeLike
    ) -> None:
        from ledger_cli.engine import leases

        _names(actor, key, owner)
        leases.renew(self._core, actor, key, owner, fence, lease, Instant.coerce(now))

    def release(self, actor: str, key: str, owner: str, fence: int, now: TimeLike) -> None:
        from ledger_cli.engine import leases

        _names(actor, key, owner)
        leases.release(self._core, actor, key, owner, fence, Instant.coerce(now))

    def takeover(self, actor: str, key: str, owner: str, lease: timedelta, now: TimeLike) -> int:
        from ledger_cli.engine import leases

        _names(actor, key, owner)
        return leases.takeover(self._core, actor, key, owner, lease, Instant.coerce(now))

    def complete(
        self, actor: str, key: str, owner: str, fence: int, status: Status | str, now: TimeLike
    ) -> None:
        from ledger_cli.engine import completion

        _names(actor, key, owner)
        completion.complete(self._core, actor, key, owner, fence, status, Instant.coerce(now))

    # -- extensions beyond the Go package (docs/design.md §6) ---------------------------------

    def retry(self, actor: str, key: str, now: TimeLike, reason: str | None = None) -> list[str]:
        """Reopen a failed task; return the keys it un-blocked (sorted).

        An extension beyond the Go package (docs/design.md §6.2): `NoKeyError` without a
        record, `NotFailedError` unless it is failed. Run it inside
        `store.batch()` to make its writes durable together.
        """
        from ledger_cli.engine import retry

        _names(actor, key)
        return retry.retry(self._core, actor, key, Instant.coerce(now), reason)

    def cancel(self, actor: str, key: str, now: TimeLike, reason: str | None = None) -> list[str]:
        """Fail a pending, claimed or blocked task without its lease (Fence+1);
        return the keys it blocked (sorted).

        An extension beyond the Go package (docs/design.md §6.3): `NoKeyError` without a
        record, `AlreadyFinishedError` when it is completed or failed.
        """
        from ledger_cli.engine import cancel

        _names(actor, key)
        return cancel.cancel(self._core, actor, key, Instant.coerce(now), reason)

    def state(self, key: str) -> TaskState | None:
        _names(key=key)
        return self._core.store.load(key)

    def blocked(self, key: str) -> str | None:
        """The BlockedBy key when the record is blocked; None otherwise (or missing)."""
        _names(key=key)
        rec = self._core.store.load(key)
        if rec is None or rec.status != BLOCKED:
            return None
        return rec.blocked_by

    def snapshot(self) -> Snapshot:
        """Every record, sorted by key; an empty store gives `Snapshot(None)`."""
        from ledger_cli.engine.snapshot import Snapshot

        tasks = tuple(self._core.store.range())
        return Snapshot(tasks or None)

    def restore(self, snapshot: Snapshot) -> None:
        """Insert every record; stop at the first occupied key (earlier inserts stay).

        Every record is validated first (`Snapshot.validate`: ValidationError,
        exit 8, nothing written), on every store: Go's Restore does not, and a
        record no store would write (an unknown status, an empty key, a
        claimed record without an owner) made later reads fail (docs/design.md
        §2.9, §2.11 departure 6). A record's fence is raised to the highest
        its key's history shows (`history_bounds`, §2.9): a lost record put
        back never hands out again a fence it granted. A record whose names
        are not str of valid Unicode, or a key twice in the snapshot, is
        refused before anything is written too (`Snapshot.check_restorable`:
        ValidationError; RestoreConflictError, as `ledger restore` says it)."""
        import contextlib

        from ledger_cli.engine.history import history_bounds

        snapshot.validate()
        snapshot.check_restorable()
        store, tasks = self._core.store, snapshot.tasks or ()
        bounds = history_bounds(store, (rec.key for rec in tasks))
        # The JSON store refuses any other write the key of a lost record.
        with getattr(store, "refilling", contextlib.nullcontext)():
            for rec in tasks:
                if bounds.get(rec.key, 0) > rec.fence:
                    rec = rec.replace(fence=bounds[rec.key])
                if not store.compare_and_swap(rec.key, None, rec):
                    raise RestoreConflictError(
                        f"ledger: restore: key {go_quote(rec.key)} already has a record"
                    )

    def prune(
        self,
        older_than: timedelta,
        now: TimeLike,
        statuses: tuple[str, ...] = (),
        dry_run: bool = False,
    ) -> int:
        """Prune finished records last updated at least `older_than` before `now`
        (docs/design.md §6.4; engine/prune.py); the number pruned (or, `dry_run`, that would be).

        `older_than` is a `timedelta` of zero or more, else ValidationError
        (exit 8), as `ledger prune --older-than -1s` is refused (exit 2): a
        negative age would prune records updated after `now`."""
        from ledger_cli.engine import prune

        if not isinstance(older_than, timedelta):
            raise ValidationError(
                f"ledger: older_than must be a timedelta, not {type(older_than).__name__}"
            )
        if older_than < timedelta(0):
            raise ValidationError(
                f"ledger: older_than {older_than.total_seconds():g}s is negative"
                " (a prune takes records last updated at least that long before now)"
            )
        return prune.prune(
            self._core.store, older_than, statuses, Instant.coerce(now), dry_run, self._core.blocks
        )
