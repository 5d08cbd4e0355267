"""Text that is not valid UTF-8, as the SQL stores read and write it.

Go strings are bytes, so a row the Go service wrote can hold a key, owner or
actor that is not valid UTF-8. This module holds how such text is read
(`lossless_text`: each bad byte a lone surrogate), told apart (`is_utf8`),
shown (`shown`, as Go's encoder does; `hex_bytes`, byte-exact for messages)
and bound back as its exact bytes (`raw_binding`). Nothing here imports a
database driver; `codec.py` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# -- text that is not valid UTF-8 ----------------------------------------------
#
# Go strings are bytes: the Go service can write a key, owner or actor that is
# not valid UTF-8. Such text is read with `surrogateescape` (each bad byte
# becomes one lone surrogate U+DC80..U+DCFF), so the str maps back to the
# exact bytes: an operation on that row addresses it byte-exactly and writes
# its other columns back unchanged. Every encoder of this package shows such a
# surrogate as U+FFFD, as Go's encoder shows the bad byte.


def lossless_text(raw: bytes) -> str:
    """A text column's bytes as str: UTF-8, each invalid byte a lone surrogate."""
    return raw.decode("utf-8", "surrogateescape")


def is_utf8(text: str) -> bool:
    """False when `text` holds a lone surrogate (an invalid byte, or bad input)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def spells_bytes(text: str) -> bool:
    """Whether `text` is what `lossless_text` reads of some bytes: valid
    UTF-8, or each lone surrogate one invalid byte (U+DC80..U+DCFF). Any other
    (`a\ud800`, bad input) names no value a text column holds."""
    if text.isascii():
        return True
    try:
        return lossless_text(text.encode("utf-8", "surrogateescape")) == text
    except UnicodeEncodeError:
        return False


def shown(text: str) -> str:
    """`text` as Go's encoder shows it: each lone surrogate becomes U+FFFD."""
    if is_utf8(text):
        return text
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def hex_bytes(text: str) -> str:
    """The exact bytes of a text value read with `lossless_text`, for messages:
    printable ASCII as is, every other byte `\\xNN` (a shell's `$'…'` form)."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte maps to (bad input, not a row)
        raw = text.encode("utf-8", "surrogatepass")
    return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in raw)


def raw_binding(sql: str, params: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """`sql`/`params` with every str that is not valid UTF-8 bound as its exact
    bytes, cast back to TEXT (`CAST(? AS TEXT)`), so the row holds the very
    bytes it was read with. `sql` uses `?` placeholders and no `?` in literals."""
    parts = sql.split("?")
    if len(parts) != len(params) + 1:
        raise ValueError("placeholder count does not match the parameters")
    out_sql = [parts[0]]
    out: list[Any] = []
    for value, rest in zip(params, parts[1:], strict=True):
        if isinstance(value, str) and not is_utf8(value):
            out.append(value.encode("utf-8", "surrogateescape"))
            out_sql.append("CAST(? AS TEXT)" + rest)
        else:
            out.append(value)
            out_sql.append("?" + rest)
    return "".join(out_sql), tuple(out)
