"""Instant: a nanosecond-precision point in time with a UTC offset (Go's time.Time).

Go times carry nanoseconds, allow year 0 (and any other year), and remember
the offset they were parsed with. `datetime` has microseconds and starts at
year 1, so the port keeps its own type: an integer count of nanoseconds since
the Unix epoch (negative before 1970) plus an offset in seconds that is used
for printing only. Equality, hashing and ordering look at the instant alone,
as Go's `Time.Equal` / `Before` / `After` do.

Civil-date arithmetic is done here (Howard Hinnant's days-from-civil
algorithms), never through `datetime`, so every year works.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar, overload


__all__ = ["Instant"]

_NS_PER_SECOND = 1_000_000_000
_NS_PER_DAY = 86_400 * _NS_PER_SECOND
_UNIX_EPOCH_DAYS_FROM_0000_03_01 = 719_468

# What Go's time.Parse(time.RFC3339, s) accepts (time.Time.UnmarshalJSON uses
# it: the strict RFC 3339 check of Go >= 1.20 is disabled upstream, go.dev/issue/54580):
#   year: exactly 4 digits; month, day, minute, second: exactly 2 digits;
#   hour: 1 or 2 digits; an optional fraction after '.' or ',' of 1+ digits
#   (only the first 9 count); then 'Z' or +hh:mm / -hh:mm (2 digits each).
# 'T' and 'Z' are upper case only. Ranges are checked in _parse below.
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{1,2}):([0-9]{2}):([0-9]{2})"
    r"(?:[.,]([0-9]+))?"
    r"(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))"
)

_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in(month: int, year: int) -> int:
    if month == 2 and _is_leap(year):
        return 29
    return _DAYS_IN_MONTH[month]


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y = year - 1 if month <= 2 else year
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - _UNIX_EPOCH_DAYS_FROM_0000_03_01


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01 (any year)."""
    z = days + _UNIX_EPOCH_DAYS_FROM_0000_03_01
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def _timedelta_ns(delta: timedelta) -> int:
    return delta.days * _NS_PER_DAY + delta.seconds * _NS_PER_SECOND + delta.microseconds * 1000


def _year_text(year: int) -> str:
    # Go's appendInt(b, year, 4): a sign for negatives, zero padded to 4 digits.
    if 0 <= year <= 9999:
        return f"{year:04d}"
    if year < 0:
        return f"-{-year:04d}"
    return str(year)


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
        ns, offset = _parse(text)
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
        """An Instant as is; an aware datetime converted; anything else TypeError."""
        if isinstance(value, Instant):
            return value
        if isinstance(value, datetime):
            return cls.from_datetime(value)
        raise TypeError(f"expected an Instant or an aware datetime, not {type(value).__name__}")

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
        offset = self._offset
        secs, frac = divmod(self._ns + offset * _NS_PER_SECOND, _NS_PER_SECOND)
        days, sod = divmod(secs, 86_400)
        year, month, day = civil_from_days(days)
        hour, rem = divmod(sod, 3600)
        minute, second = divmod(rem, 60)
        if 0 <= year <= 9999:
            text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
        else:
            text = f"{_year_text(year)}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
        if frac:
            text += "." + f"{frac:09d}".rstrip("0")
        if offset == 0:
            return text + "Z"
        # Go: zone := offset / 60 (truncated toward zero), then the sign of zone.
        zone = offset // 60 if offset > 0 else -(-offset // 60)
        sign = "-" if zone < 0 else "+"
        zone = abs(zone)
        return f"{text}{sign}{zone // 60:02d}:{zone % 60:02d}"

    def __repr__(self) -> str:
        return f"Instant({str(self)!r})"


_CANONICAL = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{0,8}[1-9])?"
)


_ZEROS = str.maketrans("123456789", "000000000")
_UTC_FORMS = {20: "0000-00-00T00:00:00Z"} | {
    n: "0000-00-00T00:00:00." + "0" * (n - 21) + "Z" for n in range(22, 31)
}
"""By length, what a canonical UTC text (`_CANONICAL` then `Z`) reads as with
every ASCII digit made 0; the fraction's last digit is checked apart. A
string check, not `_CANONICAL`: the hot commands never compile a pattern."""


def is_canonical_utc(text: str) -> bool:
    """`_CANONICAL` then `Z`: YYYY-MM-DDTHH:MM:SS[.frac]Z, ASCII digits, a
    fraction of 1 to 9 digits with no trailing zero (ranges unchecked)."""
    return text.translate(_ZEROS) == _UTC_FORMS.get(len(text)) and (
        len(text) == 20 or text[-2] != "0"
    )


def parse_printed(text: str) -> Instant:
    """`Instant.parse`, and when `text` is exactly what `str()` prints for the
    result (RFC3339Nano: no trailing zero in the fraction, `Z` for offset 0),
    the text kept as its cached form: records read back print without
    formatting their times again."""
    if isinstance(text, str) and is_canonical_utc(text):
        utc = _utc_printed(text)
        if utc is not None:
            return utc
    ns, offset = _parse(text)
    inst = _make(ns, offset)
    zoned = text[-1] == "Z" or (offset != 0 and text[-6] in "+-")
    if zoned and _CANONICAL.fullmatch(text, 0, len(text) - (1 if text[-1] == "Z" else 6)):
        _SET_TEXT(inst, text)
    return inst


_DAYS: dict[str, int] = {}
"""Days since 1970 of the dates `_utc_printed` has met (valid ones only):
the records of a store share few dates (a day's admissions, a day's claims)."""
_DAYS_KEPT = 4096


def _utc_printed(text: str) -> Instant | None:
    """`parse_printed` of a canonical UTC text (YYYY-MM-DDTHH:MM:SS[.frac]Z,
    digits where digits go), its date's day count looked up, not worked out;
    None when a field is out of range (`_parse` words the error)."""
    date = text[:10]
    days = _DAYS.get(date)
    if days is None:
        year, month, day = int(text[:4]), int(text[5:7]), int(text[8:10])
        if not (1 <= month <= 12 and 1 <= day <= _days_in(month, year)):
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


def _parse(text: str) -> tuple[int, int]:
    """(unix ns, offset seconds) of an RFC 3339 text, as Go's time.Parse reads it."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, not {type(text).__name__}")
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"cannot parse {text!r} as RFC 3339")
    year_s, month_s, day_s, hour_s, minute_s, second_s, frac_s, z, sign, oh_s, om_s = m.groups()
    year = int(year_s)
    month = int(month_s)
    day = int(day_s)
    hour = int(hour_s)
    minute = int(minute_s)
    second = int(second_s)
    if not 1 <= month <= 12:
        raise ValueError(f"parsing time {text!r}: month out of range")
    if not 1 <= day <= _days_in(month, year):
        raise ValueError(f"parsing time {text!r}: day out of range")
    if hour >= 24:
        raise ValueError(f"parsing time {text!r}: hour out of range")
    if minute >= 60:
        raise ValueError(f"parsing time {text!r}: minute out of range")
    if second >= 60:
        raise ValueError(f"parsing time {text!r}: second out of range")
    offset = 0
    if z is None:
        oh = int(oh_s)
        om = int(om_s)
        # Go's range test uses > (offsets of 24 hours or 60 minutes are accepted).
        if oh > 24:
            raise ValueError(f"parsing time {text!r}: time zone offset hour out of range")
        if om > 60:
            raise ValueError(f"parsing time {text!r}: time zone offset minute out of range")
        offset = (oh * 60 + om) * 60
        if sign == "-":
            offset = -offset
    nanos = 0
    if frac_s is not None:
        nanos = int(frac_s[:9].ljust(9, "0"))
    days = days_from_civil(year, month, day)
    secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset
    return secs * _NS_PER_SECOND + nanos, offset


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
