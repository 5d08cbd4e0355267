"""SIGINT, SIGTERM and SIGHUP in `ledger run`: passed on to the command, which
then ends its task's run (released, never completed: 128+N).

SIGHUP (the terminal closed) stops the command as SIGTERM does: the command
is sent SIGTERM, since many programs take SIGHUP as "reload your settings"
and would run on. Under `nohup` (SIGHUP ignored) it stays ignored.

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


STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop `ledger run`."""


def passed_on(signum: int) -> int:
    """The signal the command gets when `ledger run` gets `signum`."""
    return signal.SIGTERM if signum == signal.SIGHUP else signum


def with_signals(handler: Callable[[int, FrameType | None], None], body: Callable[[], int]) -> int:
    """`body()` with the STOPPING signals sent to `handler`, the handlers that
    were there before put back after it (an ignored SIGHUP stays ignored: nohup)."""
    previous = {
        sig: signal.signal(sig, handler)
        for sig in STOPPING
        if sig != signal.SIGHUP or signal.getsignal(sig) != signal.SIG_IGN
    }
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
