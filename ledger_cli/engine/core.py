"""What every engine operation works with: the store and the event bus."""

from __future__ import annotations

import contextlib

from ledger_cli.engine.events import Event
from ledger_cli.errors import NoKeyError

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from ledger_cli.engine.events import Bus
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store


class Core:
    __slots__ = ("bus", "store")

    def __init__(self, store: Store, bus: Bus | None = None) -> None:
        self.store = store
        self.bus = bus

    def emit(self, name: str, key: str, data: str) -> None:
        """Events fire only after the write they describe; emit failures are ignored."""
        if self.bus is None:
            return
        with contextlib.suppress(Exception):
            self.bus.emit(Event(name, key, data))

    def require(self, key: str) -> TaskState:
        """Load a record that must exist (NoKeyError otherwise)."""
        rec = self.store.load(key)
        if rec is None:
            raise NoKeyError()
        return rec
