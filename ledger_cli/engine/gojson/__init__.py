"""Go `encoding/json` emulation for generic values (SPEC §2, departure 3).

Encoding: `encode_string`, `format_float`, `encode_value` write exactly what
Go's `json.Marshal` writes for a generic value (`nil`, bool, float64, string,
`[]any`, `map[string]any`): HTML-safe string escaping, float64 formatting,
sorted object keys, compact. Departure 3: an integer within 64 bits
(`INT64_MIN`..`UINT64_MAX`) is written with every digit, where Go, holding a
float64, would round it; a larger one is written as its float64.

Decoding: `parse` reads JSON text into a *raw tree* that keeps what Go's
decoder needs and Python's would lose: numbers stay literal text (`Number`),
objects stay ordered lists of pairs with duplicates (`RawObject`), and strings
that contained escape sequences can be told apart (`EscapedStr`, only where
that matters, see `parse`). `to_task_value` turns a raw tree into the port's
generic value (Go's `any`, with departure 3 for numbers: an integer literal
within 64 bits is an exact `int`, every other number a float64). `loads`
does both.

Depth: Go's scanner accepts nesting up to 10000 levels; so does `parse`, and
every walk here is iterative, so no RecursionError escapes.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from operator import itemgetter

from ledger_cli.errors import DecodeError, EncodeError

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MAX_DEPTH",
    "EscapedStr",
    "Number",
    "NumberRangeError",
    "RawObject",
    "encode_string",
    "encode_value",
    "format_float",
    "loads",
    "parse",
    "to_task_value",
]

MAX_DEPTH = 10_000
"""Go's encoding/json scanner refuses nesting deeper than this."""

INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1
"""Departure 3: integers in [INT64_MIN, UINT64_MAX] are kept exactly, both ways."""

# ---------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------

_ESCAPE_RE = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')
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
    if _ESCAPE_RE.search(s) is None:
        return '"' + s + '"'
    return '"' + _ESCAPE_RE.sub(_escape_match, s) + '"'


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


# ---------------------------------------------------------------------------
# Decoding: JSON text -> raw tree
# ---------------------------------------------------------------------------


class Number:
    """A JSON number kept as its literal text (Go decides later what it becomes)."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def is_integer_literal(self) -> bool:
        """No fraction and no exponent."""
        lit = self.literal
        return "." not in lit and "e" not in lit and "E" not in lit

    def __repr__(self) -> str:
        return f"Number({self.literal!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Number):
            return self.literal == other.literal
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.literal)


class RawObject:
    """A JSON object as its (key, value) pairs, in input order, duplicates kept."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs

    def __repr__(self) -> str:
        return f"RawObject({self.pairs!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawObject):
            return self.pairs == other.pairs
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class EscapedStr(str):
    """A decoded string whose JSON text had escape sequences.

    Only produced when it can matter: Go hands time fields their *raw* JSON
    text, so an escaped time string never parses. `parse` marks strings only
    when the input has an escape of a character that may appear in a time.
    """

    __slots__ = ()


def _go_replace(exc: UnicodeError) -> tuple[str, int]:
    # Go decodes invalid UTF-8 one byte at a time: each bad byte is one U+FFFD.
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd", exc.start + 1


_ERRORS = "ledger-go-replace"
codecs.register_error(_ERRORS, _go_replace)


def _to_text(data: bytes | bytearray | memoryview | str) -> str:
    if isinstance(data, str):
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data).decode("utf-8", _ERRORS)
    raise TypeError(f"expected bytes or str, not {type(data).__name__}")


class _ConstantError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _reject_constant(name: str) -> Any:
    raise _ConstantError(name)


_DECODER = json.JSONDecoder(
    object_pairs_hook=RawObject,
    parse_int=Number,
    parse_float=Number,
    parse_constant=_reject_constant,
)

# Inputs the C scanner cannot decode the Go way: an escape of a character
# that can appear in an RFC 3339 time (Go gives time fields the raw text), a
# surrogate escape (Go turns a lone one into U+FFFD), or a raw surrogate.
_NEEDS_SLOW = re.compile(r"\\u(?:00(?:2[b-eB-E]|3[0-9aA]|5[4aA])|[dD][89a-fA-F])|[\ud800-\udfff]")


def parse(data: bytes | bytearray | memoryview | str) -> Any:
    """JSON text -> raw tree (Number, RawObject, list, str, bool, None).

    Bytes are UTF-8; invalid bytes become U+FFFD (as Go does inside strings;
    outside strings they are a syntax error anyway). A BOM, empty input,
    trailing garbage, NaN/Infinity, nesting deeper than MAX_DEPTH: DecodeError
    (`ledger: decode: ...`).
    """
    text = _to_text(data)
    if _NEEDS_SLOW.search(text) is None:
        try:
            return _DECODER.decode(text)
        except RecursionError:
            pass  # deeper than Python's C scanner goes; Go allows up to MAX_DEPTH
        except json.JSONDecodeError as exc:
            raise DecodeError(
                "ledger: decode: " + _go_syntax_message(exc.msg, exc.doc, exc.pos)
            ) from None
        except _ConstantError as exc:
            if exc.name == "-Infinity":
                message = "invalid character 'I' in numeric literal"
            else:
                message = f"invalid character '{exc.name[0]}' looking for beginning of value"
            raise DecodeError("ledger: decode: " + message) from None
    return _SlowParser(text).parse()


def _quote_char(c: str) -> str:
    """Go's quoteChar of the byte the scanner stopped at."""
    from ledger_cli.engine.record import go_quote

    if c == "'":
        return "'\\''"
    if c == '"':
        return "'\"'"
    if ord(c) >= 0x80:
        c = chr(c.encode("utf-8", "surrogatepass")[0])
    return "'" + go_quote(c)[1:-1] + "'"


def _enclosing(doc: str, pos: int) -> str:
    """The innermost open bracket before pos ('{', '[' or '')."""
    stack: list[str] = []
    in_string = False
    i = 0
    while i < pos:
        c = doc[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            stack.append(c)
        elif c in "]}" and stack:
            stack.pop()
        i += 1
    return stack[-1] if stack else ""


def _go_syntax_message(msg: str, doc: str, pos: int) -> str:
    """Go's wording for the common syntax errors (only the prefix is promised)."""
    if pos >= len(doc) or msg.startswith("Unterminated string"):
        return "unexpected end of JSON input"
    q = _quote_char(doc[pos])
    if msg.startswith("Extra data"):
        return f"invalid character {q} after top-level value"
    if msg.startswith(("Expecting value", "Unexpected UTF-8 BOM")):
        return f"invalid character {q} looking for beginning of value"
    if msg.startswith("Expecting property name"):
        return f"invalid character {q} looking for beginning of object key string"
    if msg.startswith("Expecting ':'"):
        return f"invalid character {q} after object key"
    if msg.startswith("Expecting ','"):
        if _enclosing(doc, pos) == "{":
            return f"invalid character {q} after object key:value pair"
        return f"invalid character {q} after array element"
    if msg.startswith("Invalid control character"):
        return f"invalid character {q} in string literal"
    if msg.startswith("Invalid \\u"):
        return f"invalid character {q} in \\u hexadecimal character escape"
    if msg.startswith("Invalid \\escape"):
        # Python points at the backslash, Go at the character after it.
        q = _quote_char(doc[pos + 1]) if pos + 1 < len(doc) else q
        return f"invalid character {q} in string escape code"
    return msg


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_CHUNK = re.compile('[^"\\\\\x00-\x1f\ud800-\udfff]*')
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


class _SlowParser:
    """An iterative JSON parser with Go's string semantics and depth limit.

    Used only when the C scanner cannot do the job (see `_NEEDS_SLOW`, and
    nesting deeper than Python's recursion limit).
    """

    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)

    def fail(self, pos: int, context: str) -> DecodeError:
        if pos >= self.n:
            return DecodeError("ledger: decode: unexpected end of JSON input")
        return DecodeError(
            f"ledger: decode: invalid character {_quote_char(self.s[pos])} {context}"
        )

    def ws(self, pos: int) -> int:
        m = _WS.match(self.s, pos)
        assert m is not None
        return m.end()

    def string(self, pos: int) -> tuple[str, int]:
        """Parse a string whose opening quote is at pos-1; return (value, end)."""
        s = self.s
        chunks: list[str] = []
        escaped = False
        while True:
            m = _CHUNK.match(s, pos)
            assert m is not None
            chunks.append(m.group())
            pos = m.end()
            if pos >= self.n:
                raise self.fail(pos, "in string literal")
            c = s[pos]
            if c == '"':
                value = "".join(chunks)
                return (EscapedStr(value) if escaped else value), pos + 1
            if c == "\\":
                escaped = True
                e = s[pos + 1 : pos + 2]
                if e in _SIMPLE_ESCAPES:
                    chunks.append(_SIMPLE_ESCAPES[e])
                    pos += 2
                    continue
                if e != "u":
                    raise self.fail(pos + 1, "in string escape code")
                if _HEX4.match(s, pos + 2) is None:
                    bad = pos + 2
                    while bad < self.n and s[bad] in "0123456789abcdefABCDEF":
                        bad += 1
                    raise self.fail(bad, "in \\u hexadecimal character escape")
                code = int(s[pos + 2 : pos + 6], 16)
                pos += 6
                if 0xD800 <= code <= 0xDFFF:
                    if (
                        code <= 0xDBFF
                        and s.startswith("\\u", pos)
                        and _HEX4.match(s, pos + 2) is not None
                    ):
                        low = int(s[pos + 2 : pos + 6], 16)
                        if 0xDC00 <= low <= 0xDFFF:
                            chunks.append(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
                            pos += 6
                            continue
                    chunks.append("\ufffd")
                else:
                    chunks.append(chr(code))
                continue
            if "\ud800" <= c <= "\udfff":
                chunks.append("\ufffd")  # a raw lone surrogate (str input only)
                pos += 1
                continue
            raise self.fail(pos, "in string literal")

    def parse(self) -> Any:
        s = self.s
        n = self.n
        # Each open container: [is_object, container list, pending key].
        stack: list[tuple[bool, list[Any], list[str]]] = []
        pos = self.ws(0)
        while True:
            # A value starts at pos.
            if pos >= n:
                raise self.fail(pos, "")
            c = s[pos]
            value: Any
            if c == "{" or c == "[":
                if len(stack) >= MAX_DEPTH:
                    raise DecodeError(f"ledger: decode: invalid character '{c}' exceeded max depth")
                is_obj = c == "{"
                pos = self.ws(pos + 1)
                close = "}" if is_obj else "]"
                if pos < n and s[pos] == close:
                    pos += 1
                    value = RawObject([]) if is_obj else []
                else:
                    key_box: list[str] = []
                    stack.append((is_obj, [], key_box))
                    if is_obj:
                        pos = self.key(pos, key_box)
                    continue
            elif c == '"':
                value, pos = self.string(pos + 1)
            elif c == "t" and s.startswith("true", pos):
                value, pos = True, pos + 4
            elif c == "f" and s.startswith("false", pos):
                value, pos = False, pos + 5
            elif c == "n" and s.startswith("null", pos):
                value, pos = None, pos + 4
            else:
                m = _NUMBER.match(s, pos)
                if m is None:
                    raise self.fail(pos, "looking for beginning of value")
                value, pos = Number(m.group()), m.end()
            # A complete value: hand it to the enclosing containers.
            while True:
                pos = self.ws(pos)
                if not stack:
                    if pos < n:
                        raise self.fail(pos, "after top-level value")
                    return value
                is_obj, items, key_box = stack[-1]
                if is_obj:
                    items.append((key_box[0], value))
                else:
                    items.append(value)
                c = s[pos] if pos < n else ""
                if c == ",":
                    pos = self.ws(pos + 1)
                    if is_obj:
                        pos = self.key(pos, key_box)
                    break
                if c == ("}" if is_obj else "]"):
                    pos += 1
                    stack.pop()
                    value = RawObject(items) if is_obj else items
                    continue
                raise self.fail(
                    pos, "after object key:value pair" if is_obj else "after array element"
                )

    def key(self, pos: int, key_box: list[str]) -> int:
        """Parse `"key" :` at pos; store the key; return the position of the value."""
        if pos >= self.n or self.s[pos] != '"':
            raise self.fail(pos, "looking for beginning of object key string")
        key, pos = self.string(pos + 1)
        pos = self.ws(pos)
        if pos >= self.n or self.s[pos] != ":":
            raise self.fail(pos, "after object key")
        key_box[:] = [str(key)]
        return self.ws(pos + 1)


# ---------------------------------------------------------------------------
# Raw tree -> generic value
# ---------------------------------------------------------------------------


class NumberRangeError(DecodeError):
    """A JSON number out of float64 range (Go: an UnmarshalTypeError)."""

    def __init__(self, literal: str) -> None:
        super().__init__(
            f"ledger: decode: json: cannot unmarshal number {literal} into Go value of type float64"
        )
        self.literal = literal


def number_value(num: Number) -> int | float:
    """Departure 3: an integer literal within 64 bits (INT64_MIN..UINT64_MAX) is an
    exact int; every other number is a float64 (`-0` is -0.0). Out of float64
    range: DecodeError.
    """
    lit = num.literal
    # At most 20 digits: never convert thousands of them (Python refuses past 4300).
    if len(lit) <= 21 and "." not in lit and "e" not in lit and "E" not in lit:
        i = int(lit)
        if INT64_MIN <= i <= UINT64_MAX:
            if i == 0 and lit[0] == "-":
                return -0.0
            return i
    f = float(lit)
    if math.isinf(f):
        raise NumberRangeError(lit)
    return f


def to_task_value(raw: Any) -> Any:
    """A raw tree as the port's generic value (Go's `any`).

    Objects -> dict (the last duplicate wins), arrays -> list, numbers per
    departure 3, strings -> str, true/false -> bool, null -> None.
    """
    t = type(raw)
    if t is str or raw is None or t is bool:
        return raw
    if t is Number:
        return number_value(raw)
    if t is EscapedStr:
        return str(raw)
    if t is not RawObject and t is not list:
        raise TypeError(f"not a raw JSON tree node: {t.__name__}")
    root: list[Any] = [None]
    # (raw container, output container)
    work: list[tuple[Any, Any]] = []

    def convert(node: Any) -> Any:
        nt = type(node)
        if nt is str or node is None or nt is bool:
            return node
        if nt is Number:
            return number_value(node)
        if nt is EscapedStr:
            return str(node)
        if nt is RawObject:
            d: dict[str, Any] = {}
            work.append((node, d))
            return d
        if nt is list:
            out: list[Any] = [None] * len(node)
            work.append((node, out))
            return out
        raise TypeError(f"not a raw JSON tree node: {nt.__name__}")

    root[0] = convert(raw)
    while work:
        node, out = work.pop()
        if type(node) is RawObject:
            for key, child in node.pairs:
                out[str(key)] = convert(child)
        else:
            for i, child in enumerate(node):
                out[i] = convert(child)
    return root[0]


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Go's `json.Unmarshal` into `any` (with departure 3 for numbers)."""
    return to_task_value(parse(data))
