"""`ledger run`'s limits on each attempt: `--keep-output`, `--timeout` and
`--kill-after`, parsed before anything is written (docs/design.md §7.1, §7.4),
and the deadline that enforces the timeout while the command runs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

TIMEOUT_EXIT = 124
"""The exit status of an attempt stopped by `--timeout`, as timeout(1)'s."""
DEFAULT_KILL_AFTER = 10.0


def parse_timeouts(timeout: str | None, kill_after: str | None) -> tuple[float | None, float]:
    """`--timeout D` (> 0) and `--kill-after D2` (≥ 0, default 10s), in seconds."""
    from ledger_cli.cli.inputs import InputError, parse_duration

    if kill_after is not None and timeout is None:
        raise InputError("ledger: --kill-after goes with --timeout")
    limit = None
    if timeout is not None:
        limit = parse_duration(timeout, "--timeout").total_seconds()
        if limit <= 0:
            raise InputError(f"ledger: --timeout must be more than 0, got {timeout!r}")
    grace = DEFAULT_KILL_AFTER
    if kill_after is not None:
        grace = parse_duration(kill_after, "--kill-after").total_seconds()
        if grace < 0:
            raise InputError(f"ledger: --kill-after must not be negative, got {kill_after!r}")
    return limit, grace


def parse_keep(keep: str | None) -> int:
    if keep is None:
        from ledger_cli.cli.commands.run.capture import DEFAULT_KEEP

        return DEFAULT_KEEP
    from ledger_cli.cli.commands.run.capture import parse_size

    return parse_size(keep)


class RunOptions:
    """`--keep-output`, `--timeout`, `--kill-after`, parsed before anything is written."""

    __slots__ = ("keep", "kill_after", "timeout")

    def __init__(
        self, keep: str | None = None, timeout: str | None = None, kill_after: str | None = None
    ) -> None:
        self.keep = parse_keep(keep)
        self.timeout, self.kill_after = parse_timeouts(timeout, kill_after)


class Deadline:
    """`--timeout D --kill-after D2` of one attempt, on the monotonic clock:
    SIGTERM to the process group after D, SIGKILL D2 later."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.start = time.monotonic()
        self.timed_out = False
        self.kill_at: float | None = None
        """When SIGKILL is due once SIGTERM went out (None: not yet, or sent)."""

    def check(self, signal_group: Callable[[int], object]) -> None:
        """Called while the command runs; `signal_group(signum)` signals its group."""
        limit = self.options.timeout
        if limit is None:
            return
        import signal

        now = time.monotonic()
        if not self.timed_out and now - self.start >= limit:
            self.timed_out = True
            self.kill_at = now + self.options.kill_after
            signal_group(signal.SIGTERM)
        elif self.kill_at is not None and now >= self.kill_at:
            self.kill_at = None
            signal_group(signal.SIGKILL)
