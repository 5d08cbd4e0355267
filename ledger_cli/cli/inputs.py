"""Parsing and validation of command-line input (docs/design.md §4, §5).

Every function here raises `InputError` (exit 2) with a one-line message, or
an engine error class where docs/design.md §4.4 names one; never anything else. Nothing
here imports more than the standard library and the engine's JSON helpers.
"""

from __future__ import annotations

from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING

from ledger_cli.engine.gojson import NumberRangeError, literal_value
from ledger_cli.engine.record import go_quote
from ledger_cli.errors import LedgerError, UnknownStatusError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ledger_cli.engine.instant import Instant

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_KEY_BYTES",
    "MAX_TASK_BYTES",
    "InputError",
    "parse_duration",
    "parse_json",
    "parse_now",
    "parse_status",
    "parse_uint",
    "require_keys",
    "validate_key",
    "validate_text",
]

MAX_KEY_BYTES = 1024
MAX_JSON_DEPTH = 512
MAX_TASK_BYTES = 1 << 20
"""Largest task payload: `--task`, `--task-file`, one line of `admit --batch` (1 MiB)."""
MAX_INPUT_BYTES = 64 << 20
"""Largest `admit --batch` or `restore` input (64 MiB): each is one transaction held
in memory (~16 bytes of memory per input byte), so bigger inputs are split."""
UINT64_MAX = 2**64 - 1
STATUSES = ("pending", "claimed", "completed", "failed", "blocked")


INPUT_CODES: dict[str, str] = {
    "bad_batch": "a line of `admit --batch` that is not a task",
    "bad_duration": "a duration (`--lease`, `--delay`, `--timeout`…) not parsed or out of range",
    "bad_file": "a file to read or write (`--task-file`, `-o`) that cannot be",
    "bad_json": "a payload that is not JSON, or not the JSON Go would accept",
    "bad_key": "a key that is empty, too long or not valid text",
    "bad_number": "a number (`--seq`, `--fence`, `--limit`…) not parsed or out of range",
    "bad_priority": "a priority out of its range",
    "bad_time": "an instant (`--now`, `--not-before`) that is not RFC 3339 or is out of range",
    "not_a_terminal": "a command that draws on a terminal (`watch`) run without one",
    "too_large": "an input (`--task`, `--task-file`, `--batch`, `restore`) over its size limit",
}
"""The codes of bad input besides `usage`, each with what it is raised for
(docs/reference.md's error codes are written from this table;
tests/docs/test_error_codes.py finds every code an InputError is raised with)."""


class InputError(LedgerError):
    """Bad input on the command line or in a JSON document: exit 2."""

    code = "usage"
    exit_code = 2

    def __init__(self, message: str, code: str = "usage") -> None:
        super().__init__(message)
        self.code = code


# -- text and keys -------------------------------------------------------------


# No regular expressions on the hot path: compiling one costs ~1 ms at start-up.
_CONTROLS: dict[int, None] = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)])


def _has_control(value: str) -> bool:
    """C0, DEL or C1 anywhere in `value`."""
    return len(value.translate(_CONTROLS)) != len(value)


def _utf8_len(value: str, what: str) -> int:
    """UTF-8 byte length; invalid UTF-8 (surrogates from argv) is an InputError."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InputError(
            f"ledger: {what} {go_quote(value)} is not valid UTF-8", "bad_key"
        ) from None


def validate_key(value: str, what: str = "key") -> str:
    """Keys: 1-1024 bytes of UTF-8, no control characters (C0, DEL, C1)."""
    n = _utf8_len(value, what)
    if n == 0:
        raise InputError(f"ledger: {what} must not be empty", "bad_key")
    if n > MAX_KEY_BYTES:
        raise InputError(
            f"ledger: {what} is {n} bytes long; the limit is {MAX_KEY_BYTES} bytes of UTF-8",
            "bad_key",
        )
    if _has_control(value):
        raise InputError(
            f"ledger: {what} {go_quote(value)} contains a control character", "bad_key"
        )
    return value


def require_keys(values: dict[str, Any]) -> None:
    """Refuse an empty KEY argument of any command: no store holds an empty key
    (docs/design.md §5.2). Every declaration names its KEY arguments `key` or
    `keys` (declarations/base.py), and `execute` calls this for both paths."""
    key = values.get("key")
    for value in (key,) if isinstance(key, str) else values.get("keys") or ():
        if not value:
            raise InputError("ledger: key must not be empty", "bad_key")


def validate_text(value: str, what: str) -> str:
    """Owners, actors: valid UTF-8 without control characters (may be empty)."""
    n = _utf8_len(value, what)
    if n > MAX_KEY_BYTES:
        raise InputError(f"ledger: {what} is {n} bytes long; the limit is {MAX_KEY_BYTES}")
    if _has_control(value):
        raise InputError(f"ledger: {what} {go_quote(value)} contains a control character")
    return value


# -- numbers, statuses, times ------------------------------------------------------


def parse_uint(text: str, what: str, limit: int = UINT64_MAX) -> int:
    """A plain non-negative decimal integer that fits `limit` (default: uint64)."""
    if not (text.isascii() and text.isdigit()):
        raise InputError(
            f"ledger: {what} must be a non-negative integer, got {go_quote(text)}", "bad_number"
        )
    digits = text.lstrip("0") or "0"
    # Never convert thousands of digits (slow, and Python refuses past 4300).
    value = int(digits) if len(digits) <= len(str(limit)) else limit + 1
    if value > limit:
        raise InputError(f"ledger: {what} {text} is out of range (at most {limit})", "bad_number")
    return value


def parse_status(text: str) -> str:
    if text not in STATUSES:
        raise UnknownStatusError(
            f"ledger: unknown status {go_quote(text)} (want one of {', '.join(STATUSES)})"
        )
    return text


def parse_now(text: str, what: str = "--now") -> Instant:
    """An RFC 3339 instant for --now / LEDGER_NOW (`what`: the one it came from)."""
    return parse_time(text, what)


def parse_time(text: str, what: str) -> Instant:
    """An RFC 3339 instant given as `what` (`--now`, `--not-before`, a batch member)."""
    from ledger_cli.engine.instant import Instant

    try:
        at = Instant.parse(text)
        if text[-1] != "Z" and (text[-5:-3] > "23" or text[-2:] > "59"):
            raise ValueError(text)  # an offset of 24h (+23:60, +24:00): Go cannot encode it
        return at
    except (ValueError, TypeError):
        raise InputError(
            f"ledger: {what} {go_quote(text)} is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)",
            "bad_time",
        ) from None


# -- durations ---------------------------------------------------------------------

_UNIT_NS = {"d": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9, "ms": 10**6}
_DIGITS = frozenset("0123456789")
_MAX_DURATION_NS = 2**63 - 1
"""The longest duration, 2^63-1 ns (about 292 years): what the Go service's
time.Duration holds. Longer ones could end past the year 9999, which no
stored time can name."""


def _duration_parts(text: str) -> list[tuple[str, str, str]] | None:
    """`1h30m` -> [("1", "", "h"), ("30", "", "m")]; plain `1.5` -> [("1", "5", "s")].

    Each part is digits, an optional `.digits`, and a unit (d, h, m, s, ms);
    only a lone number may omit the unit. None when `text` is not of that form.
    """
    parts: list[tuple[str, str, str]] = []
    i, n = 0, len(text)
    while i < n:
        j = i
        while j < n and text[j] in _DIGITS:
            j += 1
        if j == i:
            return None
        whole, frac = text[i:j], ""
        if j < n and text[j] == ".":
            k = j + 1
            while k < n and text[k] in _DIGITS:
                k += 1
            if k == j + 1:
                return None
            frac, j = text[j + 1 : k], k
        if text.startswith("ms", j):
            unit, j = "ms", j + 2
        elif j < n and text[j] in "dhms":
            unit, j = text[j], j + 1
        elif j == n and not parts:
            unit = "s"  # plain seconds
        else:
            return None
        parts.append((whole, frac, unit))
        i = j
    return parts or None


def parse_duration(text: str, what: str = "duration", exact: bool = False) -> timedelta:
    """`90s`, `5m`, `1h30m`, `2d`, `250ms` or plain (decimal) seconds, to the
    microsecond the clock counts. `exact` (a lease, a delay): a duration above
    zero that would round to zero is refused as such, not passed on as zero."""
    parts = _duration_parts(text)
    if parts is None:
        raise InputError(
            f"ledger: bad {what} {go_quote(text)}: write it as 90s, 5m, 1h30m, 2d or plain seconds",
            "bad_duration",
        )
    total = 0
    for whole, frac, unit in parts:
        unit_ns = _UNIT_NS[unit]
        if len(whole) > 30:
            total = _MAX_DURATION_NS + 1
            break
        total += int(whole) * unit_ns
        if frac:
            frac = frac[:18]
            total += int(frac) * unit_ns // 10 ** len(frac)
    if total > _MAX_DURATION_NS:
        raise InputError(f"ledger: {what} {go_quote(text)} is too large", "bad_duration")
    if exact and 0 < total < 1000:
        raise InputError(
            f"ledger: {what} {go_quote(text)} is under a microsecond, the clock's resolution: "
            f"the shortest {what} is 0.001ms",
            "bad_duration",
        )
    return timedelta(microseconds=total // 1000)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


# -- strict JSON -----------------------------------------------------------------

_STRING_PATTERN = r'"(?:[^"\\]|\\.)*"'


class _Reject(ValueError):
    """Raised from a decoder hook; carries the final message."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _Reject(f"duplicate key {go_quote(key)} in one object")
        obj[key] = value
    return obj


def _constant(name: str) -> Any:
    raise _Reject(f"{name} is not a JSON number")


def _number(literal: str) -> int | float:
    """docs/design.md §2.11 departure 3, as the stores decode it: an integer
    literal within 64 bits (-2^63 .. 2^64-1) is an exact int (`-0` is -0.0),
    every other number a float64, as in Go."""
    try:
        return literal_value(literal)
    except NumberRangeError:
        raise _Reject(f"number {literal} is out of float64 range") from None


@cache
def _json_decoder() -> Callable[[str], Any]:
    """The strict decoder, built once, on first use."""
    import json

    return json.JSONDecoder(
        object_pairs_hook=_no_duplicates,
        parse_int=_number,
        parse_float=_number,
        parse_constant=_constant,
    ).decode


def _depth(text: str) -> int:
    """Deepest nesting of arrays/objects (strings stripped first); 0 when
    there are too few brackets to nest deeper than MAX_JSON_DEPTH."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0  # cannot nest deeper (no pattern compiled: `admit --task` is a hot command)
    deepest = depth = 0
    import re

    for m in re.finditer(r"[\[\]{}]", re.sub(_STRING_PATTERN, "", text, flags=re.DOTALL)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _check_strings(value: Any) -> None:
    """Every string (keys included) must be encodable: no lone surrogates."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            node.encode("utf-8")
        elif isinstance(node, dict):
            for k, v in node.items():
                k.encode("utf-8")
                stack.append(v)
        elif isinstance(node, list):
            stack.extend(node)


def parse_json(data: bytes | str, what: str = "bad JSON", max_bytes: int | None = None) -> Any:
    """A strict JSON document: valid UTF-8, no duplicate keys, no NaN/Infinity,
    numbers inside float64 range, nesting at most 512 levels, no lone surrogates,
    and (with `max_bytes`) at most that many bytes long.

    Numbers follow docs/design.md §2.11 departure 3. Raises InputError("{what}: {reason}");
    `what` names the input (`ledger: bad --task JSON`, `line 3`).
    """

    def fail(reason: str) -> InputError:
        return InputError(f"{what}: {reason}", "bad_json")

    if max_bytes is not None and len(data) > max_bytes // 4:  # else surely small enough
        too_long = len(data) > max_bytes or (
            isinstance(data, str) and len(data.encode("utf-8", "surrogatepass")) > max_bytes
        )
        if too_long:
            raise fail(f"larger than the limit of {_size(max_bytes)}")

    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise fail(f"invalid UTF-8 at byte {exc.start}") from None
    else:
        text = data
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise fail(f"invalid UTF-8 at character {exc.start}") from None
    if text.startswith("\ufeff"):
        raise fail("a byte order mark is not allowed")
    if _depth(text) > MAX_JSON_DEPTH:
        raise fail(f"nesting deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = _json_decoder()(text)
    except _Reject as exc:
        raise fail(str(exc)) from None
    except ValueError as exc:
        import json

        if not isinstance(exc, json.JSONDecodeError):
            raise
        raise fail(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise fail(f"nesting deeper than {MAX_JSON_DEPTH} levels") from None
    try:
        _check_strings(value)
    except UnicodeEncodeError:
        raise fail("a string holds a lone UTF-16 surrogate escape") from None
    return value


def owner_and_lease(owner: str, lease: str) -> tuple[str, timedelta]:
    """`--owner O --lease D` of `claim`, `renew`, `takeover` and `run`."""
    return validate_text(owner, "owner"), parse_duration(lease, "lease", exact=True)
