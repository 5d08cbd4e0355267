"""Pausing the `--next` claimers of a store (docs/design.md §8.3).

While a store is paused, `claim --next` and `run --next` claim nothing;
every other operation works as always. The state lives in the store beside
the records (MemStore: in memory; JSON store: `paused.json`; SQL stores: the
one-row table `ledger_pause`), read by a `--next` claim inside the same lock
hold or transaction as its claim, and written by `pause` under the store's
write lock (PostgreSQL: an UPDATE of the row that each claim reads `FOR
SHARE`), so that once `pause` has returned no claim that did not see it can
still land.

A store without `read_pause`/`write_pause` is never paused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.store import Store

PAUSED = "ledger.paused"
RESUMED = "ledger.resumed"

State = tuple[str, str, str]
"""What a store keeps while paused: (since RFC3339Nano, actor, reason)."""


class PauseInfo:
    __slots__ = ("actor", "reason", "since")

    def __init__(self, since: Instant, actor: str, reason: str) -> None:
        self.since = since
        self.actor = actor
        self.reason = reason

    @classmethod
    def from_state(cls, state: State) -> PauseInfo:
        return cls(Instant.parse(state[0]), state[1], state[2])

    def state(self) -> State:
        return (str(self.since), self.actor, self.reason)

    def describe(self) -> str:
        """`since TIME by ACTOR: REASON` (without the reason when none was given)."""
        text = f"since {self.since} by {self.actor}"
        return f"{text}: {self.reason}" if self.reason else text


def paused(store: Store, for_claim: bool = False) -> PauseInfo | None:
    """The store's pause, or None while it runs. `for_claim`: read as a `--next`
    claim must, inside its open batch (PostgreSQL: `FOR SHARE`)."""
    read: Callable[[bool], State | None] | None = getattr(store, "read_pause", None)
    if read is None:
        return None
    state = read(for_claim)
    return PauseInfo.from_state(state) if state is not None else None


def set_paused(store: Store, info: PauseInfo | None) -> None:
    write: Callable[[State | None], None] | None = getattr(store, "write_pause", None)
    if write is None:
        from ledger_cli.errors import StoreError

        raise StoreError(f"ledger: this store ({type(store).__name__}) cannot be paused")
    write(info.state() if info is not None else None)
