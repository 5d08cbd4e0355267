"""The wire format (docs/design.md §2.10): Encode byte-exact, Decode as Go's Unmarshal."""

from __future__ import annotations

import gzip
import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine import gojson
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.engine.status import Status
from ledger_cli.engine.wire import decode, encode
from ledger_cli.errors import DecodeError, EncodeError, ValidationError

DATA = Path(__file__).parents[1] / "data" / "conformance"
T0 = Instant.parse("2024-01-01T00:00:00Z")


def _decode_cases() -> list[dict[str, Any]]:
    with open(DATA / "decode-cases.json", encoding="utf-8") as fh:
        cases: list[dict[str, Any]] = json.load(fh)["ops"]
    return cases


DECODE_CASES = _decode_cases()


def record_view(rec: TaskState) -> dict[str, Any]:
    """A decoded record in the traces' RECORD form (UTC times, Needs a list, Task as JSON)."""
    return {
        "Key": rec.key,
        "Status": str(rec.status),
        "Sequence": rec.sequence,
        "Owner": rec.owner,
        "Fence": rec.fence,
        "LeaseUntil": str(rec.lease_until.utc()),
        "Needs": list(rec.needs or ()),
        "BlockedBy": rec.blocked_by,
        "Task": json.loads(gojson.encode_value(rec.task)),
        "Rev": rec.rev,
        "CreatedBy": rec.created_by,
        "CreatedAt": str(rec.created_at.utc()),
        "UpdatedBy": rec.updated_by,
        "UpdatedAt": str(rec.updated_at.utc()),
    }


def _same_json(a: Any, b: Any) -> bool:
    """Equality of JSON values where numbers compare as float64 (and -0 keeps its sign)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b) and math.copysign(1, float(a)) == math.copysign(1, float(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# -- the byte-exact example (docs/design.md §2.10) -------------------------------------

EXAMPLE = (
    '{"Tasks":[{"Key":"a","Status":"claimed","Sequence":1,"Owner":"owner-a","Fence":1,'
    '"LeaseUntil":"2024-01-01T01:00:00Z","Needs":null,"BlockedBy":"","Task":"payload-a",'
    '"Rev":1,"CreatedBy":"test-actor","CreatedAt":"2024-01-01T00:00:00Z",'
    '"UpdatedBy":"test-actor","UpdatedAt":"2024-01-01T00:00:00Z"},{"Key":"b",'
    '"Status":"blocked","Sequence":2,"Owner":"","Fence":0,"LeaseUntil":"0001-01-01T00:00:00Z",'
    '"Needs":["root"],"BlockedBy":"root","Task":{"n":1.5,"tag":"x\\u003cy"},"Rev":1,'
    '"CreatedBy":"test-actor","CreatedAt":"2024-01-01T00:00:00Z","UpdatedBy":"test-actor",'
    '"UpdatedAt":"2024-01-01T00:30:00.5Z"}]}'
)


def example_records() -> tuple[TaskState, TaskState]:
    a = TaskState(
        key="a",
        status=Status.CLAIMED,
        sequence=1,
        owner="owner-a",
        fence=1,
        lease_until=T0 + timedelta(hours=1),
        needs=None,
        blocked_by="",
        task="payload-a",
        rev=1,
        created_by="test-actor",
        created_at=T0,
        updated_by="test-actor",
        updated_at=T0,
    )
    b = TaskState(
        key="b",
        status="blocked",
        sequence=2,
        owner="",
        fence=0,
        lease_until=Instant.ZERO,
        needs=("root",),
        blocked_by="root",
        task={"tag": "x<y", "n": 1.5},
        rev=1,
        created_by="test-actor",
        created_at=T0,
        updated_by="test-actor",
        updated_at=T0 + timedelta(minutes=30, milliseconds=500),
    )
    return a, b


def test_byte_exact_example() -> None:
    snap = Snapshot(example_records())
    encoded = snap.encode()
    assert isinstance(encoded, bytes)
    assert encoded == EXAMPLE.encode("utf-8")
    assert not encoded.endswith(b"\n")
    assert encode.encode_snapshot(snap.tasks) == encoded


def test_example_decodes_back() -> None:
    snap = Snapshot.decode(EXAMPLE)
    assert snap.tasks is not None
    a, b = snap.tasks
    ea, eb = example_records()
    assert a == ea
    assert b == eb.replace(task={"tag": "x<y", "n": 1.5})
    assert snap.encode() == EXAMPLE.encode()
    assert Snapshot.decode(EXAMPLE.encode("utf-8")) == snap


def test_nil_versus_empty() -> None:
    assert Snapshot().encode() == b'{"Tasks":null}'
    assert Snapshot(None).encode() == b'{"Tasks":null}'
    assert Snapshot(()).encode() == b'{"Tasks":[]}'
    assert Snapshot([]).tasks == ()  # type: ignore[arg-type]
    assert Snapshot(list(example_records())).tasks == example_records()  # type: ignore[arg-type]
    assert Snapshot.decode(b'{"Tasks":[]}').tasks == ()
    assert Snapshot.decode(b'{"Tasks":null}').tasks is None
    assert Snapshot.decode(b"{}").tasks is None
    assert Snapshot.decode(b"null").tasks is None


def test_needs_nil_versus_empty() -> None:
    rec = TaskState(key="k", status="pending")
    assert '"Needs":null' in encode.record_to_json(rec)
    assert '"Needs":[]' in encode.record_to_json(rec.replace(needs=()))
    assert '"Needs":["a","b"]' in encode.record_to_json(rec.replace(needs=("a", "b")))
    assert decode.record_from_json(encode.record_to_json(rec)).needs is None
    assert decode.record_from_json(encode.record_to_json(rec.replace(needs=()))).needs == ()


# -- the recorded decode cases -------------------------------------------------------------


def test_decode_cases_are_all_here() -> None:
    assert len(DECODE_CASES) == 53
    outcomes = [case["expect"]["err"] for case in DECODE_CASES]
    assert outcomes.count(None) == 23
    assert outcomes.count("Decode") == 16
    assert outcomes.count("Validate") == 14


@pytest.mark.parametrize("case", DECODE_CASES, ids=[c["name"] for c in DECODE_CASES])
def test_decode_case(case: dict[str, Any]) -> None:
    expect = case["expect"]
    data = case["input"].encode("utf-8")
    if expect["err"] == "Decode":
        with pytest.raises(DecodeError) as info:
            Snapshot.decode(data)
        assert str(info.value).startswith("ledger: decode: ")
        return
    if expect["err"] == "Validate":
        with pytest.raises(ValidationError) as vinfo:
            Snapshot.decode(data)
        assert str(vinfo.value) == expect["err_text"]
        assert not isinstance(vinfo.value, DecodeError)
        # The records themselves decode; only validation fails.
        tasks = decode.decode_snapshot(data)
        assert tasks is not None
        return
    assert expect["err"] is None
    snap = Snapshot.decode(data)
    got = [record_view(rec) for rec in snap.tasks or ()]
    want = expect["records"]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for field in encode.FIELD_NAMES:
            assert _same_json(g[field], w[field]), (field, g[field], w[field])
    assert snap.encode() == expect["reencoded"].encode("utf-8")
    # str input decodes the same as bytes.
    assert Snapshot.decode(case["input"]) == snap


def test_decode_case_number_forms_keep_python_types() -> None:
    case = next(c for c in DECODE_CASES if c["name"] == "task-number-forms")
    snap = Snapshot.decode(case["input"])
    assert snap.tasks is not None
    task = snap.tasks[0].task
    assert task[:2] == [1000.0, 2.5]
    assert all(type(x) is float for x in task)
    assert math.copysign(1.0, task[2]) == -1.0
    assert task[3] == 1e23
    assert task[4] == 1e-7


# -- encoding details ----------------------------------------------------------------------


def test_record_to_json_field_order_and_escaping() -> None:
    rec = TaskState(
        key="k<1>",
        status="pending",
        sequence=2**64 - 1,
        owner="ø",
        task={"z": [1, 2.5, None, True], "a": "\u2028"},
        created_at=Instant.parse("2026-01-01T01:00:00.000000001+01:00"),
    )
    text = encode.record_to_json(rec)
    assert text == (
        '{"Key":"k\\u003c1\\u003e","Status":"pending","Sequence":18446744073709551615,'
        '"Owner":"ø","Fence":0,"LeaseUntil":"0001-01-01T00:00:00Z","Needs":null,'
        '"BlockedBy":"","Task":{"a":"\\u2028","z":[1,2.5,null,true]},"Rev":0,'
        '"CreatedBy":"","CreatedAt":"2026-01-01T01:00:00.000000001+01:00","UpdatedBy":"",'
        '"UpdatedAt":"0001-01-01T00:00:00Z"}'
    )
    assert list(json.loads(text)) == list(encode.FIELD_NAMES)
    back = decode.record_from_json(text)
    assert back == rec
    assert back.created_at.offset_seconds == 3600
    assert encode.record_to_json(back) == text


def test_record_to_obj() -> None:
    a, b = example_records()
    obj = encode.record_to_obj(b)
    assert list(obj) == list(encode.FIELD_NAMES)
    assert obj["LeaseUntil"] == "0001-01-01T00:00:00Z"
    assert obj["UpdatedAt"] == "2024-01-01T00:30:00.5Z"
    assert obj["Needs"] == ["root"]
    assert obj["Task"] == {"tag": "x<y", "n": 1.5}
    assert encode.record_to_obj(a)["Needs"] is None
    assert json.loads(encode.record_to_json(a)) == encode.record_to_obj(a)


@pytest.mark.parametrize(
    "when",
    [
        Instant.parse("9999-12-31T23:59:59Z") + timedelta(seconds=1),
        Instant.ZERO - timedelta(days=400),
    ],
)
def test_years_outside_0_9999_cannot_be_marshalled(when: Instant) -> None:
    rec = TaskState(key="k", status="pending", updated_at=when)
    with pytest.raises(EncodeError, match="year outside of range"):
        encode.record_to_json(rec)
    with pytest.raises(EncodeError):
        Snapshot((rec,)).encode()


def test_year_zero_is_marshalled() -> None:
    when = Instant.ZERO - timedelta(hours=1)
    rec = TaskState(key="k", status="pending", lease_until=when)
    assert '"LeaseUntil":"0000-12-31T23:00:00Z"' in encode.record_to_json(rec)
    assert Snapshot.decode(Snapshot((rec,)).encode()).tasks == (rec,)


def test_year_is_checked_in_the_instants_own_offset() -> None:
    # 9999-12-31T23:30:00-01:00 is year 10000 in UTC, but Go checks t.Year() in its zone.
    late = Instant.parse("9999-12-31T23:30:00-01:00")
    rec = TaskState(key="k", status="pending", created_at=late)
    assert '"CreatedAt":"9999-12-31T23:30:00-01:00"' in encode.record_to_json(rec)
    with pytest.raises(EncodeError):
        encode.record_to_json(rec.replace(created_at=late.utc()))


@pytest.mark.parametrize(
    "task", [math.nan, math.inf, {"x": -math.inf}, {1: "x"}, {"s": {1, 2}}, b"raw", object()]
)
def test_unencodable_tasks(task: Any) -> None:
    rec = TaskState(key="k", status="pending", task=task)
    with pytest.raises(EncodeError):
        Snapshot((rec,)).encode()


@pytest.mark.parametrize(
    "changes",
    [{"sequence": -1}, {"fence": 2**64}, {"rev": "1"}, {"key": 5}, {"needs": "ab"}],
)
def test_values_go_cannot_hold(changes: dict[str, Any]) -> None:
    rec = TaskState(key="k", status="pending").replace(**changes)
    with pytest.raises(EncodeError):
        encode.record_to_json(rec)


def test_encode_validates_first() -> None:
    bad = Snapshot((TaskState(key="ok", status="pending"), TaskState(task=math.nan)))
    with pytest.raises(ValidationError) as info:
        bad.encode()
    assert str(info.value) == "ledger: snapshot entry 1: ledger: task key must not be empty"
    with pytest.raises(ValidationError, match=r"^ledger: snapshot entry 0: "):
        Snapshot((TaskState(key="k1", status="nonsense"),)).validate()
    Snapshot(example_records()).validate()
    Snapshot(None).validate()


def test_times_in_datetime_form_are_accepted_on_encode() -> None:
    rec = TaskState(key="k", status="pending", created_at=T0.to_datetime())  # type: ignore[arg-type]
    assert '"CreatedAt":"2024-01-01T00:00:00Z"' in encode.record_to_json(rec)


# -- Go's Unmarshal quirks ----------------------------------------------------------------


def decode_one(text: str) -> TaskState:
    tasks = decode.decode_snapshot(text)
    assert tasks is not None and len(tasks) == 1
    return tasks[0]


def test_field_names_fold_like_go() -> None:
    rec = decode_one(
        '{"TASKS":[{"kEY":"k","STATUS":"pending","sequence":3,"leaseuntil":'
        '"2026-01-01T00:00:00Z","NEEDS":["a"],"blockedby":"","task":1,"REV":2,'
        '"createdBy":"c","createdat":"2026-01-01T00:00:00Z","UPDATEDBY":"u",'
        '"updatedAT":"2026-01-01T00:00:00Z","fence":4,"owner":"o"}]}'
    )
    assert (rec.key, rec.status, rec.sequence, rec.fence, rec.rev) == ("k", "pending", 3, 4, 2)
    assert (rec.owner, rec.created_by, rec.updated_by, rec.needs, rec.task) == (
        "o",
        "c",
        "u",
        ("a",),
        1,
    )
    # KELVIN SIGN folds to k, LATIN SMALL LETTER LONG S to s (bytes.EqualFold).
    rec = decode_one('{"\u017ftasks":0, "Ta\u017fks":[{"\u212aey":"k","\u017ftatus":"x"}]}')
    assert (rec.key, rec.status) == ("k", "x")
    # Other look-alikes do not fold (Unicode upper() maps U+00DF to SS, U+0131 to I).
    rec = decode_one('{"Tasks":[{"Key":"k","Ke\u0131":"no","Statu\u00df":"no","Owner ":"no"}]}')
    assert (rec.key, rec.status, rec.owner) == ("k", "", "")


def test_unknown_fields_are_ignored_everywhere() -> None:
    rec = decode_one(
        '{"Version":2,"Tasks":[{"Key":"k","Extra":{"x":[1,{"y":null}]},"Status":"pending",'
        '"Sequencee":"x"}],"Other":[1e400]}'
    )
    assert (rec.key, rec.status, rec.sequence) == ("k", "pending", 0)


def test_repeated_fields() -> None:
    rec = decode_one(
        '{"Tasks":[{"Key":"k1","Status":"pending","Key":"k2","Owner":"o","Owner":null,'
        '"Sequence":5,"Sequence":null,"Needs":["a"],"Needs":null,"Task":{"a":1},"Task":null,'
        '"CreatedAt":"2026-01-01T00:00:00Z","CreatedAt":null,"Fence":1,"fence":2}]}'
    )
    assert rec.key == "k2"
    assert rec.owner == "o"  # null leaves a string alone
    assert rec.sequence == 5  # ... and a number
    assert rec.created_at == Instant.parse("2026-01-01T00:00:00Z")  # ... and a time
    assert rec.needs is None  # null resets a slice
    assert rec.task is None  # ... and an interface
    assert rec.fence == 2


def test_repeated_tasks_merge_into_the_existing_records() -> None:
    # Go decodes the second array into the slice already there, element by element.
    tasks = decode.decode_snapshot(
        '{"Tasks":[{"Key":"a","Status":"pending","Needs":["x","y"],"Sequence":7}],'
        '"Tasks":[{"Needs":[null],"Owner":"o"}]}'
    )
    assert tasks is not None
    (rec,) = tasks
    assert (rec.key, rec.status, rec.sequence, rec.owner) == ("a", "pending", 7, "o")
    assert rec.needs == ("x",)  # a null element keeps the old string
    # A shorter array truncates; a later longer one re-exposes the old elements
    # that are still within the slice's capacity (Go 1.19 growth: cap 4 here).
    tasks = decode.decode_snapshot(
        '{"Tasks":[{"Key":"a"},{"Key":"b"},{"Key":"c"}],"Tasks":[{"Owner":"o"}],'
        '"Tasks":[null,null]}'
    )
    assert tasks is not None
    assert [(t.key, t.owner) for t in tasks] == [("a", "o"), ("b", "")]
    # A null in between resets the slice.
    tasks = decode.decode_snapshot(
        '{"Tasks":[{"Key":"a","Status":"pending"}],"Tasks":null,"Tasks":[{"Key":"b"}]}'
    )
    assert tasks is not None
    assert [(t.key, t.status) for t in tasks] == [("b", "")]
    # An empty array gives a fresh empty (not nil) slice.
    assert decode.decode_snapshot('{"Tasks":[{"Key":"a"}],"Tasks":[]}') == ()


def test_null_entries_and_elements() -> None:
    tasks = decode.decode_snapshot('{"Tasks":[null,{"Key":"k","Needs":[null,"a"]}]}')
    assert tasks is not None
    assert tasks[0] == TaskState()
    assert tasks[1].needs == ("", "a")
    with pytest.raises(ValidationError, match=r"^ledger: snapshot entry 0: "):
        Snapshot.decode('{"Tasks":[null]}')


@pytest.mark.parametrize(
    ("literal", "value"),
    [("0", 0), ("1", 1), ("18446744073709551615", 2**64 - 1), ("9007199254740993", 2**53 + 1)],
)
def test_uint_fields_accept_plain_integers(literal: str, value: int) -> None:
    for field, attr in (("Sequence", "sequence"), ("Fence", "fence"), ("Rev", "rev")):
        rec = decode_one(f'{{"Tasks":[{{"{field}":{literal}}}]}}')
        assert getattr(rec, attr) == value
        assert type(getattr(rec, attr)) is int


@pytest.mark.parametrize(
    "value",
    [
        "-1",
        "-0",
        "1.0",
        "1.5",
        "1e3",
        "1E0",
        "18446744073709551616",
        "99999999999999999999999",
        '"1"',
        "true",
        "[1]",
        "{}",
    ],
)
def test_uint_fields_reject_everything_else(value: str) -> None:
    for field in ("Sequence", "Fence", "Rev"):
        with pytest.raises(DecodeError, match=r"^ledger: decode: "):
            decode.decode_snapshot(f'{{"Tasks":[{{"Key":"k","{field}":{value}}}]}}')


@pytest.mark.parametrize("field", ["Key", "Status", "Owner", "BlockedBy", "CreatedBy", "UpdatedBy"])
@pytest.mark.parametrize("value", ["1", "true", "[]", '["a"]', "{}"])
def test_string_fields_must_be_strings(field: str, value: str) -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: json: cannot unmarshal"):
        decode.decode_snapshot(f'{{"Tasks":[{{"{field}":{value}}}]}}')


@pytest.mark.parametrize("field", ["LeaseUntil", "CreatedAt", "UpdatedAt"])
@pytest.mark.parametrize(
    "value",
    [
        "1767225600",
        "true",
        "{}",
        '["2026-01-01T00:00:00Z"]',
        '"yesterday"',
        '""',
        '"2026-01-01T00:00:00"',
        '"2026-02-30T00:00:00Z"',
        '"2026-01-01T00:00:00\\u005a"',  # Go parses the raw text: an escape never matches
        '"\\u0032026-01-01T00:00:00Z"',
    ],
)
def test_time_fields_must_be_rfc3339_strings(field: str, value: str) -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: "):
        decode.decode_snapshot(f'{{"Tasks":[{{"Key":"k","{field}":{value}}}]}}')


def test_time_fields_keep_offsets_and_nanoseconds() -> None:
    rec = decode_one(
        '{"Tasks":[{"LeaseUntil":"2026-01-01T01:00:00.123456789+01:00",'
        '"CreatedAt":null,"UpdatedAt":"2026-01-01T00:00:00.100Z"}]}'
    )
    assert str(rec.lease_until) == "2026-01-01T01:00:00.123456789+01:00"
    assert rec.created_at.is_zero()
    assert str(rec.updated_at) == "2026-01-01T00:00:00.1Z"


@pytest.mark.parametrize("value", ['"k0"', "1", "{}", "true", "[1]", '[["a"]]', '[{"a":1}]'])
def test_needs_must_be_an_array_of_strings(value: str) -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: "):
        decode.decode_snapshot(f'{{"Tasks":[{{"Key":"k","Needs":{value}}}]}}')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "json: cannot unmarshal array into Go value of type ledger.Snapshot"),
        ('"x"', "json: cannot unmarshal string into Go value of type ledger.Snapshot"),
        ("5", "json: cannot unmarshal number into Go value of type ledger.Snapshot"),
        ("true", "json: cannot unmarshal bool into Go value of type ledger.Snapshot"),
        (
            '{"Tasks":{}}',
            "json: cannot unmarshal object into Go struct field Snapshot.Tasks"
            " of type []ledger.TaskState",
        ),
        (
            '{"Tasks":"x"}',
            "json: cannot unmarshal string into Go struct field Snapshot.Tasks"
            " of type []ledger.TaskState",
        ),
        (
            '{"Tasks":[5]}',
            "json: cannot unmarshal number into Go struct field Snapshot.Tasks"
            " of type ledger.TaskState",
        ),
        (
            '{"Tasks":[{"Fence":"3"}]}',
            "json: cannot unmarshal string into Go struct field TaskState.Tasks.Fence"
            " of type ledger.FenceToken",
        ),
        (
            '{"Tasks":[{"Sequence":-1}]}',
            "json: cannot unmarshal number -1 into Go struct field TaskState.Tasks.Sequence"
            " of type ledger.Sequence",
        ),
        (
            '{"Tasks":[{"Needs":"k0"}]}',
            "json: cannot unmarshal string into Go struct field TaskState.Tasks.Needs"
            " of type []ledger.IdempotencyKey",
        ),
        (
            '{"Tasks":[{"Task":1e400}]}',
            "json: cannot unmarshal number 1e400 into Go struct field TaskState.Tasks.Task"
            " of type float64",
        ),
        # The first type error is the one reported.
        (
            '{"Tasks":[{"Key":1,"Status":2}]}',
            "json: cannot unmarshal number into Go struct field TaskState.Tasks.Key"
            " of type ledger.IdempotencyKey",
        ),
    ],
)
def test_type_error_messages_follow_go(text: str, message: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode.decode_snapshot(text)
    assert str(info.value) == "ledger: decode: " + message


def test_time_errors_abort_before_saved_type_errors() -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: parsing time"):
        decode.decode_snapshot('{"Tasks":[{"Key":1,"CreatedAt":"soon"}]}')


def test_task_values_are_generic() -> None:
    rec = decode_one(
        '{"Tasks":[{"Task":{"b":[1,2.5,"s",null,true],"a":{"x":-0},'
        '"a":{"y":9007199254740993,"z":18446744073709551616}}}]}'
    )
    assert rec.task == {
        "b": [1, 2.5, "s", None, True],
        "a": {"y": 9007199254740993, "z": 18446744073709551616.0},
    }
    assert type(rec.task["b"][0]) is int
    assert type(rec.task["a"]["y"]) is int
    assert type(rec.task["a"]["z"]) is float


@pytest.mark.parametrize(
    ("literal", "encoded"),
    [
        ("1234567890123456789", "1234567890123456789"),
        ("18446744073709551615", "18446744073709551615"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("123456789012345678901234567890", "1.2345678901234568e+29"),
        ("100000000000000000000000", "1e+23"),
        ("-0", "-0"),
    ],
)
def test_task_numbers_in_a_snapshot_round_trip(literal: str, encoded: str) -> None:
    body = (
        '{"Key":"k","Status":"pending","Sequence":1,"Owner":"","Fence":0,'
        '"LeaseUntil":"0001-01-01T00:00:00Z","Needs":null,"BlockedBy":"",'
        '"Task":{"id":%s},"Rev":0,"CreatedBy":"a","CreatedAt":"2026-01-01T00:00:00Z",'
        '"UpdatedBy":"a","UpdatedAt":"2026-01-01T00:00:00Z"}'
    )
    text = '{"Tasks":[' + body % literal + "]}"
    snap = Snapshot.decode(text)
    assert snap.encode() == ('{"Tasks":[' + body % encoded + "]}").encode()
    assert encode.record_to_json(snap.tasks[0]) == body % encoded
    assert decode.record_from_json(body % literal).task == snap.tasks[0].task


def test_strings_are_cleaned_like_go() -> None:
    rec = decode_one('{"Tasks":[{"Key":"a\\ud800b","Task":"\\udc00","Owner":"\\ud83d\\ude00"}]}')
    assert (rec.key, rec.task, rec.owner) == ("a\ufffdb", "\ufffd", "😀")
    tasks = decode.decode_snapshot(b'{"Tasks":[{"Key":"a\xe2\x82b","Status":"\xffpending"}]}')
    assert tasks is not None
    assert (tasks[0].key, tasks[0].status) == ("a\ufffd\ufffdb", "\ufffdpending")
    assert type(tasks[0].key) is str


def test_deeply_nested_task_within_gos_limit() -> None:
    # Snapshot object, Tasks array and the record object use three levels.
    depth = 10_000 - 3
    text = '{"Tasks":[{"Key":"k","Status":"pending","Task":' + "[" * depth + "]" * depth + "}]}"
    snap = Snapshot.decode(text)
    assert snap.tasks is not None
    assert snap.encode().count(b"[") == depth + 1
    deeper = text.replace("[" * depth, "[" * (depth + 1)).replace("]" * depth, "]" * (depth + 1))
    with pytest.raises(DecodeError):
        Snapshot.decode(deeper)


@pytest.mark.parametrize(
    "text",
    ["", " ", "{", '{"Tasks":[', "hello", '{"Tasks":[]} x', "\ufeff{}", '{"Tasks":[NaN]}'],
)
def test_syntax_errors(text: str) -> None:
    with pytest.raises(DecodeError, match=r"^ledger: decode: "):
        Snapshot.decode(text)


# -- single records (the file store's format) -------------------------------------------------


def test_record_from_json() -> None:
    a, b = example_records()
    for rec in (a, b):
        assert decode.record_from_json(encode.record_to_json(rec).encode()) == rec
    assert decode.record_from_json("null") == TaskState()
    assert decode.record_from_json("{}") == TaskState()
    rec = decode.record_from_json('{"key":"k","Unknown":1,"Rev":3}')
    assert (rec.key, rec.rev) == ("k", 3)
    with pytest.raises(DecodeError) as info:
        decode.record_from_json("[]")
    assert str(info.value) == (
        "ledger: decode: json: cannot unmarshal array into Go value of type ledger.TaskState"
    )
    with pytest.raises(DecodeError) as info:
        decode.record_from_json('{"Sequence":1.5}')
    assert str(info.value) == (
        "ledger: decode: json: cannot unmarshal number 1.5 into Go struct field "
        "TaskState.Sequence of type ledger.Sequence"
    )
    with pytest.raises(DecodeError):
        decode.record_from_json('{"Key":"k"} {}')
    # No validation here.
    assert decode.record_from_json('{"Status":"bogus"}').status == "bogus"


def test_record_from_raw() -> None:
    raw = gojson.parse('{"Key":"k","Needs":[],"Task":[1]}')
    rec = decode.record_from_raw(raw)
    assert (rec.key, rec.needs, rec.task) == ("k", (), [1])
    assert decode.record_from_raw(None) == TaskState()


# -- every recorded final snapshot re-encodes byte for byte ------------------------------


def _trace_files() -> list[Path]:
    return sorted((DATA / "traces").glob("*.json.gz"))


@pytest.mark.skipif(not _trace_files(), reason="no compressed traces in tests/data/conformance")
def test_recorded_final_snapshots_round_trip() -> None:
    seen = 0
    for path in _trace_files():
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            trace = json.load(fh)
        encoded = trace.get("final_encoded")
        if encoded is None:
            continue
        snap = Snapshot.decode(encoded.encode("utf-8"))
        assert snap.encode().decode("utf-8") == encoded, path.name
        seen += 1
    assert seen > 0
