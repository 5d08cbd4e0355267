"""Replay of the recorded Go traces (tests/data/conformance, copied from the
original implementation's recordings; see its README for the format).

`replay(trace, make_store)` runs every op against a Ledger over the store that
`make_store(clock)` builds and raises AssertionError naming the trace, the op
and the first differing field.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from ledger_cli import errors
from ledger_cli.engine import gojson
from ledger_cli.engine.events import Recorder
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.store import Store

DATA = Path(__file__).parent / "data" / "conformance"
TRACES = DATA / "traces"

ERROR_NAMES: dict[type[errors.LedgerError], str] = {
    errors.NoKeyError: "ErrNoKey",
    errors.FencedError: "ErrFenced",
    errors.NotClaimedError: "ErrNotClaimed",
    errors.LeaseActiveError: "ErrLeaseActive",
    errors.NotStaleError: "ErrNotStale",
    errors.UnknownStatusError: "ErrUnknownStatus",
    errors.EmptyOwnerError: "ErrEmptyOwner",
    errors.InvalidLeaseError: "ErrInvalidLease",
    errors.ValidationError: "Validate",
}

RECORD_FIELDS = (
    ("Key", "key"),
    ("Status", "status"),
    ("Sequence", "sequence"),
    ("Owner", "owner"),
    ("Fence", "fence"),
    ("LeaseUntil", "lease_until"),
    ("Needs", "needs"),
    ("BlockedBy", "blocked_by"),
    ("Task", "task"),
    ("Rev", "rev"),
    ("CreatedBy", "created_by"),
    ("CreatedAt", "created_at"),
    ("UpdatedBy", "updated_by"),
    ("UpdatedAt", "updated_at"),
)


def trace_names(prefix: str = "") -> list[str]:
    return sorted(p.name[: -len(".json.gz")] for p in TRACES.glob(f"{prefix}*.json.gz"))


def load_trace(name: str) -> dict[str, Any]:
    with gzip.open(TRACES / f"{name}.json.gz", "rt", encoding="utf-8") as fh:
        trace: dict[str, Any] = json.load(fh)
    return trace


def record_view(rec: TaskState) -> dict[str, Any]:
    """A record as the traces show it: UTC times, Needs always a list, Task as Go JSON."""
    return {
        "Key": rec.key,
        "Status": str(rec.status),
        "Sequence": rec.sequence,
        "Owner": rec.owner,
        "Fence": rec.fence,
        "LeaseUntil": str(rec.lease_until.utc()),
        "Needs": list(rec.needs or ()),
        "BlockedBy": rec.blocked_by,
        "Task": gojson.encode_value(rec.task),
        "Rev": rec.rev,
        "CreatedBy": rec.created_by,
        "CreatedAt": str(rec.created_at.utc()),
        "UpdatedBy": rec.updated_by,
        "UpdatedAt": str(rec.updated_at.utc()),
    }


def expected_view(obj: dict[str, Any]) -> dict[str, Any]:
    view = dict(obj)
    view["Task"] = gojson.encode_value(obj["Task"])
    for field in ("LeaseUntil", "CreatedAt", "UpdatedAt"):
        view[field] = str(Instant.parse(obj[field]).utc())
    return view


def diff_records(where: str, got: list[TaskState], want: list[dict[str, Any]]) -> None:
    got_keys = [r.key for r in got]
    want_keys = [r["Key"] for r in want]
    if got_keys != want_keys:
        raise AssertionError(f"{where}: store keys {got_keys} != expected {want_keys}")
    for rec, exp in zip(got, want, strict=True):
        g, w = record_view(rec), expected_view(exp)
        for field, _ in RECORD_FIELDS:
            if g[field] != w[field]:
                raise AssertionError(
                    f"{where}: record {rec.key!r} field {field}: got {g[field]!r}, "
                    f"expected {w[field]!r}"
                )


class _Clock:
    def __init__(self) -> None:
        self.now = Instant.ZERO

    def __call__(self) -> Instant:
        return self.now


def _run_op(ledger: Ledger, op: dict[str, Any], now: Instant | None) -> dict[str, Any]:
    """Run one op; return the observed result fields (without events)."""
    kind = op["op"]
    lease = timedelta(milliseconds=op["lease_ms"]) if "lease_ms" in op else timedelta(0)
    assert now is not None or kind in ("state", "blocked")
    if kind == "admit":
        return {
            "ok": ledger.admit(op["actor"], op["key"], op["seq"], op["task"], now, *op["needs"])
        }
    if kind == "claim":
        return {"fence": ledger.claim(op["actor"], op["key"], op["owner"], lease, now)}
    if kind == "takeover":
        return {"fence": ledger.takeover(op["actor"], op["key"], op["owner"], lease, now)}
    if kind == "renew":
        ledger.renew(op["actor"], op["key"], op["owner"], op["fence"], lease, now)
        return {}
    if kind == "release":
        ledger.release(op["actor"], op["key"], op["owner"], op["fence"], now)
        return {}
    if kind == "complete":
        ledger.complete(op["actor"], op["key"], op["owner"], op["fence"], op["status"], now)
        return {}
    if kind == "state":
        rec = ledger.state(op["key"])
        return {"found": rec is not None, "record": rec}
    if kind == "blocked":
        by = ledger.blocked(op["key"])
        return {"blocked": by is not None, "blocked_by": by or ""}
    raise AssertionError(f"unknown op {kind!r}")


def replay(trace: dict[str, Any], make_store: Callable[[Callable[[], Instant]], Store]) -> int:
    """Replay `trace`; return the number of ops checked."""
    clock = _Clock()
    store = make_store(clock)
    bus = Recorder()
    ledger = Ledger(store, bus)
    name = trace["name"]
    for index, op in enumerate(trace["ops"]):
        where = f"{name} op {index} ({op['op']} {op.get('key')!r})"
        expect = op["expect"]
        now = Instant.parse(op["now"]) if "now" in op else None
        if now is not None:
            clock.now = now
        bus.events.clear()
        err: errors.LedgerError | None = None
        result: dict[str, Any] = {}
        try:
            result = _run_op(ledger, op, now)
        except errors.LedgerError as exc:
            err = exc
        want_err = expect.get("err")
        got_err = None if err is None else ERROR_NAMES.get(type(err), type(err).__name__)
        if got_err != want_err:
            raise AssertionError(f"{where}: error {got_err!r} ({err}), expected {want_err!r}")
        if err is not None and str(err) != expect["err_text"]:
            raise AssertionError(
                f"{where}: error text {str(err)!r}, expected {expect['err_text']!r}"
            )
        if op["op"] == "admit":
            assert result.get("ok", False) == expect["ok"], (
                f"{where}: ok {result} != {expect['ok']}"
            )
        elif op["op"] in ("claim", "takeover"):
            got_fence = result.get("fence", 0)
            assert got_fence == expect["fence"], f"{where}: fence {got_fence} != {expect['fence']}"
        elif op["op"] == "state":
            assert result["found"] == expect["found"], f"{where}: found {result['found']}"
            if expect["record"] is not None:
                diff_records(f"{where} state", [result["record"]], [expect["record"]])
        elif op["op"] == "blocked":
            got = (result["blocked"], result["blocked_by"])
            assert got == (expect["blocked"], expect["blocked_by"]), f"{where}: blocked {got}"
        if "events" in expect:
            got_events = [[e.name, e.key] for e in bus.events]
            if got_events != expect["events"]:
                raise AssertionError(f"{where}: events {got_events} != {expect['events']}")
            got_data = [e.data for e in bus.events]
            if got_data != expect["event_data"]:
                raise AssertionError(f"{where}: event data {got_data} != {expect['event_data']}")
        diff_records(f"{where} after", list(store.range()), op["after"])
    encoded = ledger.snapshot().encode().decode("utf-8")
    if encoded != trace["final_encoded"]:
        at = next(
            (
                i
                for i, (a, b) in enumerate(zip(encoded, trace["final_encoded"], strict=False))
                if a != b
            ),
            min(len(encoded), len(trace["final_encoded"])),
        )
        raise AssertionError(
            f"{name}: final_encoded differs at byte {at}: "
            f"{encoded[at - 40 : at + 40]!r} vs {trace['final_encoded'][at - 40 : at + 40]!r}"
        )
    return len(trace["ops"])


def iter_traces(prefix: str = "") -> Iterator[dict[str, Any]]:
    for name in trace_names(prefix):
        yield load_trace(name)
