"""The raw tree `gojson.parse` hands over, and the limits both directions share.

A raw tree keeps what Go's decoder needs and Python's would lose: numbers stay
literal text (`Number`), objects stay ordered lists of pairs with duplicates
(`RawObject`), and strings that contained escape sequences can be told apart
(`EscapedStr`). The decoder (`decode`), the scanner (`scan`) and the wire
codec (`engine/wire`) build or read these nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 10_000
"""Go's encoding/json scanner refuses nesting deeper than this."""

INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1
"""Departure 3: integers in [INT64_MIN, UINT64_MAX] are kept exactly, both ways."""


class Number:
    """A JSON number kept as its literal text (Go decides later what it becomes)."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal

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
