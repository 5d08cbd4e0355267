"""Attempts (docs/design.md §7.1): what one start of a command by `ledger run` did.

An attempt lives beside its record, never in it (the Go record and schema stay
as they are): each store keeps a key's attempts in a place of its own (see
`ledger_cli.stores.attemptlog`). This module holds the record type, the rules
every store applies (numbering, the bound of 16 per key), the wire shape, and
the rule readers apply to tell a running attempt from an abandoned one. No I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Protocol

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

KEEP_ATTEMPTS = 16
"""A key keeps its 16 most recent attempts; starting a 17th removes the oldest."""

FIELDS = (
    "n",
    "fence",
    "try",
    "owner",
    "host",
    "pid",
    "started",
    "ended",
    "exit",
    "signal",
    "timed_out",
    "output_bytes",
    "kept_bytes",
)
"""The docs/design.md §7.1 fields, in the order `--json` prints them."""

ABANDONED = "abandoned"
"""The outcome of an attempt with no end recorded whose runner is gone."""


class Attempt:
    """One start of the command: mutable while its runner fills it in.

    A plain record, written out as a class with `__slots__`: not a NamedTuple,
    which could not be filled in, nor a dataclass, which `run … -- CMD` (a hot
    command, which imports this module) may not import (CONTRIBUTING, "Start-up")."""

    __slots__ = (
        "abandoned",
        "ended",
        "exit",
        "fence",
        "host",
        "kept_bytes",
        "key",
        "n",
        "output_bytes",
        "owner",
        "pid",
        "signal",
        "started",
        "timed_out",
        "try_",
    )

    def __init__(
        self,
        key: str,
        n: int = 0,
        fence: int = 0,
        try_: int = 1,
        owner: str = "",
        host: str = "",
        pid: int = 0,
        started: str = "",
        ended: str | None = None,
        exit: int | None = None,
        signal: str | None = None,
        timed_out: bool = False,
        output_bytes: int = 0,
        kept_bytes: int = 0,
    ) -> None:
        self.key = key
        self.n = n
        self.fence = fence
        self.try_ = try_
        self.owner = owner
        self.host = host
        self.pid = pid
        self.started = started
        self.ended = ended
        self.exit = exit
        self.signal = signal
        self.timed_out = timed_out
        self.output_bytes = output_bytes
        self.kept_bytes = kept_bytes
        self.abandoned = False
        """A reader's judgement (`judge`), never stored: no end is recorded and
        its runner can no longer be running it."""

    def copy(self) -> Attempt:
        made = Attempt(self.key, **{name: getattr(self, name) for name in _ARGS})
        made.abandoned = self.abandoned
        return made

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attempt):
            return NotImplemented
        return self.key == other.key and all(getattr(self, n) == getattr(other, n) for n in _ARGS)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"Attempt({self.key!r}, {self.to_obj()!r})"

    def to_obj(self) -> dict[str, Any]:
        """The docs/design.md §7.1 fields as JSON values (no key, no output)."""
        return {
            "n": self.n,
            "fence": self.fence,
            "try": self.try_,
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "ended": self.ended,
            "exit": self.exit,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "output_bytes": self.output_bytes,
            "kept_bytes": self.kept_bytes,
        }

    def shown_obj(self) -> dict[str, Any]:
        """What `--json` prints: the §7.1 fields and `abandoned` (judged when read)."""
        return {**self.to_obj(), "abandoned": self.abandoned}

    @classmethod
    def from_obj(cls, key: str, obj: dict[str, Any]) -> Attempt:
        """The inverse of `to_obj`; ValueError/TypeError/KeyError on a bad object,
        naming the field, never its value (the object may be damaged bytes)."""
        signal = obj["signal"]
        ended = obj["ended"]
        if signal is not None and not isinstance(signal, str):
            raise TypeError("signal is not a string")
        if ended is not None and not isinstance(ended, str):
            raise TypeError("ended is not a string")
        if not isinstance(obj["timed_out"], bool):
            raise TypeError("timed_out is not a boolean")
        return cls(
            key,
            n=_int(obj, "n"),
            fence=_int(obj, "fence"),
            try_=_int(obj, "try"),
            owner=_str(obj, "owner"),
            host=_str(obj, "host"),
            pid=_int(obj, "pid"),
            started=_str(obj, "started"),
            ended=ended,
            exit=None if obj["exit"] is None else _int(obj, "exit"),
            signal=signal,
            timed_out=obj["timed_out"],
            output_bytes=_int(obj, "output_bytes"),
            kept_bytes=_int(obj, "kept_bytes"),
        )

    # -- what a person reads --------------------------------------------------

    def seconds(self) -> float | None:
        """How long it ran (None while running, or when it was abandoned)."""
        if self.ended is None or not self.started:
            return None
        from ledger_cli.engine.instant import Instant

        try:
            delta = Instant.parse(self.ended) - Instant.parse(self.started)
        except ValueError:
            return None
        return max(delta.total_seconds(), 0.0)

    def outcome(self) -> str:
        """`exit 1`, `SIGKILL`, `timed out`; with no end recorded, `running`,
        or `abandoned` once judged so (`judge`)."""
        if self.timed_out:
            return "timed out"
        if self.signal is not None:
            return self.signal
        if self.exit is not None:
            return f"exit {self.exit}"
        return ABANDONED if self.abandoned else "running"


_ARGS = tuple(n for n in Attempt.__slots__ if n not in ("key", "abandoned"))


RUNNER_GRACE_NS = 5_000_000_000
"""After the lease taken from it ends, the time a runner still alive may take
to record its attempt's end: it stops its command (whole process group) by
that lease's end, then writes the end, waiting at most 1 s past it for the
store (cli/commands/run/supervisor.py)."""


def is_live(att: Attempt, rec: TaskState | None, now: Instant, held: Instant | None = None) -> bool:
    """Whether `att` may still be running (docs/design.md §7.1): no end is
    recorded, and its task is still claimed under the attempt's fence with a
    lease that has not run out at `now`; or the task was taken from that
    lease (a rebase, a cancel) and `held`, the end of the lease taken
    (`taken_lease`: one taken after the attempt started), plus
    RUNNER_GRACE_NS is still ahead: its runner only learns of it at its next renewal, then
    stops its command and records the end. A runner never lets its command
    outlive the lease it can prove, and its watchdog kills the command when
    the runner itself is killed, so past that nothing runs the attempt: it
    is abandoned. Judged from what is stored alone: a dead runner writes
    nothing, so no writer has to run for this to hold."""
    from ledger_cli.engine.queues import is_live as lease_live

    if att.ended is not None or rec is None:
        return False
    if rec.fence == att.fence and rec.status == "claimed":
        return lease_live(rec, now)
    # Taken (a cancel bumps the fence, a rebase keeps it with another status):
    # only a lease taken after the attempt started can be the attempt's.
    if held is None or now >= held.add_ns(RUNNER_GRACE_NS):
        return False
    from ledger_cli.engine.instant import Instant

    try:
        return Instant.parse(att.started) < held
    except ValueError:
        return False


def taken_lease(store: Store, key: str) -> Instant | None:
    """The end of the last live lease taken from `key`'s holder by a rebase or
    a cancel, as the not-before that write kept (engine/schedule.py
    `wait_out`; a later not-before given with a rebase stands in for it, an
    overestimate); None when the key keeps none."""
    from ledger_cli.engine import schedule

    value = schedule.of(store, key)
    return None if value is None or value[0].is_zero() else value[0]


def judge(
    atts: Iterable[Attempt], rec: TaskState | None, now: Instant, held: Instant | None = None
) -> None:
    """Mark each of a key's attempts `abandoned` that has no end recorded and
    is not live (`is_live`); `rec` is the key's record read with them, `held`
    its `taken_lease`."""
    for att in atts:
        att.abandoned = att.ended is None and not is_live(att, rec, now, held)


def _int(obj: dict[str, Any], name: str) -> int:
    v = obj[name]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError(f"{name} is not a non-negative integer")
    return v


def _str(obj: dict[str, Any], name: str) -> str:
    v = obj[name]
    if not isinstance(v, str):
        raise TypeError(f"{name} is not a string")
    return v


def next_n(existing: Iterable[int]) -> int:
    """The `n` of a new attempt: one past the highest kept (1 for the first)."""
    return max(existing, default=0) + 1


def expired(kept: Sequence[int], new_n: int) -> list[int]:
    """The `n`s to remove when attempt `new_n` starts beside `kept`."""
    return [n for n in kept if n <= new_n - KEEP_ATTEMPTS]


def new_part(att: Attempt, seen: int) -> int:
    """Where in the kept output the bytes after the first `seen` start."""
    return max(att.kept_bytes - max(att.output_bytes - seen, 0), 0)


def seconds_text(seconds: float) -> str:
    """`0.4s`, `4.2s`, `1m05s`, `2h03m`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


if TYPE_CHECKING:

    class AttemptLog(Protocol):
        """What every store offers for attempts (`stores.attemptlog.attempt_log`).

        - `start_attempt(att)`: record a new attempt of `att.key`; its `n` is
          assigned here (one past the key's highest) and the key's attempts
          beyond the newest 16 are removed; returns the `n`.
        - `save_attempt(att, output)`: store `att`'s fields over attempt
          (key, n), and, unless `output` is None, its kept output (the bytes
          a reader gets). Never holds the write lock longer than one write.
        - `list_attempts(key)`: the key's attempts, oldest first, no output.
        - `read_output(key, n, start)`: the kept output of attempt n from byte
          `start` on (b"" when there is none or no such attempt).
        - `read_new(key, n, seen)`: attempt n and, read with it (one
          consistent read), the kept bytes after the first `seen` bytes of all
          its output; (None, b"") when there is no such attempt. When the
          window slid past `seen`, every kept byte is returned (the caller
          compares `output_bytes - seen` with what it got).
        - `remove_attempts(keys)`: drop every attempt of those keys.
        - `attempt_keys()`: every key that has an attempt (for `doctor`).
        """

        def start_attempt(self, att: Attempt) -> int: ...

        def save_attempt(self, att: Attempt, output: bytes | None) -> None: ...

        def list_attempts(self, key: str) -> list[Attempt]: ...

        def read_output(self, key: str, n: int, start: int = 0) -> bytes: ...

        def read_new(self, key: str, n: int, seen: int) -> tuple[Attempt | None, bytes]: ...

        def remove_attempts(self, keys: Iterable[str]) -> int: ...

        def attempt_keys(self) -> list[str]: ...
