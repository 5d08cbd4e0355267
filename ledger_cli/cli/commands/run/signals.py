"""SIGINT and SIGTERM in `ledger run`: passed on to the command, which then
ends its task's run (released, never completed: 128+N).

`with_signals` sends them to a handler for the length of a call. `Early`
covers the moments before a task's supervisor exists: the claim. A signal
then is kept. A pause between two tries (`--wait`, an outage) ends at once
and ends the command line (nothing is claimed in a pause); a claim that
lands hands the signal to the task's supervisor as soon as there is one,
which stops its command the moment it starts: the task is released, rather
than run to its end and thrown away, or left claimed for its whole lease by
a process the signal killed mid-claim.
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType


def with_signals(handler: Callable[[int, FrameType | None], None], body: Callable[[], int]) -> int:
    """`body()` with SIGINT and SIGTERM sent to `handler`, the handlers that
    were there before put back after it."""
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return body()
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


class Signalled(Protocol):
    def _on_signal(self, signum: int, frame: FrameType | None) -> None: ...


class Early:
    """The handler for the claim: the first signal is kept until `hand_to`
    names the supervisor, which gets it then, and every later one at once;
    `sleep` is the claim's pause, cut short by a signal."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.target: Signalled | None = None
        self.came = threading.Event()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.target is not None:
            self.target._on_signal(signum, frame)
            return
        if self.signum is None:
            self.signum = signum
        self.came.set()

    def sleep(self, seconds: float) -> None:
        """Pause between two tries of the claim; a signal ends the command line
        as it would without a handler (SIGINT: KeyboardInterrupt, exit 130;
        else 128+N)."""
        if self.came.wait(seconds):
            assert self.signum is not None
            if self.signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + self.signum)

    def hand_to(self, target: Signalled) -> None:
        self.target = target
        if self.signum is not None:
            target._on_signal(self.signum, None)
