"""Encoding: Go's `json.Marshal` of a generic value, byte for byte.

`encode_string`, `format_float` and `encode_value` write exactly what Go
writes for `nil`, bool, float64, string, `[]any` and `map[string]any`:
HTML-safe string escaping, float64 formatting (strconv's shortest 'f' or
'e'), sorted object keys, compact. Departure 3: an integer within 64 bits
(`INT64_MIN`..`UINT64_MAX`) is written with every digit, where Go, holding a
float64, would round it; a larger one is written as its float64.
"""

from __future__ import annotations

import math
import re
from operator import itemgetter
from typing import TYPE_CHECKING

from ledger_cli.engine.gojson.tree import INT64_MIN, UINT64_MAX
from ledger_cli.errors import EncodeError

if TYPE_CHECKING:
    import re
    from typing import Any


# A pattern string: `re` compiles it on first use (and caches it), not every command at import.
_ESCAPE = '[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]'
_ESCAPES: dict[str, str] = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
for _code in range(0x20):
    _ESCAPES.setdefault(chr(_code), f"\\u{_code:04x}")
del _code


def _escape_match(m: re.Match[str]) -> str:
    # Anything the table lacks is a lone surrogate: Go writes invalid UTF-8 as \ufffd.
    return _ESCAPES.get(m.group(), "\\ufffd")


def encode_string(s: str) -> str:
    """A JSON string literal as Go's encoder writes it (HTML-safe)."""
    if (
        s.isascii()
        and s.isprintable()  # no control character
        and '"' not in s
        and "\\" not in s
        and "<" not in s
        and ">" not in s
        and "&" not in s
    ):  # nothing to escape, told without `_ESCAPE` (as fast; the pattern is compiled on first use)
        return '"' + s + '"'
    if re.search(_ESCAPE, s) is None:
        return '"' + s + '"'
    return '"' + re.sub(_ESCAPE, _escape_match, s) + '"'


def _shortest_digits(a: float) -> tuple[str, int]:
    """Shortest round-trip digits of a positive finite float and the decimal point.

    The value is 0.DIGITS x 10**point.
    """
    mant, _, exp = repr(a).partition("e")
    intpart, _, frac = mant.partition(".")
    digits = intpart + frac
    point = len(intpart) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return stripped.rstrip("0"), point


def format_float(f: float) -> str:
    """A float64 as Go's encoding/json writes it (strconv 'f' or 'e', shortest)."""
    if math.isnan(f) or math.isinf(f):
        raise EncodeError(f"json: unsupported value: {_go_float_name(f)}")
    if f == 0.0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign = "-" if f < 0 else ""
    a = -f if f < 0 else f
    if 1e-4 <= a < 1e16:
        # Python's repr is already the shortest round-trip digits, in plain form here.
        text = repr(f)
        return text[:-2] if text.endswith(".0") else text
    digits, point = _shortest_digits(a)
    if a < 1e-6 or a >= 1e21:
        exp = point - 1
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp)}"
    n = len(digits)
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= n:
        return sign + digits + "0" * (point - n)
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _go_float_name(f: float) -> str:
    if math.isnan(f):
        return "NaN"
    return "+Inf" if f > 0 else "-Inf"


def _encode_int(v: int) -> str:
    """Every digit within 64 bits (departure 3); beyond, the float64 Go would hold."""
    if INT64_MIN <= v <= UINT64_MAX:
        return str(v)
    try:
        f = float(v)
    except OverflowError:
        raise EncodeError("json: unsupported value: an integer beyond the float64 range") from None
    return format_float(f)


def _scalar(v: object) -> str | None:
    """The JSON text of a scalar; None for a list, tuple or dict; else EncodeError."""
    t = type(v)
    if t is str:
        return encode_string(v)  # type: ignore[arg-type]
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return _encode_int(v)  # type: ignore[arg-type]
    if t is float:
        return format_float(v)  # type: ignore[arg-type]
    if t is dict or t is list or t is tuple:
        return None
    if isinstance(v, str):
        return encode_string(str(v))
    if isinstance(v, int):
        return _encode_int(int(v))
    if isinstance(v, float):
        return format_float(float(v))
    if isinstance(v, (dict, list, tuple)):
        return None
    raise EncodeError(f"json: unsupported type: {t.__module__}.{t.__qualname__}")


class _Text:
    """Already-encoded output text on the encoder's work stack."""

    __slots__ = ("ident", "text")

    def __init__(self, text: str, ident: int = 0) -> None:
        self.text = text
        self.ident = ident  # a container id to release once written (closing brackets)


def encode_value(v: object) -> str:
    """Compact Go `json.Marshal` of a generic value.

    None, bool, int (exact within 64 bits, else as its float64), float, str,
    list/tuple, dict with str
    keys (sorted). Anything else, NaN/infinity, or a cycle: EncodeError.
    """
    s = _scalar(v)
    if s is not None:
        return s
    if type(v) is dict:
        flat = _flat_object(v)
        if flat is not None:
            return flat
    out: list[str] = []
    active: set[int] = set()
    stack: list[object] = [v]
    pop = stack.pop
    push = stack.append
    while stack:
        x = pop()
        if type(x) is _Text:
            out.append(x.text)
            if x.ident:
                active.discard(x.ident)
            continue
        ident = id(x)
        if ident in active:
            raise EncodeError(
                f"json: unsupported value: encountered a cycle via {type(x).__name__}"
            )
        active.add(ident)
        if isinstance(x, dict):
            for k in x:
                if not isinstance(k, str):
                    raise EncodeError(f"json: unsupported type: dict with {type(k).__name__} keys")
            items = sorted(x.items(), key=itemgetter(0))
            out.append("{")
            push(_Text("}", ident))
            for idx in range(len(items) - 1, -1, -1):
                key, child = items[idx]
                prefix = ("," if idx else "") + encode_string(str(key)) + ":"
                text = _scalar(child)
                if text is not None:
                    push(_Text(prefix + text))
                else:
                    push(child)
                    push(_Text(prefix))
        else:
            seq: list[Any] | tuple[Any, ...] = x  # type: ignore[assignment]
            out.append("[")
            push(_Text("]", ident))
            for idx in range(len(seq) - 1, -1, -1):
                child = seq[idx]
                text = _scalar(child)
                if text is not None:
                    push(_Text("," + text if idx else text))
                else:
                    push(child)
                    if idx:
                        push(_COMMA)
    return "".join(out)


_COMMA = _Text(",")


def _flat_object(v: dict[Any, Any]) -> str | None:
    """The common task payload, an object of scalars, without the general walk."""
    parts: list[str] = []
    for key in v:
        if type(key) is not str:
            return None
    for key in sorted(v):
        text = _scalar(v[key])
        if text is None:
            return None
        parts.append(encode_string(key) + ":" + text)
    return "{" + ",".join(parts) + "}"
