"""Decoding: JSON text to a raw tree (`parse`), and a raw tree to the port's
generic value (`to_task_value`, Go's `any`); `loads` does both.

`parse` runs Python's C scanner, which builds the raw tree (`gojson.tree`)
through its hooks, whenever its result is Go's: for input with an escape Go
treats differently (`NEEDS_SLOW`) or nesting deeper than the C scanner goes,
it hands over to `gojson.scan`, imported then. Numbers follow departure 3:
an integer literal within 64 bits is an exact `int`, every other number a
float64.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from typing import TYPE_CHECKING

from ledger_cli.engine.gojson.tree import INT64_MIN, UINT64_MAX, EscapedStr, Number, RawObject
from ledger_cli.errors import DecodeError

if TYPE_CHECKING:
    from typing import Any


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


_DECODE = json.JSONDecoder(
    object_pairs_hook=RawObject,
    parse_int=Number,
    parse_float=Number,
    parse_constant=_reject_constant,
).decode

# Inputs the C scanner cannot decode the Go way: an escape of a character
# that can appear in an RFC 3339 time (Go gives time fields the raw text), a
# surrogate escape (Go turns a lone one into U+FFFD), or a raw surrogate. A
# pattern string, compiled (and cached) by `re` on first use, not at import.
NEEDS_SLOW = r"\\u(?:00(?:2[b-eB-E]|3[0-9aA]|5[4aA])|[dD][89a-fA-F])|[\ud800-\udfff]"


def parse(data: bytes | bytearray | memoryview | str) -> Any:
    """JSON text -> raw tree (Number, RawObject, list, str, bool, None).

    Bytes are UTF-8; invalid bytes become U+FFFD (as Go does inside strings;
    outside strings they are a syntax error anyway). A BOM, empty input,
    trailing garbage, NaN/Infinity, nesting deeper than MAX_DEPTH: DecodeError
    (`ledger: decode: ...`).
    """
    text = _to_text(data)
    # ASCII with no \u escape needs no pattern (nor its compilation).
    if ("\\u" not in text and text.isascii()) or re.search(NEEDS_SLOW, text) is None:
        try:
            return _DECODE(text)
        except RecursionError:
            pass  # deeper than Python's C scanner goes; Go allows up to MAX_DEPTH
        except _ConstantError as exc:
            if exc.name == "-Infinity":
                message = "invalid character 'I' in numeric literal"
            else:
                message = f"invalid character '{exc.name[0]}' looking for beginning of value"
            raise DecodeError("ledger: decode: " + message) from None
        except ValueError as exc:
            if not isinstance(exc, json.JSONDecodeError):
                raise
            from ledger_cli.engine.gojson.scan import go_syntax_message

            raise DecodeError(
                "ledger: decode: " + go_syntax_message(exc.msg, exc.doc, exc.pos)
            ) from None
    from ledger_cli.engine.gojson.scan import SlowParser

    return SlowParser(text).parse()


class NumberRangeError(DecodeError):
    """A JSON number out of float64 range (Go: an UnmarshalTypeError)."""

    def __init__(self, literal: str) -> None:
        super().__init__(
            f"ledger: decode: json: cannot unmarshal number {literal} into Go value of type float64"
        )
        self.literal = literal


def number_value(num: Number) -> int | float:
    """The value of a raw tree's number (`literal_value`)."""
    return literal_value(num.literal)


def literal_value(lit: str) -> int | float:
    """Departure 3: an integer literal within 64 bits (INT64_MIN..UINT64_MAX) is an
    exact int; every other number is a float64 (`-0` is -0.0). Out of float64
    range: NumberRangeError. (The `json` module's `parse_int` and `parse_float`
    hooks of the fast record decoder and of the CLI's `parse_json` too.)
    """
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
    # (raw container, output container): filled without recursion, so any depth works
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

    root = convert(raw)
    while work:
        node, out = work.pop()
        if type(node) is RawObject:
            for key, child in node.pairs:
                out[str(key)] = convert(child)
        else:
            for i, child in enumerate(node):
                out[i] = convert(child)
    return root


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Go's `json.Unmarshal` into `any` (with departure 3 for numbers)."""
    return to_task_value(parse(data))
