"""The fast decoder of the records this port wrote (engine/fastwire.py) against
the Go-compatible one (engine/wire/decode.py): the same record, value for value and
type for type (an int is not a float, -0.0 is not 0), for random records and
for inputs that only look canonical."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger_cli.engine.fastwire import record_from_canonical
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.wire.decode import record_from_json
from ledger_cli.engine.wire.encode import FIELD_NAMES, record_to_json
from ledger_cli.errors import DecodeError, StoreError
from ledger_cli.stores.jsonfile import records

UINT64_MAX = 2**64 - 1

texts = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()),  # surrogates and controls too
    max_size=12,
)
ints = st.one_of(
    st.integers(-(2**63), UINT64_MAX),
    st.integers(-(2**80), 2**80),  # beyond 64 bits: written as their float64
    st.sampled_from([0, -1, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, UINT64_MAX, UINT64_MAX + 1]),
)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 0.0, 1e21, 1e20, 5e-324, 1.7976931348623157e308, 0.1, 1.0]),
)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts)
tasks = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
instants = st.builds(
    Instant.from_unix_ns,
    st.integers(-62135596800 * 10**9 + 86_400 * 10**9, 253402300799 * 10**9 - 86_400 * 10**9),
    st.sampled_from([0, 3600, -7200, 19800, -34200]),
)
uints = st.one_of(st.integers(0, UINT64_MAX), st.sampled_from([0, 1, UINT64_MAX]))
records_st = st.builds(
    TaskState,
    key=texts,
    status=st.sampled_from(["pending", "claimed", "completed", "failed", "blocked", "odd"]),
    sequence=uints,
    owner=texts,
    fence=uints,
    lease_until=instants,
    needs=st.one_of(st.none(), st.lists(texts, max_size=3).map(tuple)),
    blocked_by=texts,
    task=tasks,
    rev=uints,
    created_by=texts,
    created_at=instants,
    updated_by=texts,
    updated_at=instants,
)


def strict(v: Any) -> Any:
    """A value with its types spelled out: 1, 1.0 and True differ; -0.0 and 0.0 differ."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return (type(v).__name__, v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        assert not math.isnan(v)
        return ("float", v.hex())
    if isinstance(v, dict):
        return ("dict", [(k, strict(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [strict(x) for x in v])
    if isinstance(v, Instant):
        return ("instant", v.unix_ns, str(v))
    raise AssertionError(f"unexpected {type(v)}")


def fields(rec: TaskState) -> list[Any]:
    return [strict(getattr(rec, name)) for name in TaskState.__match_args__]


def both(text: str) -> tuple[Any, Any]:
    def run(decode: Any) -> Any:
        try:
            return fields(decode(text))
        except DecodeError as exc:
            return ("error", str(exc))

    return run(record_from_canonical), run(record_from_json)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_st)
def test_random_records_decode_the_same_on_both_paths(rec: TaskState) -> None:
    text = record_to_json(rec)
    fast, slow = both(text)
    assert fast == slow
    # And the record file as the JSON store writes and reads it (the checksum
    # picks the fast path), against its wire bytes read the Go way.
    try:
        data = records.encode_record(rec)
    except UnicodeEncodeError:
        return  # a lone surrogate in a string: no record file holds one
    assert file_way(lambda: records.decode_record_file(data, "f", checksummed=True)) == file_way(
        lambda: records._decode(text.encode("utf-8"), "f", fast=False)
    )


def file_way(read: Any) -> Any:
    try:
        return fields(read())
    except StoreError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize(
    "value", [0, -1, 2**63, UINT64_MAX, UINT64_MAX + 1, 2**64 * 10, -(2**63) - 1]
)
def test_integers_at_the_64_bit_edges(value: int) -> None:
    rec = TaskState(key="k", status="pending", task={"n": value, "l": [value, -value]})
    fast, slow = both(record_to_json(rec))
    assert fast == slow
    if -(2**63) <= value <= UINT64_MAX:
        assert record_from_canonical(record_to_json(rec)).task["n"] == value


BASE = record_to_json(
    TaskState(
        key="k", status="claimed", owner="o", lease_until=Instant.parse("2026-01-02T03:04:05Z")
    )
)


@pytest.mark.parametrize(
    "text",
    [
        BASE.replace('"Key"', '"key"'),  # Go folds case
        BASE.replace('"Key"', '"\\u004bey"'),  # escaped field name
        BASE[:-1] + ',"Extra":1}',  # unknown field
        BASE[:-1] + ',"Key":"other"}',  # repeated: the last wins
        BASE[:-1] + ',"Needs":null}',
        BASE.replace('"Needs":null', '"Needs":["a",null]'),  # null element: Go keeps the zero
        BASE[:-1] + ',"Needs":["b"]}',
        BASE.replace('"Needs":null', '"Needs":["a","b"]')[:-1] + ',"Needs":[null]}',
        BASE.replace('"Fence":0', '"Fence":-1'),
        BASE.replace('"Fence":0', '"Fence":1.0'),
        BASE.replace('"Fence":0', '"Fence":18446744073709551616'),
        BASE.replace('"Task":null', '"Task":1e400'),
        BASE.replace('"Task":null', '"Task":-0'),
        BASE.replace('"Task":null', '"Task":"\\ud800"'),  # a lone surrogate: U+FFFD in Go
        BASE.replace('"Task":null', '"Task":{"a":1,"a":2}'),
        BASE.replace('"Task":null', '"Task":' + "[" * 1200 + "]" * 1200),
        BASE.replace("2026-01-02T03:04:05Z", "2026-01-02T03:04:05\\u005a"),  # escaped time
        BASE.replace("2026-01-02T03:04:05Z", "yesterday"),
        BASE.replace('"Owner":"o"', '"Owner":null'),  # null leaves the zero value
        BASE.replace('"Status":"claimed",', ""),  # a field missing
        '{"Status":"claimed",' + BASE[1:].replace('"Status":"claimed",', ""),  # reordered
        "null",
        "[]",
        "{",
        BASE + " x",
    ],
)
def test_inputs_that_only_look_canonical_decode_the_go_way(text: str) -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # strict() of the 1,200-deep Task
    try:
        fast, slow = both(text)
        assert fast == slow
    finally:
        sys.setrecursionlimit(limit)


def test_every_field_name_is_checked() -> None:
    assert list(FIELD_NAMES) == [
        "Key", "Status", "Sequence", "Owner", "Fence", "LeaseUntil", "Needs",
        "BlockedBy", "Task", "Rev", "CreatedBy", "CreatedAt", "UpdatedBy", "UpdatedAt",
    ]  # fmt: skip


def test_a_record_file_of_ours_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = TaskState(key="k", status="pending", task={"n": 2**64 - 1, "f": 0.5, "s": "<&>"})
    data = records.encode_record(rec)

    def refuse(text: Any) -> TaskState:
        raise AssertionError("the Go-compatible decoder was used")

    import ledger_cli.engine.wire.decode as decode

    monkeypatch.setattr(decode, "record_from_json", refuse)
    got = records.decode_record_file(data, "f", checksummed=True)
    assert fields(got) == fields(record_from_json(record_to_json(rec)))
    with pytest.raises(AssertionError, match="Go-compatible"):  # no checksum: the Go way
        records.decode_record_file(data.replace(b',"Sum"', b',"Sun"'), "f", checksummed=False)


@settings(max_examples=500, deadline=None)
@given(instants)
def test_a_time_read_back_prints_as_it_was_written(inst: Instant) -> None:
    from ledger_cli.engine.instant import parse_printed

    text = str(inst)
    got = parse_printed(text)
    assert got == inst and str(got) == text
    assert str(Instant.from_unix_ns(got.unix_ns, got.offset_seconds)) == text


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-02T03:04:05.100Z",  # trailing zeros: printed without them
        "2026-01-02T03:04:05+00:00",  # offset 0: printed as Z
        "2026-01-02T03:04:05-00:00",
        "2026-01-02T03:04:05.1234567891Z",  # past nanoseconds: truncated
        "2026-01-02T03:04:05,5Z",
        "2026-01-02T3:04:05Z",
        "2026-01-02T03:04:05+05:30",
    ],
)
def test_a_time_not_printed_so_is_formatted_afresh(text: str) -> None:
    from ledger_cli.engine.instant import parse_printed

    got = parse_printed(text)
    assert str(got) == str(Instant.parse(text))
