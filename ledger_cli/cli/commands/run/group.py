"""The end of an attempt: its command's whole process group gone (`ledger run`).

The command runs in a process group of its own. Its main process may end
(by itself, on `--timeout`'s SIGTERM, on a signal, stopped for a lost lease)
while other processes of the group run on: a child it started in the
background, one that ignores SIGTERM. Those would outlive the attempt, the
task's outcome and `run` itself, and run beside the next attempt or the copy
another worker starts. So an attempt is over only when its group is: any
process left in it gets SIGTERM, then SIGKILL at a deadline the supervisor
sets (`--kill-after`, or STOP_GRACE without `--timeout`; never past the lease
last proved), as systemd's control-group kill mode does, and the group is
polled (`killpg(pgid, 0)`) until it is empty. A process that left the group
on purpose (setsid, setpgid) is outside it.

A zombie runs nothing: a member that has exited but is not reaped yet (its
parent gone, a reaper that is slow or absent, as PID 1 in some containers)
does not hold the end up; /proc tells (Linux), and without it every member
counts. After SIGKILL, what is still there is a zombie or stuck in the
kernel, running nothing more: the wait for it is bounded (KILL_SETTLE).
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

KILL_SETTLE = 1.0
"""Seconds a group is waited for after SIGKILL (its processes can run nothing more)."""


def _running_member(pgid: int) -> bool:
    """Whether a process of group `pgid` is not a zombie (True without /proc)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        # fields: state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == b"%d" % pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def alive(pgid: int) -> bool:
    """Whether a process of group `pgid` may still run."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member that is not ours to signal (it changed its user)
    return _running_member(pgid)


def end(
    pgid: int,
    signal_group: Callable[[int], object],
    kill_by: Callable[[], float],
    *,
    term: bool,
    poll: float,
) -> None:
    """Return once no process of group `pgid` can run. `term`: SIGTERM it
    first (False: it has had one already); SIGKILL once the monotonic clock
    reaches `kill_by()` (asked at every poll: a lost lease brings it nearer)."""
    if not alive(pgid):
        return
    if term:
        signal_group(signal.SIGTERM)
    killed_at: float | None = None
    while alive(pgid):
        now = time.monotonic()
        if killed_at is None:
            at = kill_by()
            if now >= at:
                signal_group(signal.SIGKILL)
                killed_at = now
                continue
            time.sleep(min(poll, at - now))
        elif now >= killed_at + KILL_SETTLE:
            return
        else:
            time.sleep(min(poll, 0.01))
