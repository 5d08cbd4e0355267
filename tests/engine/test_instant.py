"""Instant: Go's time.Time as the port needs it (parse, RFC3339Nano, year 0, ns)."""

from __future__ import annotations

import copy
import pickle
import random
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_cli.engine.civil import civil_from_days, days_from_civil
from ledger_cli.engine.instant import Instant

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- parse and format ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:12.5Z",
        "2026-01-01T00:00:59.08Z",
        "2024-01-01T00:30:00.5Z",
        "2024-02-29T23:59:59.123456789Z",
        "2024-02-29T23:59:59.000000001Z",
        "2026-01-01T01:00:00+01:00",
        "2026-01-01T01:00:00.25-05:30",
        "2026-06-30T12:00:00+14:00",
        "0001-01-01T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "0000-02-29T12:00:00Z",
        "9999-12-31T23:59:59.999999999Z",
        "1969-12-31T23:59:59.999999999Z",
        "1970-01-01T00:00:00Z",
    ],
)
def test_round_trip_is_identical(text: str) -> None:
    inst = Instant.parse(text)
    assert str(inst) == text
    assert Instant.parse(str(inst)) == inst
    assert Instant(text) == inst
    assert repr(inst) == f"Instant({text!r})"


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("2026-01-01T00:00:00.500000000Z", "2026-01-01T00:00:00.5Z"),
        ("2026-01-01T00:00:00.000000000Z", "2026-01-01T00:00:00Z"),
        ("2026-01-01T00:00:00.0Z", "2026-01-01T00:00:00Z"),
        ("2026-01-01T00:00:00.120Z", "2026-01-01T00:00:00.12Z"),
        # Digits past the ninth are dropped, never rounded.
        ("2026-01-01T00:00:00.9999999999Z", "2026-01-01T00:00:00.999999999Z"),
        ("2026-01-01T00:00:00.1234567891234Z", "2026-01-01T00:00:00.123456789Z"),
        # An explicit zero offset prints as Z (Go's RFC3339Nano).
        ("2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00Z"),
        ("2026-01-01T00:00:00-00:00", "2026-01-01T00:00:00Z"),
        # Go's time.Parse(RFC3339) also takes these (UnmarshalJSON uses it).
        ("2026-01-01T1:02:03Z", "2026-01-01T01:02:03Z"),
        ("2026-01-01T00:00:00,25Z", "2026-01-01T00:00:00.25Z"),
        ("2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+24:00"),
    ],
)
def test_parse_normalises_like_go(text: str, printed: str) -> None:
    assert str(Instant.parse(text)) == printed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "2026-01-01",
        "2026-01-01T00:00:00",
        "2026-01-01 00:00:00Z",
        "2026-01-01t00:00:00Z",
        "2026-01-01T00:00:00z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00.5",
        "2026-01-01T00:00Z",
        "26-01-01T00:00:00Z",
        "+2026-01-01T00:00:00Z",
        "12026-01-01T00:00:00Z",
        "2026-1-01T00:00:00Z",
        "2026-01-1T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-32T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "0001-02-29T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-01-01T00:00:60Z",
        "2026-01-01T000:00:00Z",
        "2026-01-01T00:00:00+1:00",
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00+25:00",
        "2026-01-01T00:00:00+01:61",
        "2026-01-01T00:00:00Z+01:00",
        "2026-01-01T00:00:00Z ",
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z\n",
        "\uff12\uff10\uff12\uff16-01-01T00:00:00Z",
        "2026-01-01T00:00:00.\u0663Z",
    ],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        Instant.parse(text)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        Instant.parse(12)  # type: ignore[arg-type]


def test_leap_days() -> None:
    assert str(Instant.parse("2000-02-29T00:00:00Z")) == "2000-02-29T00:00:00Z"
    assert str(Instant.parse("0000-02-29T00:00:00Z")) == "0000-02-29T00:00:00Z"
    assert str(Instant.parse("2024-02-28T23:59:59Z").add_ns(10**9)) == "2024-02-29T00:00:00Z"
    assert str(Instant.parse("2023-02-28T23:59:59Z").add_ns(10**9)) == "2023-03-01T00:00:00Z"


def test_nanosecond_ticks() -> None:
    t = Instant.parse("2026-01-01T00:00:00Z")
    assert str(t.add_ns(1)) == "2026-01-01T00:00:00.000000001Z"
    assert str(t.add_ns(-1)) == "2025-12-31T23:59:59.999999999Z"
    assert t.add_ns(1) > t
    assert t.add_ns(1) - t == timedelta(0)  # timedelta has microseconds only
    assert (t.add_ns(1) - t.add_ns(1)) == timedelta(0)


# -- offsets: kept for printing only ---------------------------------------------


def test_offset_is_for_printing_only() -> None:
    a = Instant.parse("2026-01-01T01:00:00+01:00")
    b = Instant.parse("2026-01-01T00:00:00Z")
    c = Instant.parse("2025-12-31T19:00:00-05:00")
    assert a == b == c
    assert hash(a) == hash(b) == hash(c)
    assert len({a, b, c}) == 1
    assert not a < b and not a > b and a <= b and a >= b
    assert a.offset_seconds == 3600
    assert c.offset_seconds == -5 * 3600
    assert str(a.utc()) == "2026-01-01T00:00:00Z"
    assert str(a) == "2026-01-01T01:00:00+01:00"
    assert a.unix_ns == b.unix_ns == 1767225600 * 10**9


def test_arithmetic_keeps_the_offset() -> None:
    a = Instant.parse("2026-01-01T23:30:00+01:00")
    assert str(a + timedelta(hours=1)) == "2026-01-02T00:30:00+01:00"
    assert str(timedelta(minutes=45) + a) == "2026-01-02T00:15:00+01:00"
    assert str(a - timedelta(days=1, microseconds=1)) == "2025-12-31T23:29:59.999999+01:00"
    assert str(a.add_ns(5)) == "2026-01-01T23:30:00.000000005+01:00"


def test_year_is_in_own_offset() -> None:
    a = Instant.parse("2026-01-01T00:30:00+01:00")
    assert a.year == 2026
    assert a.utc().year == 2025


def test_odd_offsets_print_like_go() -> None:
    t = Instant.parse("2026-01-01T00:00:00Z").unix_ns
    # Go: zone := offset / 60 truncates toward zero; seconds are not printed.
    assert str(Instant.from_unix_ns(t, -30)).endswith("+00:00")
    assert str(Instant.from_unix_ns(t, -90)).endswith("-00:01")
    assert str(Instant.from_unix_ns(t, 5 * 3600 + 45 * 60 + 30)).endswith("+05:45")
    assert str(Instant.from_unix_ns(t, 90000)) == "2026-01-02T01:00:00+25:00"


# -- the zero time and year 0 ----------------------------------------------------


def test_zero() -> None:
    z = Instant.ZERO
    assert str(z) == "0001-01-01T00:00:00Z"
    assert z.is_zero()
    assert z == Instant.parse("0001-01-01T00:00:00Z")
    assert Instant.parse("0001-01-01T01:00:00+01:00").is_zero()
    assert not Instant.parse("0001-01-01T00:00:00.000000001Z").is_zero()
    assert z.unix_ns == -62135596800 * 10**9
    assert z.year == 1


def test_year_zero_arithmetic() -> None:
    before = Instant.ZERO - timedelta(hours=1)
    assert str(before) == "0000-12-31T23:00:00Z"
    assert before.year == 0
    assert not before.is_zero()
    assert before < Instant.ZERO
    back = before + timedelta(hours=1)
    assert back.is_zero()
    assert back == Instant.ZERO
    assert Instant.ZERO - before == timedelta(hours=1)
    assert Instant.parse("0000-12-31T23:00:00Z") == before


def test_years_outside_0_9999_print_like_go_format() -> None:
    y10000 = Instant.parse("9999-12-31T23:59:59Z") + timedelta(seconds=1)
    assert str(y10000) == "10000-01-01T00:00:00Z"
    assert y10000.year == 10000
    minus1 = Instant.parse("0000-01-01T00:00:00Z") - timedelta(days=1)
    assert str(minus1) == "-0001-12-31T00:00:00Z"
    assert minus1.year == -1


def test_civil_day_helpers_agree_with_each_other_and_datetime() -> None:
    assert days_from_civil(1970, 1, 1) == 0
    assert civil_from_days(0) == (1970, 1, 1)
    for days in range(-800_000, 3_000_000, 997):
        y, m, d = civil_from_days(days)
        assert days_from_civil(y, m, d) == days
        if 1 <= y <= 9999:
            assert (EPOCH + timedelta(days=days)).date() == datetime(y, m, d).date()


def test_random_instants_agree_with_datetime() -> None:
    rng = random.Random(2026)
    lo = (datetime(1, 1, 2, tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
    hi = (datetime(9999, 12, 30, tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
    for _ in range(2000):
        us = rng.randrange(lo, hi)
        offset_min = rng.choice([0, 60, -300, 330, 840, -720, 45])
        tz = timezone(timedelta(minutes=offset_min))
        d = (EPOCH + timedelta(microseconds=us)).astimezone(tz)
        inst = Instant.from_datetime(d)
        assert inst.unix_ns == us * 1000
        assert inst.to_datetime() == d
        assert inst.to_datetime().utcoffset() == d.utcoffset()
        text = d.isoformat()
        if d.microsecond:
            whole, frac = text[:26], text[26:]
            text = whole.rstrip("0") + frac
        text = text.replace("+00:00", "Z")
        assert str(inst) == text
        assert Instant.parse(text) == inst


# -- datetime interop ---------------------------------------------------------------


def test_datetime_conversions() -> None:
    d = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=timezone(timedelta(hours=-3)))
    inst = Instant.from_datetime(d)
    assert str(inst) == "2026-03-04T05:06:07.891011-03:00"
    assert inst.to_datetime() == d
    assert Instant.coerce(d) == inst
    assert Instant.coerce(inst) is inst
    with pytest.raises(ValueError):
        Instant.from_datetime(datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        Instant.coerce(datetime(2026, 1, 1))
    with pytest.raises(TypeError):
        Instant.coerce("2026-01-01T00:00:00Z")  # type: ignore[arg-type]


def test_to_datetime_truncates_and_refuses_what_it_cannot_hold() -> None:
    inst = Instant.parse("2026-01-01T00:00:00.123456789Z")
    assert inst.to_datetime() == datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert Instant.parse("1969-12-31T23:59:59.999999999Z").to_datetime().microsecond == 999999
    assert Instant.ZERO.to_datetime() == datetime(1, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        (Instant.ZERO - timedelta(hours=1)).to_datetime()
    with pytest.raises(ValueError):
        Instant.parse("2026-01-01T00:00:00+24:00").to_datetime()


def test_from_unix_ns_and_negative_instants() -> None:
    assert str(Instant.from_unix_ns(0)) == "1970-01-01T00:00:00Z"
    assert str(Instant.from_unix_ns(-1)) == "1969-12-31T23:59:59.999999999Z"
    assert str(Instant.from_unix_ns(0, 3600)) == "1970-01-01T01:00:00+01:00"
    assert Instant.from_unix_ns(0, 3600).offset_seconds == 3600


def test_now_is_utc_wall_clock() -> None:
    before = time.time_ns()
    now = Instant.now()
    after = time.time_ns()
    assert before <= now.unix_ns <= after
    assert now.offset_seconds == 0
    assert str(now).endswith("Z")


# -- value semantics -----------------------------------------------------------------


def test_comparisons_with_other_types() -> None:
    t = Instant.ZERO
    assert t.__eq__("0001-01-01T00:00:00Z") is NotImplemented
    assert t != "0001-01-01T00:00:00Z"
    assert t != datetime(1, 1, 1, tzinfo=UTC)
    with pytest.raises(TypeError):
        _ = t < datetime(1, 1, 1, tzinfo=UTC)  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = t + 5  # type: ignore[operator]


def test_ordering_and_sorting() -> None:
    texts = ["2026-01-01T00:00:02Z", "2026-01-01T00:00:00.5+00:00", "2026-01-01T01:00:01+01:00"]
    ordered = sorted(Instant.parse(t) for t in texts)
    assert [str(t) for t in ordered] == [
        "2026-01-01T00:00:00.5Z",
        "2026-01-01T01:00:01+01:00",
        "2026-01-01T00:00:02Z",
    ]
    assert max(ordered) == Instant.parse("2026-01-01T00:00:02Z")


def test_immutable_hashable_copyable() -> None:
    t = Instant.parse("2026-01-01T01:00:00.000000007+01:00")
    with pytest.raises(AttributeError):
        t._ns = 0
    with pytest.raises(AttributeError):
        t.foo = 1
    assert copy.copy(t) is t
    assert copy.deepcopy(t) is t
    back = pickle.loads(pickle.dumps(t))
    assert back == t
    assert str(back) == str(t)
    assert {t: 1}[Instant.parse("2026-01-01T00:00:00.000000007Z")] == 1
    assert not hasattr(t, "__dict__")
    assert f"{t}" == str(t)


def _printed_shape() -> st.SearchStrategy[str]:
    """UTC texts of the canonical shape, any digits (months 13 to 99, day 31
    of February, hour 24 and 99...): `parse_printed`'s cached-date path."""
    d = st.integers(0, 9).map(str)
    two = st.tuples(d, d).map("".join)
    frac = st.one_of(
        st.just(""),
        st.tuples(st.text("0123456789", max_size=8), st.sampled_from("123456789")).map(
            lambda t: "." + "".join(t)
        ),
    )
    year = st.one_of(
        st.sampled_from(["2026", "2024", "2000", "1900", "0000", "1970"]),
        st.tuples(two, two).map("".join),
    )
    month = st.one_of(st.sampled_from(["01", "02", "12"]), two)
    day = st.one_of(st.sampled_from(["01", "28", "29", "30", "31"]), two)
    return st.builds(
        lambda y, mo, dd, h, mi, s, f: f"{y}-{mo}-{dd}T{h}:{mi}:{s}{f}Z",
        year,
        month,
        day,
        two,
        two,
        two,
        frac,
    )


@settings(max_examples=2000, deadline=None)
@given(_printed_shape())
def test_parse_printed_of_a_utc_text_is_parse_with_its_text_kept(text: str) -> None:
    from ledger_cli.engine.civil import parse_rfc3339 as _parse
    from ledger_cli.engine.instant import _make, parse_printed

    try:
        want = _make(*_parse(text))  # the general way (Instant.parse takes parse_printed's)
    except ValueError as exc:
        for _ in range(2):  # the second with the date cached, if the first cached it
            with pytest.raises(ValueError) as got:
                parse_printed(text)
            assert str(got.value) == str(exc)
        return
    for _ in range(2):
        got = parse_printed(text)
        assert (got.unix_ns, got.offset_seconds) == (want.unix_ns, want.offset_seconds)
        assert str(got) == str(want) == text


_NEAR_CANONICAL = st.text(st.sampled_from("0123456789-T:.Z+٣0"), min_size=18, max_size=32)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(_printed_shape(), _NEAR_CANONICAL, _printed_shape().map(lambda t: t[:-1] + "0Z")))
def test_the_canonical_check_is_the_canonical_pattern(text: str) -> None:
    import re

    from ledger_cli.engine.civil import CANONICAL as _CANONICAL
    from ledger_cli.engine.civil import is_canonical_utc

    want = text[-1:] == "Z" and re.fullmatch(_CANONICAL, text[:-1]) is not None
    assert is_canonical_utc(text) == want
