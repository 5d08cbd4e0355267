"""The command dies with its runner: `ledger run` killed outright (SIGKILL,
the OOM killer) cannot stop its command at the lease's end, so the command
would run on beside the copy a rival starts once the lease is over.

A watchdog does it instead: a small shell, started with a `run` process's
first command, in a process group of its own (a kill of the runner's group
leaves it), reading lines from a pipe only the runner holds (close-on-exec:
no command inherits it). The runner writes `start G` when a command's
process group G starts and `end G` when its command has exited. When the
pipe reaches its end (the runner is gone, however it died) the watchdog
sends SIGKILL to the group last started and not ended, and exits; a runner
that exits normally has ended its last group, and the watchdog exits with
nothing to do. It costs one process per `run` (a drain's every task shares
it) and two short writes a task; a Popen `preexec_fn` asking the kernel for
a parent-death signal would instead cost a full fork for every task, and
would reach only the command's first process, not its group.
"""

from __future__ import annotations

import contextlib
import subprocess

_SCRIPT = (
    "group=; "
    'while read -r op g; do case "$op" in start) group=$g ;; end) group= ;; esac; done; '
    'if [ -n "$group" ]; then kill -s KILL -- "-$group" 2>/dev/null; fi'
)

_dog: subprocess.Popen[bytes] | None = None


def ready() -> None:
    """Start the watchdog if it is not running yet: before a command starts,
    so that `started` is one short write (a runner killed between the
    command's start and that write leaves the command running: the one
    instant not covered)."""
    global _dog
    if _dog is None:
        with contextlib.suppress(OSError):
            _dog = subprocess.Popen(
                ["/bin/sh", "-c", _SCRIPT],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                process_group=0,
            )


def _send(line: str) -> None:
    """Write one line to the watchdog. A watchdog that could not be started
    or has gone (killed by someone) is done without: the command's own
    supervision does not depend on it."""
    if _dog is None or _dog.stdin is None:
        return
    with contextlib.suppress(OSError):
        _dog.stdin.write(line.encode("ascii"))
        _dog.stdin.flush()


def started(group: int) -> None:
    """A command's process group `group` runs: killed if the runner dies now."""
    _send(f"start {group}\n")


def ended(group: int) -> None:
    """The command of `group` has exited: nothing to kill for it any more."""
    _send(f"end {group}\n")
