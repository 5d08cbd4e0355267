"""Parsing `admit --not-before TIME | --delay D` and `--priority N` (docs/design.md §8.1,
§8.2), and their batch-line members `"not_before"` and `"priority"`. Bad
input is an InputError (exit 2) naming the option or the line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli.inputs import InputError, parse_duration, parse_now, parse_time
from ledger_cli.engine.record import go_quote

if TYPE_CHECKING:
    from datetime import timedelta
    from typing import Any

    from ledger_cli.cli.context import Settings
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


LAST_YEAR = 9999
"""The last year a stored time can name: RFC 3339 (and the Go service's JSON)
writes four digits, so a later not-before could be neither stored nor read."""


def check_lease(settings: Settings, lease: str, lease_td: timedelta) -> None:
    """InputError (exit 2) when `--lease` from --now (or LEDGER_NOW) ends past
    the year 9999, as `--delay` does: the record could not be written. (From the
    clock, no lease of at most 2^63-1 ns reaches that year.)"""
    if not settings.now:
        return
    now = parse_now(settings.now, settings.now_from)
    ns = (lease_td.days * 86_400 + lease_td.seconds) * 10**9 + lease_td.microseconds * 1000
    if now.add_ns(ns).year > LAST_YEAR:
        raise InputError(
            f"ledger: --lease {go_quote(lease)} ends the lease past the year "
            f"{LAST_YEAR}, which a stored time cannot name",
            "bad_duration",
        )


class When:
    """`--not-before` or `--delay`, resolved against the admission's now."""

    __slots__ = ("delay", "delay_ns", "not_before")

    def __init__(self, not_before: str | None, delay: str | None) -> None:
        if not_before is not None and delay is not None:
            raise InputError("ledger: give --not-before or --delay, not both")
        self.not_before = parse_time(not_before, "--not-before") if not_before is not None else None
        self.delay_ns: int | None = None
        self.delay = delay
        if delay is not None:
            d = parse_duration(delay, "--delay", exact=True)
            ns = (d.days * 86_400 + d.seconds) * 10**9 + d.microseconds * 1000
            if ns <= 0:
                raise InputError(f"ledger: --delay {go_quote(delay)} must be positive")
            self.delay_ns = ns

    def check(self, settings: Settings) -> None:
        """`at` against --now or the system clock, before any store is opened
        (a store with its own clock is asked again in the command's session)."""
        from ledger_cli.engine.instant import Instant

        self.at(parse_now(settings.now, settings.now_from) if settings.now else Instant.now())

    def at(self, now: Instant) -> Instant | None:
        """The not-before time; InputError (exit 2) when `--delay` puts it
        past the year 9999."""
        if self.delay_ns is None:
            return self.not_before
        at = now.add_ns(self.delay_ns)
        if at.year > LAST_YEAR:
            raise InputError(
                f"ledger: --delay {go_quote(self.delay or '')} puts the task past the year "
                f"{LAST_YEAR}, which a stored time cannot name",
                "bad_duration",
            )
        return at


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
            detail = str(exc).removeprefix("ledger: ")  # the line's own prefix once
            raise InputError(f"{where}: {detail}", "bad_batch") from None
    priority = obj.get("priority", 0)
    if type(priority) is not int or not -1000 <= priority <= 1000:
        raise InputError(f'{where}: "priority" must be {_RANGE}', "bad_batch")
    return not_before, priority
