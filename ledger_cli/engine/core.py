"""What every engine operation works with: the store and the event bus."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ledger_cli.engine.events import Event
from ledger_cli.engine.record import CLAIMED
from ledger_cli.errors import FencedError, NoKeyError, NotClaimedError, state_detail

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ledger_cli.engine.blocks import Blocks
    from ledger_cli.engine.events import Bus
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store


class Core:
    __slots__ = ("behind_completed", "blocks", "bus", "held", "hold_leases", "store")

    def __init__(
        self,
        store: Store,
        bus: Bus | None = None,
        blocks: Blocks | None = None,
        hold_leases: bool = False,
        behind_completed: bool = False,
    ) -> None:
        self.store = store
        self.bus = bus
        self.held: HeldEvents | None = None
        self.blocks = blocks
        """Where long walks commit (engine/blocks.py); None: in the caller's batch."""
        self.hold_leases = hold_leases
        """A write that dispossesses a live lease makes its task wait that lease
        out for `--next` (`dispossessed`); False: Go's behaviour."""
        self.behind_completed = behind_completed
        """An admission looks for a failure behind its completed needs too
        (engine/dependencies.py `blocking_behind`); False: Go's one level."""

    def emit(self, name: str, key: str, data: str) -> None:
        """Events fire only after the write they describe; emit failures are ignored."""
        if self.bus is None:
            return
        if self.held is not None:
            self.held.events.append(Event(name, key, data))
            return
        self._fire(Event(name, key, data))

    def _fire(self, event: Event) -> None:
        assert self.bus is not None
        with contextlib.suppress(Exception):
            self.bus.emit(event)

    @contextlib.contextmanager
    def holding_events(self) -> Iterator[HeldEvents]:
        """Keep the events emitted in the block until `release()` (after a
        commit); those not released by the block's end are dropped (their
        transaction rolled back). Inside another hold, the outer one decides."""
        if self.held is not None:
            yield HeldEvents(None)
            return
        held = self.held = HeldEvents(self)
        try:
            yield held
        finally:
            self.held = None

    def swap(self, key: str, cur: TaskState | None, nxt: TaskState) -> bool:
        """Validate `nxt`, then write it in place of `cur` if the store still
        holds `cur` (compare-and-swap); False when another writer came first."""
        nxt.validate()
        return self.store.compare_and_swap(key, cur, nxt)

    def dispossessed(self, key: str, prev: TaskState, now: Instant) -> None:
        """After a write that took `key` from the holder of `prev` (a rebase, a
        cancel, an un-block), in the same batch: with `hold_leases`, the task is
        not due before `prev`'s lease ends when that is still live at `now`
        (docs/design.md §2.2, §8.1: engine/schedule.py `wait_out`), and that
        lease keeps its queue slot until then (`slot_kept`)."""
        if self.hold_leases:
            from ledger_cli.engine import schedule

            schedule.hold(self.store, key, prev, now)
            self.slot_kept(key, prev, now)

    def slot_kept(self, key: str, prev: TaskState, now: Instant) -> None:
        """With `hold_leases`: `prev`'s lease, taken from its holder by the
        write just made (a cancel, a rebase, a block), keeps its queue slot
        while it would have been live (docs/design.md §8.7: engine/queues.py
        `held_by_queue`, engine/revoked.py). Called before any write that
        changes `key`'s queue."""
        if self.hold_leases:
            from ledger_cli.engine import revoked

            revoked.keep_slot(self.store, key, prev, now)

    def require(self, key: str) -> TaskState:
        """Load a record that must exist (NoKeyError otherwise)."""
        rec = self.store.load(key)
        if rec is None:
            raise NoKeyError(key=key)
        return rec

    def require_held(self, key: str, fence: int) -> TaskState:
        """Load a record that must be claimed at `fence`: FencedError when its
        fence is another, else NotClaimedError when it is not claimed (Release's
        and Complete's order, docs/design.md §2.4; Renew checks the status first)."""
        cur = self.require(key)
        if cur.fence != fence:
            raise FencedError(detail=f" (the current fence of {key} is {cur.fence})")
        if cur.status != CLAIMED:
            raise NotClaimedError(detail=state_detail(key, cur.status, cur.blocked_by))
        return cur


class HeldEvents:
    """The events of a transaction not yet committed (`Core.holding_events`)."""

    __slots__ = ("core", "events")

    def __init__(self, core: Core | None) -> None:
        self.core = core
        self.events: list[Event] = []

    def release(self) -> None:
        core = self.core
        if core is None:
            return
        core.held = None
        for event in self.events:
            core._fire(event)
        self.events = []
