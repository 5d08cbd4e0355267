"""`json.loads` and `json.dumps` as the hot commands use them, straight over
the C accelerator `_json`, without importing the `json` package.

`import json` imports `re` (and with it `enum`, `functools`, `collections`):
about 3 ms of a hot command's 30 (docs/performance.md, bench_startup.py).
`json` itself runs the same C scanner and encoder when it can; this module
builds them the way `json.JSONDecoder` and `json.JSONEncoder` do and gives
the same results, byte for byte (tests/test_cjson.py compares the two on
random values). Whatever the C code would not take as `json` does (a syntax
error, a BOM, UTF-16 bytes, a value it cannot encode) is handed to `json`
itself, imported then, so every error is `json`'s own, word for word.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WS = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """The attributes `_json.make_scanner` reads from a `json.JSONDecoder`."""

    def __init__(
        self,
        object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None,
        parse_int: Callable[[str], Any] | None,
        parse_float: Callable[[str], Any] | None,
        parse_constant: Callable[[str], Any] | None,
    ) -> None:
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = object_pairs_hook
        self.parse_int = parse_int or int
        self.parse_float = parse_float or float
        self.parse_constant = parse_constant or _CONSTANTS.__getitem__
        self.memo: dict[str, str] = {}


def decoder(
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    parse_int: Callable[[str], Any] | None = None,
    parse_float: Callable[[str], Any] | None = None,
    parse_constant: Callable[[str], Any] | None = None,
) -> Callable[[str], Any]:
    """`json.JSONDecoder(...).decode` with these hooks."""
    context = _Context(object_pairs_hook, parse_int, parse_float, parse_constant)
    scan = _json.make_scanner(context)  # type: ignore[arg-type]
    kwargs = {
        "object_pairs_hook": object_pairs_hook,
        "parse_int": parse_int,
        "parse_float": parse_float,
        "parse_constant": parse_constant,
    }

    def slow(text: str) -> Any:
        import json

        return json.JSONDecoder(**kwargs).decode(text)  # type: ignore[arg-type]

    def decode(text: str) -> Any:
        if not isinstance(text, str):
            return slow(text)
        start = 0
        if text[:1] in _WS:
            start = len(text) - len(text.lstrip(_WS))
        try:
            obj, end = scan(text, start)
        except (StopIteration, ValueError):
            return slow(text)  # json's own error, word for word
        if end != len(text) and text[end:].strip(_WS):
            return slow(text)
        return obj

    return decode


_decode = decoder()


def is_decode_error(exc: BaseException) -> bool:
    """Whether `exc` is `json.JSONDecodeError`, the syntax error of a decode
    (`json` is loaded by then: the decode that raised it loaded it)."""
    import json

    return isinstance(exc, json.JSONDecodeError)


def loads(data: str | bytes | bytearray) -> Any:
    """`json.loads(data)`."""
    if not isinstance(data, str):
        head = bytes(data[:4])
        if not data or b"\x00" in head or head.startswith(b"\xef\xbb\xbf"):
            import json

            return json.loads(data)  # UTF-16/32 or a BOM: json tells the encoding
        try:
            data = bytes(data).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            import json

            return json.loads(data)
    elif data[:1] == "\ufeff":
        import json

        return json.loads(data)  # json.loads's own error for a BOM
    return _decode(data)


def _default(o: object) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


_ENCODERS: dict[tuple[bool, str, str], Callable[[object, int], Any]] = {}


def dumps(
    obj: object, *, ensure_ascii: bool = True, separators: tuple[str, str] | None = None
) -> str:
    """`json.dumps(obj, ensure_ascii=..., separators=...)`."""
    if isinstance(obj, str):
        return _json.encode_basestring_ascii(obj) if ensure_ascii else _json.encode_basestring(obj)
    item_sep, key_sep = separators if separators is not None else (", ", ": ")
    shape = (ensure_ascii, item_sep, key_sep)
    encode = _ENCODERS.get(shape)
    if encode is None:
        encode = _ENCODERS[shape] = _json.make_encoder(
            {},
            _default,
            _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring,
            None,
            key_sep,
            item_sep,
            False,
            False,
            True,
        )
    try:
        return "".join(encode(obj, 0))
    except (TypeError, ValueError):
        del _ENCODERS[shape]  # its circular-reference marks may be left over
        import json

        return json.dumps(obj, ensure_ascii=ensure_ascii, separators=separators)
