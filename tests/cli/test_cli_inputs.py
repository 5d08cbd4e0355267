"""Parsing of command-line input: durations, keys, integers, strict JSON."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_cli.cli.inputs import (
    InputError,
    parse_duration,
    parse_json,
    parse_uint,
    validate_key,
    validate_text,
)
from ledger_cli.errors import UnknownStatusError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("5m", timedelta(minutes=5)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2d", timedelta(days=2)),
        ("45", timedelta(seconds=45)),
        ("1.5", timedelta(seconds=1.5)),
        ("1.5h", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("0s", timedelta(0)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "-5m", "5x", "m", "1h 30m", "1.h", ".5s", "5M", "1e3", "\u0665s", "9" * 30 + "d"]
)
def test_bad_durations(text: str) -> None:
    with pytest.raises(InputError) as err:
        parse_duration(text)
    assert err.value.exit_code == 2 and err.value.code == "bad_duration"


def test_keys() -> None:
    for key in ("a", "backup/db-1", "../../etc/passwd", "with space", "ключ", "🔑", "k" * 1024):
        assert validate_key(key) == key
    assert validate_key("é" * 512) == "é" * 512  # 1024 bytes
    for bad in ("", "k" * 1025, "é" * 513, "a\nb", "a\x00b", "a\x7fb", "a\x85b", "\udcff"):
        with pytest.raises(InputError) as err:
            validate_key(bad)
        assert err.value.exit_code == 2


def test_text_and_uint() -> None:
    assert validate_text("", "owner") == ""
    with pytest.raises(InputError):
        validate_text("a\x1bb", "owner")
    assert parse_uint("0", "--fence") == 0
    assert parse_uint(str(2**64 - 1), "--fence") == 2**64 - 1
    for bad in ("-1", str(2**64), "1_000", "+1", " 1", "", "\u0661"):
        with pytest.raises(InputError):
            parse_uint(bad, "--fence")


def test_unknown_status_is_the_engine_error() -> None:
    from ledger_cli.cli.inputs import parse_status

    assert parse_status("failed") == "failed"
    with pytest.raises(UnknownStatusError) as err:
        parse_status("failed ")
    assert err.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": [1, 2.5, "x", null, true]}', {"a": [1, 2.5, "x", None, True]}),
        ("9007199254740993", 9007199254740993),
        ("1234567890123456789", 1234567890123456789),
        ("18446744073709551615", 2**64 - 1),
        ("-9223372036854775808", -(2**63)),
        ("18446744073709551616", 2.0**64),
        ("123456789012345678901234567890", 1.2345678901234568e29),
        ("-0", -0.0),
        ("100000000000000000000000", 1e23),
        ('"\\ud83d\\udd11"', "🔑"),
        ("[" * 512 + "]" * 512, json.loads("[" * 512 + "]" * 512)),
        ('"[[[[{{{{"', "[[[[{{{{"),
    ],
)
def test_json_accepts(text: str, value: object) -> None:
    got = parse_json(text)
    assert got == value
    if isinstance(value, float) and value == 0:
        assert math.copysign(1, got) == -1
    assert type(got) is type(value)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("[" * 513 + "]" * 513, "nesting deeper than 512 levels"),
        ('{"a": 1, "a": 2}', 'duplicate key "a"'),
        ("[NaN]", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
        ("-Infinity", "-Infinity is not a JSON number"),
        ("1e400", "out of float64 range"),
        ("-" + "9" * 5000, "out of float64 range"),
        (b'"\xff"', "invalid UTF-8 at byte 1"),
        ('"\ud800"', "invalid UTF-8"),
        ('"\\ud800"', "lone UTF-16 surrogate"),
        ('{"\\udc00": 1}', "lone UTF-16 surrogate"),
        ("", "Expecting value"),
        ("[1,]", "Expecting value"),
        ("{} {}", "Extra data"),
        ("\ufeff{}", "byte order mark"),
        ('"a\nb"', "Invalid control character"),
    ],
)
def test_json_rejects(data: str | bytes, reason: str) -> None:
    with pytest.raises(InputError) as err:
        parse_json(data, "ledger: bad --task JSON")
    message = str(err.value)
    assert message.startswith("ledger: bad --task JSON: ") and reason in message
    assert "\n" not in message and err.value.exit_code == 2


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_json_never_raises_anything_else(data: bytes | str) -> None:
    try:
        parse_json(data)
    except InputError as exc:
        assert "\n" not in str(exc)
