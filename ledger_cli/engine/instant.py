"""Instant: a nanosecond-precision point in time with a UTC offset (Go's time.Time).

Go times carry nanoseconds, allow year 0 (and any other year), and remember
the offset they were parsed with. `datetime` has microseconds and starts at
year 1, so the port keeps its own type: an integer count of nanoseconds since
the Unix epoch (negative before 1970) plus an offset in seconds that is used
for printing only. Equality, hashing and ordering look at the instant alone,
as Go's `Time.Equal` / `Before` / `After` do.

Civil-date arithmetic and the RFC 3339 reading are `civil.py`'s, never
`datetime`'s, so every year works.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

from ledger_cli.engine.civil import (
    CANONICAL,
    civil_from_days,
    days_from_civil,
    days_in,
    is_canonical_utc,
    parse_rfc3339,
    year_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar, overload


__all__ = ["Instant"]

_NS_PER_SECOND = 1_000_000_000
_NS_PER_DAY = 86_400 * _NS_PER_SECOND


def _timedelta_ns(delta: timedelta) -> int:
    return delta.days * _NS_PER_DAY + delta.seconds * _NS_PER_SECOND + delta.microseconds * 1000


class Instant:
    """An immutable nanosecond instant plus the UTC offset it is shown in.

    `Instant("2026-01-01T00:00:00.5+01:00")` parses like `Instant.parse`.
    """

    __slots__ = ("_ns", "_offset", "_text")

    ZERO: ClassVar[Instant]
    """Go's zero time, 0001-01-01T00:00:00Z ("unset")."""

    _ns: int
    _offset: int
    _text: str  # the formatted text, set on first str()

    def __init__(self, text: str) -> None:
        ns, offset = parse_rfc3339(text)
        _SET_NS(self, ns)
        _SET_OFFSET(self, offset)

    # -- construction --------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Instant:
        """Parse what Go's `time.Parse(time.RFC3339, text)` accepts.

        Digits past the ninth fractional digit are dropped (truncated), as Go
        does. Raises ValueError on anything else. (A canonical UTC text, as
        `str()` prints it, takes `parse_printed`'s string-checked way.)
        """
        return parse_printed(text)

    @classmethod
    def from_unix_ns(cls, ns: int, offset_seconds: int = 0) -> Instant:
        return _make(int(ns), int(offset_seconds))

    @classmethod
    def from_datetime(cls, d: datetime) -> Instant:
        """The instant of an aware datetime, keeping its offset for printing."""
        off = d.utcoffset()
        if off is None:
            raise ValueError("naive datetime: a timezone is required")
        days = days_from_civil(d.year, d.month, d.day)
        local_us = (days * 86_400 + d.hour * 3600 + d.minute * 60 + d.second) * 1_000_000
        local_us += d.microsecond
        off_us = off // timedelta(microseconds=1)
        whole = abs(off_us) // 1_000_000  # whole seconds toward zero; display only
        offset_seconds = whole if off_us >= 0 else -whole
        return _make((local_us - off_us) * 1000, offset_seconds)

    @classmethod
    def coerce(cls, value: Instant | datetime) -> Instant:
        """A time the library is given (every `Ledger` method's `now` and
        `not_before`): an Instant as is, an aware datetime converted; anything
        else TypeError, a naive datetime ValueError.

        A UTC offset that is not a whole minute (`timezone(timedelta(seconds=30))`;
        zoneinfo's Africa/Monrovia before 1972, -00:44:30) is a `ValidationError` (exit 8):
        RFC 3339, which every store writes, has no seconds in an offset, so the
        text written would name another instant (docs/design.md §2.11,
        departure 6). A sub-second part of an offset is no such problem: it
        moves the instant, which is kept to the nanosecond, not the text.
        """
        if isinstance(value, Instant):
            inst = value
        elif isinstance(value, datetime):
            inst = cls.from_datetime(value)
        else:
            raise TypeError(f"expected an Instant or an aware datetime, not {type(value).__name__}")
        if inst._offset % 60:
            from ledger_cli.errors import ValidationError

            if isinstance(value, datetime):  # as given, a sub-second offset too
                given = value.isoformat()
            else:
                given = inst._wall() + _offset_text(inst._offset)
            raise ValidationError(
                f"ledger: time {given} is not a time a store can keep"
                " (RFC 3339, an offset of whole minutes)"
            )
        return inst

    @classmethod
    def now(cls) -> Instant:
        """The system clock, in UTC, with nanoseconds."""
        return _make(time.time_ns(), 0)

    # -- immutability --------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Instant is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Instant is immutable")

    def __reduce__(self) -> tuple[Any, tuple[int, int]]:
        return (Instant.from_unix_ns, (self._ns, self._offset))

    def __copy__(self) -> Instant:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Instant:
        return self

    # -- accessors -----------------------------------------------------------

    @property
    def unix_ns(self) -> int:
        """Nanoseconds since 1970-01-01T00:00:00Z (negative before)."""
        return self._ns

    @property
    def offset_seconds(self) -> int:
        """The UTC offset the instant is shown in (printing only)."""
        return self._offset

    @property
    def year(self) -> int:
        """The calendar year in the instant's own offset."""
        days = (self._ns + self._offset * _NS_PER_SECOND) // _NS_PER_DAY
        return civil_from_days(days)[0]

    def utc(self) -> Instant:
        """The same instant shown in UTC."""
        if self._offset == 0:
            return self
        return _make(self._ns, 0)

    def is_zero(self) -> bool:
        """True for Go's zero time (0001-01-01T00:00:00Z), whatever the offset."""
        return self._ns == _ZERO_NS

    def add_ns(self, n: int) -> Instant:
        return _make(self._ns + n, self._offset)

    def to_datetime(self) -> datetime:
        """An aware datetime in the instant's offset; sub-microsecond digits dropped.

        ValueError when datetime cannot hold it (a year outside 1..9999, an
        offset of a day or more).
        """
        if not -86_400 < self._offset < 86_400:
            raise ValueError(f"offset {self._offset}s cannot be held by a datetime")
        local = self._ns + self._offset * _NS_PER_SECOND
        secs, frac = divmod(local, _NS_PER_SECOND)
        days, sod = divmod(secs, 86_400)
        year, month, day = civil_from_days(days)
        if not 1 <= year <= 9999:
            raise ValueError(f"year {year} cannot be held by a datetime")
        hour, rem = divmod(sod, 3600)
        minute, second = divmod(rem, 60)
        tz = UTC if self._offset == 0 else timezone(timedelta(seconds=self._offset))
        return datetime(year, month, day, hour, minute, second, frac // 1000, tzinfo=tz)

    # -- arithmetic ----------------------------------------------------------

    def __add__(self, other: timedelta) -> Instant:
        if isinstance(other, timedelta):
            return _make(self._ns + _timedelta_ns(other), self._offset)
        return NotImplemented

    __radd__ = __add__

    if TYPE_CHECKING:  # typing.overload, seen by type checkers only

        @overload
        def __sub__(self, other: Instant) -> timedelta: ...

        @overload
        def __sub__(self, other: timedelta) -> Instant: ...

    def __sub__(self, other: Instant | timedelta) -> timedelta | Instant:
        """`instant - instant` is a timedelta (truncated toward zero to whole
        microseconds); `instant - timedelta` is an instant in the same offset."""
        if isinstance(other, Instant):
            diff = self._ns - other._ns
            # timedelta holds microseconds: truncate toward zero.
            us = diff // 1000 if diff >= 0 else -(-diff // 1000)
            return timedelta(microseconds=us)
        if isinstance(other, timedelta):
            return _make(self._ns - _timedelta_ns(other), self._offset)
        return NotImplemented

    # -- comparison (the instant only) ---------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Instant):
            return self._ns == other._ns
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, Instant):
            return self._ns != other._ns
        return NotImplemented

    def __lt__(self, other: Instant) -> bool:
        if isinstance(other, Instant):
            return self._ns < other._ns
        return NotImplemented

    def __le__(self, other: Instant) -> bool:
        if isinstance(other, Instant):
            return self._ns <= other._ns
        return NotImplemented

    def __gt__(self, other: Instant) -> bool:
        if isinstance(other, Instant):
            return self._ns > other._ns
        return NotImplemented

    def __ge__(self, other: Instant) -> bool:
        if isinstance(other, Instant):
            return self._ns >= other._ns
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._ns)

    # -- text ------------------------------------------------------------------

    def __str__(self) -> str:
        """Go's RFC3339Nano in the instant's own offset (formatted once, then cached)."""
        try:
            return self._text
        except AttributeError:
            text = self._format()
            _SET_TEXT(self, text)
            return text

    def _format(self) -> str:
        text = self._wall()
        offset = self._offset
        if offset == 0:
            return text + "Z"
        # Go: zone := offset / 60 (truncated toward zero), then the sign of zone.
        zone = offset // 60 if offset > 0 else -(-offset // 60)
        sign = "-" if zone < 0 else "+"
        zone = abs(zone)
        return f"{text}{sign}{zone // 60:02d}:{zone % 60:02d}"

    def _wall(self) -> str:
        """The date and clock time in the instant's own offset, the fraction
        without trailing zeros: RFC3339Nano before its zone."""
        secs, frac = divmod(self._ns + self._offset * _NS_PER_SECOND, _NS_PER_SECOND)
        days, sod = divmod(secs, 86_400)
        year, month, day = civil_from_days(days)
        hour, rem = divmod(sod, 3600)
        minute, second = divmod(rem, 60)
        if 0 <= year <= 9999:
            text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
        else:
            text = f"{year_text(year)}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
        if frac:
            text += "." + f"{frac:09d}".rstrip("0")
        return text

    def __repr__(self) -> str:
        return f"Instant({str(self)!r})"


def _offset_text(offset: int) -> str:
    """An offset in seconds as `+HH:MM:SS` (as `datetime.isoformat` shows one)."""
    sign = "-" if offset < 0 else "+"
    hours, rest = divmod(abs(offset), 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def parse_printed(text: str) -> Instant:
    """`Instant.parse`, and when `text` is exactly what `str()` prints for the
    result (RFC3339Nano: no trailing zero in the fraction, `Z` for offset 0),
    the text kept as its cached form: records read back print without
    formatting their times again."""
    if isinstance(text, str) and is_canonical_utc(text):
        utc = _utc_printed(text)
        if utc is not None:
            return utc
    ns, offset = parse_rfc3339(text)
    inst = _make(ns, offset)
    zoned = text[-1] == "Z" or (offset != 0 and text[-6] in "+-")
    end = len(text) - (1 if text[-1] == "Z" else 6)
    if zoned and re.compile(CANONICAL).fullmatch(text, 0, end):
        _SET_TEXT(inst, text)
    return inst


_DAYS: dict[str, int] = {}
"""Days since 1970 of the dates `_utc_printed` has met (valid ones only):
the records of a store share few dates (a day's admissions, a day's claims)."""
_DAYS_KEPT = 4096


def _utc_printed(text: str) -> Instant | None:
    """`parse_printed` of a canonical UTC text (YYYY-MM-DDTHH:MM:SS[.frac]Z,
    digits where digits go), its date's day count looked up, not worked out;
    None when a field is out of range (`parse_rfc3339` words the error)."""
    date = text[:10]
    days = _DAYS.get(date)
    if days is None:
        year, month, day = int(text[:4]), int(text[5:7]), int(text[8:10])
        if not (1 <= month <= 12 and 1 <= day <= days_in(month, year)):
            return None
        if len(_DAYS) >= _DAYS_KEPT:
            _DAYS.clear()
        days = _DAYS[date] = days_from_civil(year, month, day)
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if hour >= 24 or minute >= 60 or second >= 60:
        return None
    nanos = int(text[20:-1].ljust(9, "0")) if len(text) > 20 else 0
    secs = days * 86_400 + hour * 3600 + minute * 60 + second
    inst = _make(secs * _NS_PER_SECOND + nanos, 0)
    _SET_TEXT(inst, text)
    return inst


# Instances are built by setting the slots through their descriptors (the
# class forbids attribute assignment); this is about twice as fast as
# object.__setattr__, and instants are made by the hundred thousand.
_SET_NS: Callable[[Instant, int], None] = Instant.__dict__["_ns"].__set__
_SET_OFFSET: Callable[[Instant, int], None] = Instant.__dict__["_offset"].__set__
_SET_TEXT: Callable[[Instant, str], None] = Instant.__dict__["_text"].__set__
_new = object.__new__


def _make(ns: int, offset: int) -> Instant:
    self: Instant = _new(Instant)
    _SET_NS(self, ns)
    _SET_OFFSET(self, offset)
    return self


_ZERO_NS = days_from_civil(1, 1, 1) * _NS_PER_DAY
Instant.ZERO = _make(_ZERO_NS, 0)
