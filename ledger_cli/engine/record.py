"""TaskState, the full record for one idempotency key, its validation, and the
names of its five statuses (Go's `machine.Status` constants: plain strings,
which the engine compares; the public enum of them is `status.Status`).

No `from __future__ import annotations` here, the one exception to the rule:
`typing.NamedTuple` turns each string annotation into a `ForwardRef`, which
compiles it, at every start of every command (CONTRIBUTING, "Start-up"). The
annotations below are evaluated instead, so each name in them is imported.
"""

from typing import Any, NamedTuple, Self

from ledger_cli.engine.instant import Instant
from ledger_cli.errors import LedgerError, ValidationError

PENDING = "pending"
CLAIMED = "claimed"
COMPLETED = "completed"
FAILED = "failed"
BLOCKED = "blocked"

KNOWN: frozenset[str] = frozenset({PENDING, CLAIMED, COMPLETED, FAILED, BLOCKED})
TERMINAL: frozenset[str] = frozenset({COMPLETED, FAILED, BLOCKED})
"""Blocked counts as terminal (Admit never rebases it; the walk skips it)."""


def is_terminal(status: str) -> bool:
    return status in TERMINAL


def is_known(status: str) -> bool:
    return status in KNOWN


_SHORT_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """Go's strconv.Quote (`%q`): printable Unicode kept, the rest escaped."""
    out = ['"']
    for ch in text:
        esc = _SHORT_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
            continue
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


class TaskState(NamedTuple):
    """One record: an immutable typing.NamedTuple (see
    CONTRIBUTING, start-up). Field order is
    the wire order (docs/design.md §2.1)."""

    key: str = ""
    status: str = ""
    sequence: int = 0
    owner: str = ""
    fence: int = 0
    lease_until: Instant = Instant.ZERO
    needs: tuple[str, ...] | None = None
    blocked_by: str = ""
    task: Any = None
    rev: int = 0
    created_by: str = ""
    created_at: Instant = Instant.ZERO
    updated_by: str = ""
    updated_at: Instant = Instant.ZERO

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` (`NamedTuple._replace`)."""
        return self._replace(**changes)

    def validate(self) -> None:
        """Go's TaskState.Validate: the first failing rule wins."""
        if self.key == "":
            raise ValidationError("ledger: task key must not be empty")
        if not is_known(self.status):
            raise ValidationError(
                f"ledger: task {go_quote(self.key)} has an unknown status {go_quote(self.status)}"
            )
        if self.needs and self.key in self.needs:
            raise ValidationError(f"ledger: task {go_quote(self.key)} names itself in Needs")
        if self.status == "blocked" and self.blocked_by == "":
            raise ValidationError(
                f"ledger: task {go_quote(self.key)} is blocked but names no BlockedBy"
            )
        if self.status != "blocked" and self.blocked_by != "":
            raise ValidationError(
                f"ledger: task {go_quote(self.key)} names BlockedBy "
                f"{go_quote(self.blocked_by)} outside StatusBlocked"
            )
        if self.status == "claimed" and self.owner == "":
            raise ValidationError(f"ledger: claimed task {go_quote(self.key)} has no Owner")
        if self.status == "claimed" and self.lease_until.is_zero():
            raise ValidationError(
                f"ledger: claimed task {go_quote(self.key)} has a zero LeaseUntil"
            )

    def cas_tuple(self) -> tuple[int, str, int, int]:
        """What a Store compares: (Sequence, Status, Fence, Rev)."""
        return (self.sequence, self.status, self.fence, self.rev)


# -- the arguments of an admission, checked before any store is touched ----------------

UINT64_MAX = 2**64 - 1
"""Go's Sequence, Fence and Rev are uint64."""
PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
"""The range of a priority (docs/design.md §8.2)."""
QUEUE_MAX_BYTES = 64
"""The longest queue name, in bytes of UTF-8 (docs/design.md §8.7)."""


def whole_number(
    value: object, name: str, low: int, high: int, span: str, error: type[LedgerError]
) -> int:
    """`value` as an int (not a bool) from `low` to `high`, else `error` naming
    `name` and `span` (the range in words)."""
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise error(f"ledger: {name} must be an int, not {type(value).__name__}")
        value = int(value)
    if not low <= value <= high:
        raise error(f"ledger: {name} {value} is outside {span}")
    return value


def check_sequence(seq: object) -> int:
    """An admission's sequence as Go's uint64 holds it, else ValidationError (exit
    8) on every store (docs/design.md §2.11): an int (not a bool) from 0 to 2**64-1."""
    return whole_number(seq, "Sequence", 0, UINT64_MAX, "the uint64 range", ValidationError)


def check_priority(priority: object) -> int:
    """An int (not a bool) from -1000 to 1000, else ValidationError (exit 8)."""
    span = f"{PRIORITY_MIN}..{PRIORITY_MAX}"
    return whole_number(priority, "priority", PRIORITY_MIN, PRIORITY_MAX, span, ValidationError)


def check_str(value: object, what: str) -> str:
    """A key, need, actor or owner: a str (a bytes, an int or None is a
    mistake a store would write as something else, or not at all), else
    ValidationError (exit 8) naming its type, as `check_queue` does."""
    if not isinstance(value, str):
        raise ValidationError(f"ledger: {what} must be a str, not {type(value).__name__}")
    return value


def check_queue(queue: object) -> str:
    """A queue name: a str of 1 to 64 bytes of UTF-8, else ValidationError (exit 8)."""
    if not isinstance(queue, str):
        raise ValidationError(f"ledger: queue must be a str, not {type(queue).__name__}")
    try:
        size = len(queue.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(f"ledger: queue {go_quote(queue)} is not valid Unicode") from None
    if not 0 < size <= QUEUE_MAX_BYTES:
        raise ValidationError(
            f"ledger: queue {go_quote(queue)} is {size} bytes long; "
            f"a queue name is 1 to {QUEUE_MAX_BYTES} bytes of UTF-8"
        )
    return queue


def byte_order(key: str) -> bytes:
    """Sort key matching Go's byte-wise string order."""
    return key.encode("utf-8", "surrogatepass")
