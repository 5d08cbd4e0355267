"""Events the ledger emits after each successful write, and the bus protocol.

No `from __future__ import annotations` here: the annotations of a
`typing.NamedTuple` are evaluated (see engine/record.py, and CONTRIBUTING,
"Start-up").
"""

from typing import TYPE_CHECKING, Any, NamedTuple, Self

if TYPE_CHECKING:
    from typing import Protocol

ADMITTED = "ledger.admitted"
CLAIMED = "ledger.claimed"
RENEWED = "ledger.renewed"
RELEASED = "ledger.released"
TAKEN_OVER = "ledger.taken_over"
COMPLETED = "ledger.completed"
BLOCKED = "ledger.blocked"

NAMES: tuple[str, ...] = (ADMITTED, CLAIMED, RENEWED, RELEASED, TAKEN_OVER, COMPLETED, BLOCKED)
"""The seven Go event names."""

# Extensions beyond the Go package (docs/design.md §6): operator remedies and `run --retries`.
RETRIED = "ledger.retried"
UNBLOCKED = "ledger.unblocked"
CANCELLED = "ledger.cancelled"
ATTEMPT_FAILED = "ledger.attempt_failed"

EXTENSION_NAMES: tuple[str, ...] = (RETRIED, UNBLOCKED, CANCELLED, ATTEMPT_FAILED)


class Event(NamedTuple):
    """`name` is one of NAMES; `data` the exact Go text (`key K claimed by O`).
    An immutable typing.NamedTuple (see CONTRIBUTING, start-up)."""

    name: str
    key: str
    data: str

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` (`NamedTuple._replace`)."""
        return self._replace(**changes)


if TYPE_CHECKING:

    class Bus(Protocol):
        def emit(self, event: Event) -> None: ...

else:

    def __getattr__(name: str) -> type:
        """`Bus`, a typing.Protocol, is built on first use: the hot commands never use it."""
        if name != "Bus":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from typing import Protocol

        class Bus(Protocol):
            def emit(self, event: Event) -> None: ...

        globals()["Bus"] = Bus
        return Bus


class Recorder:
    """A bus that keeps every event, in order (tests, history)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)
