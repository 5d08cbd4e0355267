"""Go's calendar and its RFC 3339 reading, in integers, for every year.

`datetime` starts at year 1 and stops at 9999; Go's times do not, so the
civil-date arithmetic is done here (Howard Hinnant's days-from-civil
algorithms) and `instant.py` builds its `Instant` on it.
"""

from __future__ import annotations

import re

_NS_PER_SECOND = 1_000_000_000
_UNIX_EPOCH_DAYS_FROM_0000_03_01 = 719_468

# What Go's time.Parse(time.RFC3339, s) accepts (time.Time.UnmarshalJSON uses
# it: the strict RFC 3339 check of Go >= 1.20 is disabled upstream, go.dev/issue/54580):
#   year: exactly 4 digits; month, day, minute, second: exactly 2 digits;
#   hour: 1 or 2 digits; an optional fraction after '.' or ',' of 1+ digits
#   (only the first 9 count); then 'Z' or +hh:mm / -hh:mm (2 digits each).
# 'T' and 'Z' are upper case only. Ranges are checked in parse_rfc3339 below.
# The patterns here are strings, compiled on first use (`re` caches them):
# compiling at import would cost every command, and the hot ones never match them.
_RFC3339 = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{1,2}):([0-9]{2}):([0-9]{2})"
    r"(?:[.,]([0-9]+))?"
    r"(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))"
)

_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in(month: int, year: int) -> int:
    if month == 2 and is_leap(year):
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


def year_text(year: int) -> str:
    # Go's appendInt(b, year, 4): a sign for negatives, zero padded to 4 digits.
    if 0 <= year <= 9999:
        return f"{year:04d}"
    if year < 0:
        return f"-{-year:04d}"
    return str(year)


CANONICAL = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{0,8}[1-9])?"


_ZEROS = str.maketrans("123456789", "000000000")
_UTC_FORMS = {20: "0000-00-00T00:00:00Z"} | {
    n: "0000-00-00T00:00:00." + "0" * (n - 21) + "Z" for n in range(22, 31)
}
"""By length, what a canonical UTC text (`CANONICAL` then `Z`) reads as with
every ASCII digit made 0; the fraction's last digit is checked apart. A
string check, not `CANONICAL`: the hot commands never compile a pattern."""


def is_canonical_utc(text: str) -> bool:
    """`CANONICAL` then `Z`: YYYY-MM-DDTHH:MM:SS[.frac]Z, ASCII digits, a
    fraction of 1 to 9 digits with no trailing zero (ranges unchecked)."""
    return text.translate(_ZEROS) == _UTC_FORMS.get(len(text)) and (
        len(text) == 20 or text[-2] != "0"
    )


def parse_rfc3339(text: str) -> tuple[int, int]:
    """(unix ns, offset seconds) of an RFC 3339 text, as Go's time.Parse reads it."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, not {type(text).__name__}")
    m = re.fullmatch(_RFC3339, text)
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
    if not 1 <= day <= days_in(month, year):
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
