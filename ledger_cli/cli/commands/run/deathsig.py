"""The command dies with its runner (Linux): `ledger run` killed outright
(SIGKILL, the OOM killer) cannot stop its command at the lease's end, so the
command would run on beside the copy a rival starts once the lease is over.

The kernel does it instead: the command asks, between fork and exec, to be
sent SIGKILL when the thread that started it dies (prctl PR_SET_PDEATHSIG,
which an exec keeps). The runner starts each command from its main thread,
which lives as long as the runner. A runner that died before the request was
made is caught by the check that follows it: the command's parent is no
longer the runner, and it kills itself before it starts.

What it covers: the process `run` started (the command, or the shell running
it). Processes that one starts and leaves running are its own affair, as
under any supervisor; a command that must take its children with it can
trap the signal or use `setpriv --pdeathsig`. Elsewhere than Linux there is no
such request, and nothing is done.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

PR_SET_PDEATHSIG = 1
"""prctl(2)'s option number (linux/prctl.h)."""


@functools.cache
def _prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # `ledger run` only, never the hot commands (CONTRIBUTING, start-up)

    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    prctl: Callable[[int, int], int] = fn
    return prctl


def dies_with_runner() -> Callable[[], None] | None:
    """A `preexec_fn` for Popen that ties the child's life to this process's
    main thread; None where the kernel has no such request, or when called
    from another thread (whose end would kill the command early). The C
    function is looked up before the fork: the child only calls it."""
    prctl = _prctl()
    if prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    runner = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != runner:  # the runner died before the request was made
            os.kill(os.getpid(), signal.SIGKILL)

    return arm
