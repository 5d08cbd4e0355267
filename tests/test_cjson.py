"""engine/cjson.py gives what `json` gives, value for value and error for
error; engine/lazyre.py compiles at first use; the JSON store's file-name
checks agree with the patterns they replace."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_cli.engine import cjson
from ledger_cli.engine.lazyre import Lazy
from ledger_cli.stores.jsonfile.layout import DIGEST, RECORD_FILE, SHARD, SHARD_INDEX

_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | _text
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included (NaN != NaN)."""
    return repr(a) == repr(b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    try:
        return ("value", repr(fn(*args, **kwargs)))
    except Exception as exc:  # the kind and the words
        return (type(exc).__name__, str(exc))


@settings(max_examples=300, deadline=None)
@given(_values, st.booleans(), st.booleans())
def test_dumps_is_json_dumps(value: Any, ascii_only: bool, compact: bool) -> None:
    seps = (",", ":") if compact else None
    ours = _outcome(cjson.dumps, value, ensure_ascii=ascii_only, separators=seps)
    assert ours == _outcome(json.dumps, value, ensure_ascii=ascii_only, separators=seps)


@settings(max_examples=300, deadline=None)
@given(_values, st.sampled_from(["", " ", "\n", " \t\r\n"]))
def test_loads_reads_back_what_json_writes(value: Any, pad: str) -> None:
    text = pad + json.dumps(value) + pad
    assert _outcome(cjson.loads, text) == _outcome(json.loads, text)
    data = text.encode("utf-8", "surrogatepass")
    assert _outcome(cjson.loads, data) == _outcome(json.loads, data)


_broken = st.sampled_from(
    ["", " ", "[1,", "{", '{"a"}', '{"a":1}x', "[1] [2]", "01", "-", '"\\x"', '"\x01"', "nul",
     "NaN", "-Infinity", "[1,]", '{"a":1,}', "\ufeff[1]", "1e999", '"\\ud800"', "[" * 3000]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(_broken | st.text(max_size=8), st.sampled_from(["", "1", "[]", '"s"']))
def test_loads_fails_as_json_fails(text: str, tail: str) -> None:
    for doc in (text, text + tail, tail + text):
        assert _outcome(cjson.loads, doc) == _outcome(json.loads, doc)


@pytest.mark.parametrize(
    "data",
    [b"\xef\xbb\xbf[1]", "[1]".encode("utf-16"), "[1]".encode("utf-32-le"), b"[\xff]", b""],
)
def test_bytes_json_reads_its_own_way_are_handed_to_json(data: bytes) -> None:
    assert _outcome(cjson.loads, data) == _outcome(json.loads, data)


def test_a_decoder_keeps_its_hooks_and_their_errors() -> None:
    class Reject(ValueError):
        pass

    def no_constants(name: str) -> Any:
        raise Reject(name)

    hooks = {"object_pairs_hook": list, "parse_int": str, "parse_float": str}
    ours = cjson.decoder(parse_constant=no_constants, **hooks)
    theirs = json.JSONDecoder(parse_constant=no_constants, **hooks).decode  # type: ignore[arg-type]
    for text in ('{"a": [1, 2.5e3, {"b": -0}]}', "[NaN]", "[1, 2", '{"a": Infinity}'):
        assert _outcome(ours, text) == _outcome(theirs, text)


def test_a_failed_encode_leaves_the_encoder_sound() -> None:
    shared: list[Any] = [1]
    with pytest.raises(TypeError):
        cjson.dumps([shared, object()])
    assert cjson.dumps([shared, shared]) == "[[1], [1]]"
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        cjson.dumps(loop)
    assert cjson.dumps({"a": shared}) == '{"a": [1]}'


def test_lazy_compiles_at_first_use_and_then_is_the_pattern() -> None:
    lazy = Lazy(r"[0-9]+(x)?", re.ASCII)
    assert "search" not in vars(lazy)
    assert lazy.fullmatch("12x") is not None
    assert lazy.search("ab12") is not None and lazy.match("ab") is None
    assert vars(lazy)["search"] == re.compile(r"[0-9]+(x)?", re.ASCII).search
    assert lazy.sub("#", "a1b22") == "a#b#"
    with pytest.raises(AttributeError):
        lazy.nothing  # noqa: B018


_names = st.text(st.sampled_from("0123456789abcdefABCDEF.jsonidx \n٣"), max_size=70)


@settings(max_examples=500, deadline=None)
@given(_names | st.builds(lambda h, s: h + s, st.text("0123456789abcdef", min_size=60, max_size=66),
                          st.sampled_from(["", ".json", ".idx", ".jso", "\n"])))  # fmt: skip
def test_file_name_checks_agree_with_their_patterns(name: str) -> None:
    for check, pattern in (
        (RECORD_FILE, r"[0-9a-f]{64}\.json"),
        (DIGEST, r"[0-9a-f]{64}"),
        (SHARD_INDEX, r"[0-9a-f]{2}\.idx"),
        (SHARD, r"[0-9a-f]{2}"),
    ):
        assert check.matches(name) == (re.fullmatch(pattern, name) is not None)
        assert check.matches(name[:2]) == (re.fullmatch(pattern, name[:2]) is not None)
