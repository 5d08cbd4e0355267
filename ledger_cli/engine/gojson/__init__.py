"""Go `encoding/json` emulation for generic values (docs/design.md §2.11, departure 3).

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

The package, by concern: `encode` (json.Marshal), `decode` (`parse` over
the C scanner, `to_task_value`, `loads`), `scan` (Go's scanner for the input
the C one cannot decode the Go way, and Go's wording of syntax errors;
imported only then) and `tree` (the raw tree's nodes and the shared limits).
Every public name is importable from `ledger_cli.engine.gojson`.
"""

from __future__ import annotations

from ledger_cli.engine.gojson.decode import (
    NEEDS_SLOW,
    NumberRangeError,
    literal_value,
    loads,
    number_value,
    parse,
    to_task_value,
)
from ledger_cli.engine.gojson.encode import encode_string, encode_value, format_float
from ledger_cli.engine.gojson.tree import (
    INT64_MIN,
    MAX_DEPTH,
    UINT64_MAX,
    EscapedStr,
    Number,
    RawObject,
)

__all__ = [
    "INT64_MIN",
    "MAX_DEPTH",
    "NEEDS_SLOW",
    "UINT64_MAX",
    "EscapedStr",
    "Number",
    "NumberRangeError",
    "RawObject",
    "encode_string",
    "encode_value",
    "format_float",
    "literal_value",
    "loads",
    "number_value",
    "parse",
    "to_task_value",
]
