"""The terminal side of `ledger watch`: single keys without Enter, the wait
for `q`, and the stopping signals that leave as `q` does (docs/design.md §6.6)."""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType


@contextlib.contextmanager
def keys_unbuffered(fd: int) -> Iterator[None]:
    """Single keys without Enter (cbreak: Ctrl-C still interrupts); restored
    after, unless the terminal is gone (hung up: EIO), leaving nothing to restore."""
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def wait_for_quit(fd: int, seconds: float) -> bool:
    """Wait up to `seconds` for a key; True when it is `q` (or the input closed)."""
    ready, _, _ = select.select([fd], [], [], seconds)
    if not ready:
        return False
    data = os.read(fd, 64)
    return data == b"" or b"q" in data or b"Q" in data


class Stopped(BaseException):
    """A stopping signal (SIGTERM, SIGHUP, SIGQUIT) arrived: leave the way
    Ctrl-C does (a BaseException, as KeyboardInterrupt is: nothing catches it
    on the way), then exit 128+N."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stopping_signals(came: list[int]) -> Iterator[None]:
    """SIGTERM, SIGHUP and SIGQUIT raise Stopped for the block, so the
    alternate screen, the cursor and the keyboard mode are restored as on q
    (their default actions end the process on the spot); the signal is
    appended to `came`. A signal that was ignored (nohup) stays ignored; one
    that arrives while the first is being handled is dropped; the handlers
    before are put back after."""
    import signal

    def stop(signum: int, frame: FrameType | None) -> None:
        if not came:
            came.append(signum)
            raise Stopped(signum)

    previous = {
        sig: signal.signal(sig, stop)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
        if signal.getsignal(sig) != signal.SIG_IGN
    }
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)
