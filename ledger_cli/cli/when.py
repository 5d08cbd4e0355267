"""Parsing `admit --not-before TIME | --delay D` and `--priority N` (docs/design.md §8.1,
§8.2), and their batch-line members `"not_before"` and `"priority"`. Bad
input is an InputError (exit 2) naming the option or the line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli.inputs import InputError, parse_duration, parse_time
from ledger_cli.engine.record import go_quote

if TYPE_CHECKING:
    from typing import Any

    from ledger_cli.engine.instant import Instant

_RANGE = "an integer from -1000 to 1000"


def parse_priority(text: str | None) -> int:
    if text is None:
        return 0
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit() or len(body) > 5:
        raise InputError(f"ledger: --priority {go_quote(text)} is not {_RANGE}", "bad_priority")
    value = int(text)
    if not -1000 <= value <= 1000:
        raise InputError(f"ledger: --priority {value} is not {_RANGE}", "bad_priority")
    return value


class When:
    """`--not-before` or `--delay`, resolved against the admission's now."""

    __slots__ = ("delay_ns", "not_before")

    def __init__(self, not_before: str | None, delay: str | None) -> None:
        if not_before is not None and delay is not None:
            raise InputError("ledger: give --not-before or --delay, not both")
        self.not_before = parse_time(not_before, "--not-before") if not_before is not None else None
        self.delay_ns: int | None = None
        if delay is not None:
            d = parse_duration(delay, "--delay")
            ns = (d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000
            if ns <= 0:
                raise InputError(f"ledger: --delay {go_quote(delay)} must be positive")
            self.delay_ns = ns

    def at(self, now: Instant) -> Instant | None:
        if self.delay_ns is not None:
            return now.add_ns(self.delay_ns)
        return self.not_before


def batch_members(where: str, obj: dict[str, Any]) -> tuple[Instant | None, int]:
    """A batch line's `"not_before"` (RFC 3339 text) and `"priority"` (an integer)."""
    nb_raw = obj.get("not_before")
    not_before = None
    if nb_raw is not None:
        if not isinstance(nb_raw, str):
            raise InputError(f'{where}: "not_before" must be an RFC 3339 time', "bad_batch")
        try:
            not_before = parse_time(nb_raw, '"not_before"')
        except InputError as exc:
            raise InputError(f"{where}: {exc}", "bad_batch") from None
    priority = obj.get("priority", 0)
    if type(priority) is not int or not -1000 <= priority <= 1000:
        raise InputError(f'{where}: "priority" must be {_RANGE}', "bad_batch")
    return not_before, priority
