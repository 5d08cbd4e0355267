"""The command's exit, seen the moment it happens (`ledger run`'s supervisor)."""

from __future__ import annotations

import contextlib
import math
import os
import select
import subprocess


class ExitWaiter:
    """The command's exit status within a timeout, woken by its exit.

    `Popen.wait(timeout)` polls with sleeps that grow to 50 ms, so a short
    command's exit would be seen late; a pidfd (Linux 5.3+) becomes readable
    the moment the process exits. Where none can be had, `Popen.wait` it is.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.fd: int | None = None
        self.poller = select.poll()  # not select(): a descriptor may be over FD_SETSIZE
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(proc.pid)
            self.poller.register(self.fd, select.POLLIN)

    def __enter__(self) -> ExitWaiter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def within(self, timeout: float) -> int | None:
        """The exit status, or None when the command still runs after `timeout` s."""
        if self.fd is not None and not self.poller.poll(math.ceil(timeout * 1000)):
            return None
        try:
            return self.proc.wait(timeout=0.0 if self.fd is not None else timeout)
        except subprocess.TimeoutExpired:
            return None
