"""Go's scanner, where Python's C scanner cannot stand in for it.

`SlowParser` is an iterative JSON parser with Go's string semantics (an
escape of a character that can appear in a time is marked, a lone surrogate
becomes U+FFFD) and Go's depth limit; `go_syntax_message` words a C scanner
error as Go's scanner would. `gojson.decode` imports this module only for
such input or such an error, so the common path never builds it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ledger_cli.engine.gojson.tree import MAX_DEPTH, EscapedStr, Number, RawObject
from ledger_cli.errors import DecodeError

if TYPE_CHECKING:
    from typing import Any


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


def go_syntax_message(msg: str, doc: str, pos: int) -> str:
    """Go's wording for the common syntax errors (only the prefix is promised)."""
    if pos >= len(doc) or msg.startswith("Unterminated string"):
        return "unexpected end of JSON input"
    q = _quote_char(doc[pos])
    if msg.startswith("Expecting ','"):
        if _enclosing(doc, pos) == "{":
            return f"invalid character {q} after object key:value pair"
        return f"invalid character {q} after array element"
    if msg.startswith("Invalid \\escape"):
        # Python points at the backslash, Go at the character after it.
        q = _quote_char(doc[pos + 1]) if pos + 1 < len(doc) else q
        return f"invalid character {q} in string escape code"
    for python, go in _GO_WORDS:
        if msg.startswith(python):
            return f"invalid character {q} {go}"
    return msg


_GO_WORDS = (
    ("Extra data", "after top-level value"),
    ("Expecting value", "looking for beginning of value"),
    ("Unexpected UTF-8 BOM", "looking for beginning of value"),
    ("Expecting property name", "looking for beginning of object key string"),
    ("Expecting ':'", "after object key"),
    ("Invalid control character", "in string literal"),
    ("Invalid \\u", "in \\u hexadecimal character escape"),
)
"""The start of the `json` module's message, and what Go says after the character."""


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


class SlowParser:
    """An iterative JSON parser with Go's string semantics and depth limit.

    Used only when the C scanner cannot do the job (see `decode.NEEDS_SLOW`, and
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
