"""gojson: Go encoding/json emulation for generic values (docs/design.md §2.11 departure 3)."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from ledger_cli.engine import gojson
from ledger_cli.engine.gojson import (
    EscapedStr,
    Number,
    RawObject,
    decode,
    encode_string,
    encode_value,
    format_float,
    loads,
    parse,
    scan,
    to_task_value,
)
from ledger_cli.errors import DecodeError, EncodeError

# -- floats --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (3.0, "3"),
        (-3.0, "-3"),
        (1.5, "1.5"),
        (2.5, "2.5"),
        (0.1, "0.1"),
        (0.3, "0.3"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e-6, "0.000001"),
        (1.5e-6, "0.0000015"),
        (9.99e-7, "9.99e-7"),
        (1e-7, "1e-7"),
        (1e-10, "1e-10"),
        (1.25e-100, "1.25e-100"),
        (5e-324, "5e-324"),
        (123456789.0, "123456789"),
        (123456789.5, "123456789.5"),
        (1e15, "1000000000000000"),
        (1e16, "10000000000000000"),
        (1e20, "100000000000000000000"),
        (999999999999999900000.0, "999999999999999900000"),
        (1e21, "1e+21"),
        (-1e21, "-1e+21"),
        (1.5e300, "1.5e+300"),
        (1e23, "1e+23"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (9007199254740993.0, "9007199254740992"),
        (123.456, "123.456"),
        (-0.000123, "-0.000123"),
    ],
)
def test_format_float(value: float, text: str) -> None:
    assert format_float(value) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_format_float_rejects_non_finite(value: float) -> None:
    with pytest.raises(EncodeError):
        format_float(value)
    with pytest.raises(EncodeError):
        encode_value([1, {"x": value}])


def test_format_float_round_trips_and_follows_the_form_rules() -> None:
    rng = random.Random(53)
    for _ in range(5000):
        (f,) = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))
        if not math.isfinite(f):
            continue
        text = format_float(f)
        assert float(text) == f
        assert math.copysign(1.0, float(text)) == math.copysign(1.0, f)
        a = abs(f)
        exponent_form = a != 0 and (a < 1e-6 or a >= 1e21)
        assert ("e" in text) == exponent_form, text
        if exponent_form:
            mant, exp = text.split("e")
            assert exp[0] in "+-" and not exp[1:].startswith("0")
            assert not mant.endswith("0") or "." not in mant
        else:
            assert not (("." in text) and text.endswith("0"))
            assert not text.endswith(".")


def test_go_example_array() -> None:
    assert encode_value([1, 1e21, 1e-7, 123456789]) == "[1,1e+21,1e-7,123456789]"
    assert encode_value([1.0, 1e21, 1e-7, 123456789.0]) == "[1,1e+21,1e-7,123456789]"


def test_ints_within_64_bits_encode_with_every_digit() -> None:
    assert encode_value(2**53) == "9007199254740992"
    assert encode_value(2**53 + 1) == "9007199254740993"
    assert encode_value(1234567890123456789) == "1234567890123456789"
    assert encode_value(2**64 - 1) == "18446744073709551615"
    assert encode_value(-(2**63)) == "-9223372036854775808"
    assert encode_value(10**19) == "10000000000000000000"
    assert encode_value(0) == "0"
    assert encode_value(-7) == "-7"
    assert encode_value({"id": 1234567890123456789}) == '{"id":1234567890123456789}'
    assert encode_value([[2**64 - 1]]) == "[[18446744073709551615]]"


def test_ints_beyond_64_bits_encode_as_their_float64() -> None:
    assert encode_value(2**64) == "18446744073709552000"
    assert encode_value(-(2**63) - 1) == "-9223372036854776000"
    assert encode_value(100000000000000000000000) == "1e+23"
    assert encode_value(10**21) == "1e+21"
    assert encode_value(123456789012345678901234567890) == "1.2345678901234568e+29"
    with pytest.raises(EncodeError):
        encode_value(10**400)


def test_bool_is_not_an_int() -> None:
    assert encode_value(True) == "true"
    assert encode_value(False) == "false"
    assert encode_value([True, 1, None]) == "[true,1,null]"


# -- strings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("", '""'),
        ("plain", '"plain"'),
        ('q"b\\', '"q\\"b\\\\"'),
        ("\n\r\t", '"\\n\\r\\t"'),
        ("\b\f", '"\\b\\f"'),
        ("\x00\x01\x1f", '"\\u0000\\u0001\\u001f"'),
        ("\x0b", '"\\u000b"'),
        ("\x7f", '"\x7f"'),
        ("a<b>&c", '"a\\u003cb\\u003e\\u0026c"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("é ü 中 😀", '"é ü 中 😀"'),
        ("\u0080\u009f", '"\u0080\u009f"'),
        ("/", '"/"'),
        ("x\ud800y", '"x\\ufffdy"'),
        ("\udfff", '"\\ufffd"'),
        ("\ud83d\ude00", '"\\ufffd\\ufffd"'),
        ("'", '"\'"'),
    ],
)
def test_encode_string(value: str, text: str) -> None:
    assert encode_string(value) == text
    assert encode_value(value) == text


def test_string_subclasses_encode_as_strings() -> None:
    from ledger_cli.engine.status import Status

    assert encode_value(Status.FAILED) == '"failed"'
    assert encode_value({"s": Status.PENDING}) == '{"s":"pending"}'


# -- containers -----------------------------------------------------------------------


def test_objects_have_sorted_keys_and_nest() -> None:
    value = {"b": 1, "a": {"d": [True, None], "c": "x"}, "é": 2, "z": 3, "A": 4, "": 5}
    assert encode_value(value) == ('{"":5,"A":4,"a":{"c":"x","d":[true,null]},"b":1,"z":3,"é":2}')
    assert encode_value({"tag": "x<y", "n": 1.5}) == '{"n":1.5,"tag":"x\\u003cy"}'
    assert encode_value({}) == "{}"
    assert encode_value([]) == "[]"
    assert encode_value(()) == "[]"
    assert encode_value((1, "a", (2,))) == '[1,"a",[2]]'
    assert encode_value([[], {}, [[]]]) == "[[],{},[[]]]"
    assert encode_value(None) == "null"


def test_shared_values_are_not_cycles() -> None:
    shared = [1]
    assert encode_value([shared, shared, {"k": shared}]) == '[[1],[1],{"k":[1]}]'


@pytest.mark.parametrize(
    "value",
    [
        {1: "x"},
        {("a",): 1},
        {1, 2},
        b"bytes",
        object(),
        [1, 2, {3}],
        {"a": {"b": frozenset()}},
        1 + 2j,
    ],
)
def test_unsupported_values(value: Any) -> None:
    with pytest.raises(EncodeError, match=r"^json: unsupported type"):
        encode_value(value)


def test_cycles_are_encode_errors() -> None:
    a: list[Any] = []
    a.append(a)
    with pytest.raises(EncodeError, match="cycle"):
        encode_value(a)
    d: dict[str, Any] = {}
    d["self"] = [d]
    with pytest.raises(EncodeError, match="cycle"):
        encode_value(d)


def test_deep_values_encode_without_recursion_error() -> None:
    deep: Any = "leaf"
    for _ in range(20_000):
        deep = [deep]
    assert encode_value(deep) == "[" * 20_000 + '"leaf"' + "]" * 20_000
    deep_obj: Any = 1
    for _ in range(5_000):
        deep_obj = {"k": deep_obj}
    assert encode_value(deep_obj) == '{"k":' * 5_000 + "1" + "}" * 5_000


# -- decoding: numbers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("0", 0, int),
        ("1", 1, int),
        ("-17", -17, int),
        ("9007199254740992", 2**53, int),
        ("-9007199254740992", -(2**53), int),
        ("9007199254740993", 2**53 + 1, int),
        ("1234567890123456789", 1234567890123456789, int),
        ("18446744073709551615", 2**64 - 1, int),
        ("-9223372036854775808", -(2**63), int),
        ("18446744073709551616", 2.0**64, float),
        ("-9223372036854775809", -(2.0**63), float),
        ("123456789012345678901234567890", 1.2345678901234568e29, float),
        ("100000000000000000000000", 1e23, float),
        ("1e3", 1000.0, float),
        ("2.50", 2.5, float),
        ("1.0", 1.0, float),
        ("0.0000001", 1e-7, float),
        ("1E+2", 100.0, float),
        ("1e-400", 0.0, float),
        ("12345678901234567890123", 1.2345678901234568e22, float),
    ],
)
def test_number_decoding(text: str, value: float, kind: type) -> None:
    got = loads(text)
    assert type(got) is kind
    assert got == value


def test_negative_zero_stays_negative() -> None:
    for text in ("-0", "-0.0", "-0e5"):
        got = loads(text)
        assert type(got) is float
        assert got == 0.0 and math.copysign(1.0, got) == -1.0
        assert encode_value(got) == "-0"
    assert loads("0") == 0 and type(loads("0")) is int


@pytest.mark.parametrize("text", ["1e400", "-1e400", "[1, 1e309]", '{"a": [' + "9" * 400 + "]}"])
def test_numbers_out_of_float64_range(text: str) -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: "):
        loads(text)


def test_huge_integer_literal_does_not_hit_pythons_int_limit() -> None:
    assert loads("1" + "0" * 5000 + "e-4990") == pytest.approx(1e10)
    assert loads("1" + "0" * 300) == 1e300


def test_decoded_task_numbers_reencode_like_go() -> None:
    task = loads("[1e3,2.50,-0,100000000000000000000000,0.0000001]")
    assert encode_value(task) == "[1000,2.5,-0,1e+23,1e-7]"


@pytest.mark.parametrize(
    "text",
    [
        "1234567890123456789",
        "18446744073709551615",
        "-9223372036854775808",
        "9007199254740993",
        '{"hash":[18446744073709551615,-9223372036854775808],"tweet_id":1234567890123456789}',
    ],
)
def test_64_bit_integers_round_trip_byte_for_byte(text: str) -> None:
    assert encode_value(loads(text)) == text
    assert encode_value(loads(text.encode("utf-8"))) == text


def test_64_bit_integers_survive_the_slow_parser() -> None:
    # An escape of "+" sends the input through the pure-Python parser.
    text = '{"k":"a\\u002bb","id":1234567890123456789,"x":[18446744073709551616,-0]}'
    assert loads(text) == {"k": "a+b", "id": 1234567890123456789, "x": [2.0**64, -0.0]}
    assert encode_value(loads(text)) == (
        '{"id":1234567890123456789,"k":"a+b","x":[18446744073709552000,-0]}'
    )


# -- decoding: structure ------------------------------------------------------------------


def test_parse_keeps_literals_order_and_duplicates() -> None:
    raw = parse('{"b": 1.50, "a": [true, null, "x"], "b": -0}')
    assert raw == RawObject([("b", Number("1.50")), ("a", [True, None, "x"]), ("b", Number("-0"))])


def test_duplicate_keys_last_wins_in_values() -> None:
    assert loads('{"a": 1, "b": 2, "a": {"x": [1]}}') == {"a": {"x": [1]}, "b": 2}
    assert loads('{"a": {"x": 1}, "a": null}') == {"a": None}


def test_generic_values() -> None:
    assert loads(' {"k": [1, "two", true, false, null, {"n": 2.5}]} ') == {
        "k": [1, "two", True, False, None, {"n": 2.5}]
    }
    assert loads("null") is None
    assert loads('"s"') == "s"
    assert loads(b'"bytes in"') == "bytes in"
    assert loads(bytearray(b"[1]")) == [1]
    assert loads(memoryview(b"[2]")) == [2]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t ",
        "{",
        '{"a":',
        '{"a"',
        '{"a" 1}',
        "[1,]",
        '{"a":1,}',
        "[1 2]",
        "01",
        "-",
        "1.",
        ".5",
        "+1",
        "0x10",
        "1e",
        "tru",
        "nul",
        "True",
        "NaN",
        "Infinity",
        "-Infinity",
        "[NaN]",
        "{} x",
        "{}{}",
        "'a'",
        '"unterminated',
        '"tab\there"',
        '"nl\nhere"',
        '"\\x"',
        '"\\u12"',
        '"\\u12g4"',
        "\ufeff{}",
        "[1]\x00",
        "{1: 2}",
        "[\u00a01]",
        "[\u0661]",
        "/* c */ 1",
    ],
)
def test_malformed_input_is_a_decode_error(text: str) -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: "):
        loads(text)
    with pytest.raises(DecodeError, match=r"^ledger: decode: "):
        scan.SlowParser(text).parse()


def test_bom_in_bytes_is_a_syntax_error() -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: invalid character 'ï'"):
        loads(b"\xef\xbb\xbf{}")


def test_go_wording_for_common_syntax_errors() -> None:
    def message(text: str) -> str:
        with pytest.raises(DecodeError) as info:
            loads(text)
        return str(info.value)

    assert message("") == "ledger: decode: unexpected end of JSON input"
    assert message('{"Tasks":[') == "ledger: decode: unexpected end of JSON input"
    assert message("hello") == (
        "ledger: decode: invalid character 'h' looking for beginning of value"
    )
    assert message('{"Tasks":[]} x') == (
        "ledger: decode: invalid character 'x' after top-level value"
    )
    assert message("[1 2]") == "ledger: decode: invalid character '2' after array element"
    assert message('{"a":1 "b":2}') == (
        "ledger: decode: invalid character '\"' after object key:value pair"
    )


def test_invalid_utf8_becomes_one_replacement_per_bad_byte() -> None:
    assert loads(b'"a\xffb"') == "a\ufffdb"
    assert loads(b'"\xe2\x82x"') == "\ufffd\ufffdx"  # truncated sequence: per byte, like Go
    assert loads(b'"\xed\xa0\x80"') == "\ufffd\ufffd\ufffd"  # an encoded surrogate
    assert loads(b'"\xc0\xaf"') == "\ufffd\ufffd"  # overlong
    assert loads(b'{"k\xff": 1}') == {"k\ufffd": 1}
    assert loads('"é"'.encode()) == "é"
    with pytest.raises(DecodeError):
        loads(b"[1, \xff]")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('"\\ud800"', "\ufffd"),
        ('"\\udc00x"', "\ufffdx"),
        ('"\\ud83d\\ude00"', "😀"),
        ('"\\uD83D\\uDE00"', "😀"),
        ('"\\ud800\\ud800\\udc00"', "\ufffd\U00010000"),
        ('"\\ud800\\u0041"', "\ufffdA"),
        ('"\\ud800\\n"', "\ufffd\n"),
        ('{"\\ud800": "\\udfff"}', {"\ufffd": "\ufffd"}),
        ('["\\u00e9", "\\u2028", "\\/"]', ["é", "\u2028", "/"]),
    ],
)
def test_surrogate_escapes_like_go(text: str, value: Any) -> None:
    assert loads(text) == value


def test_escaped_strings_are_marked_only_when_it_matters() -> None:
    raw = parse('["\\u0032026", "plain", "\\u00e9"]')
    assert isinstance(raw, list)
    assert type(raw[0]) is EscapedStr and raw[0] == "2026"
    assert type(raw[1]) is str
    assert type(raw[2]) is EscapedStr
    # The generic value never carries the marker.
    value = to_task_value(raw)
    assert [type(v) for v in value] == [str, str, str]
    # Without such an escape the fast path is taken and nothing is marked.
    assert type(parse('["\\u00e9"]')[0]) is str


def test_depth_limit_is_gos() -> None:
    ok = "[" * gojson.MAX_DEPTH + "]" * gojson.MAX_DEPTH
    value = loads(ok)
    depth = 0
    while value:
        value = value[0]
        depth += 1
    assert depth == gojson.MAX_DEPTH - 1
    with pytest.raises(DecodeError, match="exceeded max depth"):
        loads("[" * (gojson.MAX_DEPTH + 1) + "]" * (gojson.MAX_DEPTH + 1))
    mixed = '{"a":[' * 3000 + "1" + "]}" * 3000
    assert encode_value(loads(mixed)) == mixed.replace(" ", "")


_SAMPLES = [
    "null",
    "true",
    "false",
    "0",
    "-0",
    "1.5e-3",
    '"s"',
    '"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u00e9"',
    "[]",
    "{}",
    ' [ 1 , [ ] , { } , { "a" : [ null ] } ] ',
    '{"a":1,"a":2,"b":{"c":[true,false,null,"x"]}}',
    '{"Tasks":[{"Key":"k1","Status":"pending","Task":{"n":1},"Needs":["a","b"]}]}',
    '"\\ud83d\\ude00 é 中"',
]


@pytest.mark.parametrize("text", _SAMPLES)
def test_slow_parser_agrees_with_fast_path(text: str) -> None:
    fast = decode._DECODE(text)
    slow = scan.SlowParser(text).parse()
    assert slow == fast
    assert to_task_value(slow) == to_task_value(fast)
    assert encode_value(to_task_value(slow)) == encode_value(to_task_value(fast))


def test_to_task_value_rejects_foreign_nodes() -> None:
    with pytest.raises(TypeError):
        to_task_value(1.5)
    with pytest.raises(TypeError):
        to_task_value([{"not": "raw"}])
