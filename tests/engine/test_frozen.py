"""TaskState, Event and HistoryEntry are values: immutable typing.NamedTuples
(not dataclasses, whose import costs the hot commands' start-up) with the
documented fields in wire order, equal and hashed by value, copied with
`replace`, pickled and matched by position."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from ledger_cli.engine.events import Event
from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState

T = Instant.parse("2024-01-02T03:04:05.123456789+01:00")

SAMPLES: list[Any] = [
    TaskState(),
    TaskState(
        key="k",
        status="claimed",
        sequence=3,
        owner="w",
        fence=2,
        lease_until=T,
        needs=("a", "b"),
        task={"x": [1, 2.5, None]},
        rev=7,
        created_by="me",
        created_at=T,
        updated_by="you",
        updated_at=T,
    ),
    Event("ledger.admitted", "k", "key k admitted"),
    HistoryEntry(time=str(T), actor="a", event="ledger.claimed", key="k", fence=1, data="d"),
]

FIELDS = {
    TaskState: [
        "key",
        "status",
        "sequence",
        "owner",
        "fence",
        "lease_until",
        "needs",
        "blocked_by",
        "task",
        "rev",
        "created_by",
        "created_at",
        "updated_by",
        "updated_at",
    ],
    Event: ["name", "key", "data"],
    HistoryEntry: ["time", "actor", "event", "key", "fence", "data"],
}


@pytest.mark.parametrize("cls", list(FIELDS))
def test_they_are_named_tuples_with_the_documented_fields(cls: type) -> None:
    assert issubclass(cls, tuple)
    assert list(cls._fields) == FIELDS[cls]  # type: ignore[attr-defined]
    assert list(cls.__match_args__) == FIELDS[cls]  # type: ignore[attr-defined]


def test_taskstate_defaults_are_the_go_zero_values() -> None:
    defaults = TaskState._field_defaults
    assert defaults == {name: getattr(TaskState(), name) for name in FIELDS[TaskState]}
    assert defaults["needs"] is None and defaults["lease_until"] == Instant.ZERO


@pytest.mark.parametrize("obj", SAMPLES, ids=lambda o: type(o).__name__)
def test_they_behave_as_values(obj: Any) -> None:
    values = tuple(obj)
    same = type(obj)(*copy.deepcopy(values))
    assert same == obj and same is not obj
    assert repr(obj).startswith(f"{type(obj).__name__}(")
    try:
        assert hash(obj) == hash(same)
    except TypeError:  # a dict payload makes the record unhashable
        assert isinstance(getattr(obj, "task", None), dict)
    assert type(obj)(*values) == obj
    assert pickle.loads(pickle.dumps(obj)) == obj
    assert copy.deepcopy(obj) == obj and copy.copy(obj) == obj
    field = FIELDS[type(obj)][0]
    with pytest.raises(AttributeError):
        setattr(obj, field, "x")
    with pytest.raises(AttributeError):
        delattr(obj, field)
    with pytest.raises((AttributeError, TypeError)):  # slots: no new attribute
        obj.not_a_field = 1
    changed = obj.replace(**{field: "other"})
    assert getattr(changed, field) == "other" and changed != obj
    assert getattr(obj, field) != "other"  # the original is untouched
    with pytest.raises(ValueError):
        obj.replace(not_a_field=1)
    match obj:
        case TaskState(key, status):
            assert (key, status) == (obj.key, obj.status)
        case Event(name, key, data) | HistoryEntry(_, _, name, key, _, data):
            assert (name, key, data) == (
                obj.event if isinstance(obj, HistoryEntry) else obj.name,
                obj.key,
                obj.data,
            )
