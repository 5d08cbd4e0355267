"""A batch's queues and schedules on the JSON store, where they are written
with the batch's commit (stores/jsonfile/keyfiles.py): what fresh `ledger`
processes read back after `admit --batch` of queued and prioritized keys
(`claim --next --queue` order, `stats --json` queues, `list`, `state`) is
what the same commands read from SQLite, whose side tables are written in
the batch's transaction; and `doctor` finds no problem.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_support import T0, run_ledger
from tests.cli_support import ledger_ok as ok

LATER = "2026-01-02T04:04:05Z"  # T0 + 1h: past every not-before below

SMALL = "".join(
    [
        '{"key":"s1","queue":"q","priority":3}\n',
        '{"key":"s2","queue":"q"}\n',
        '{"key":"s3","queue":"r","not_before":"2026-01-02T03:30:00Z"}\n',
        '{"key":"s4","priority":-2}\n',
        '{"key":"s5"}\n',
    ]
)
"""A small batch (one wal.log frame)."""

LARGE = "".join(
    json.dumps(
        {"key": f"b{i:02d}", "queue": "qr"[i % 2], "priority": i % 5}
        | ({"not_before": "2026-01-02T03:20:00Z"} if i % 7 == 0 else {})
    )
    + "\n"
    for i in range(40)
)
"""A large batch (journal.json), across two queues, priorities and not-befores."""

DUPLICATES = "".join(
    [
        '{"key":"d1","queue":"q","priority":1}\n',
        '{"key":"d1","queue":"r","priority":1}\n',  # the queue staged above: a conflict
        '{"key":"d1","queue":"q","priority":1}\n',  # the same: a duplicate
        '{"key":"d2","queue":"r"}\n',
    ]
)


def _stores(tmp_path: Path) -> dict[str, str]:
    return {"json": str(tmp_path / "store"), "sqlite": f"sqlite:{tmp_path / 'ledger.db'}"}


def _admit_batch(url: str, lines: str) -> tuple[int, str]:
    res = run_ledger(url, "--now", T0, "admit", "--batch", "-", input=lines.encode())
    return res.returncode, res.stdout


def _drain(url: str, queue: str, now: str) -> list[str]:
    """The keys `claim --next --queue QUEUE` hands out, in order, until none is ready."""
    out = []
    while True:
        res = run_ledger(
            url, "--now", now, "claim", "--next", "--queue", queue, "--owner", "w", "--lease", "1h"
        )
        if res.returncode == 7:
            return out
        assert res.returncode == 0, res.stderr
        out.append(res.stdout.split()[0])


def _reads(url: str, now: str) -> dict[str, object]:
    stats = json.loads(ok(url, "--now", now, "--json", "stats"))
    return {
        "queues": stats["queues"],
        "ready": stats["ready"],
        "scheduled": stats["scheduled"],
        "list": ok(url, "--now", now, "list"),
        "state": [
            json.loads(ok(url, "--now", now, "--json", "state", key))
            for key in ("s1", "s3", "b07", "d1")
        ],
    }


def test_a_batch_of_queued_and_prioritized_keys_reads_back_as_on_sqlite(tmp_path: Path) -> None:
    stores = _stores(tmp_path)
    seen: dict[str, list[object]] = {}
    for kind, url in stores.items():
        got: list[object] = [_admit_batch(url, SMALL), _admit_batch(url, LARGE)]
        got.append(_admit_batch(url, DUPLICATES))
        got.append(_reads(url, T0))
        got.append(_drain(url, "q", T0))  # the due ones only, highest priority first
        got.append(_reads(url, LATER))
        got.append(_drain(url, "r", LATER))
        got.append(_drain(url, "default", LATER))
        seen[kind] = got
        if kind == "json":
            doctor = run_ledger(url, "doctor")
            assert doctor.returncode == 0 and "no problems found" in doctor.stdout, doctor.stdout
    assert seen["json"] == seen["sqlite"]
    code, out = seen["json"][2]  # type: ignore[misc]
    assert code == 8 and out.split("\n")[:3] == ["admitted d1", "conflict d1", "duplicate d1"]
    q_first = seen["json"][4]
    # priority 4 first, then by key (b14: not due yet); then the small batch's s1 (3)
    assert isinstance(q_first, list) and q_first[:3] == ["b04", "b24", "b34"], q_first
    assert "b14" not in q_first and q_first.index("s1") < q_first.index("s2"), q_first


def test_a_rebase_moves_a_ready_task_to_its_new_queue_and_order(tmp_path: Path) -> None:
    """A rebase that changes an existing record's queue and priority: `claim
    --next` finds it in the new queue, in its new place, and not in the old."""
    for url in _stores(tmp_path).values():
        for key in ("m1", "m2", "m3"):
            ok(url, "--now", T0, "admit", key, "--queue", "old")
        ok(url, "--now", T0, "admit", "n1", "--queue", "new", "--priority", "1")
        ok(url, "--now", T0, "admit", "m2", "--seq", "2", "--queue", "new", "--priority", "5")
        ok(url, "--now", T0, "admit", "m3", "--seq", "2", "--queue", "old", "--priority", "2")
        assert _drain(url, "new", T0) == ["m2", "n1"], url
        assert _drain(url, "old", T0) == ["m3", "m1"], url
    doctor = run_ledger(_stores(tmp_path)["json"], "doctor")
    assert doctor.returncode == 0 and "no problems found" in doctor.stdout, doctor.stdout


@pytest.mark.parametrize("lines", [SMALL, LARGE], ids=["frame", "journal"])
def test_a_batch_that_fails_leaves_no_queue_or_schedule(tmp_path: Path, lines: str) -> None:
    """A batch refused whole (a bad line after queued ones) writes no side file:
    the keys are not admitted, and admitting them later without a queue or a
    priority leaves them in `default` at priority 0."""
    store = tmp_path / "store"
    ok(store, "--now", T0, "admit", "first")
    res = run_ledger(
        store, "--now", T0, "admit", "--batch", "-", input=(lines + '{"key":7}\n').encode()
    )
    assert res.returncode == 2, res.stderr
    assert not any((store / d).exists() and any((store / d).iterdir()) for d in ("schedule",))
    qdir = store / "queue"
    assert not (qdir.exists() and any(p.suffix == ".json" for p in qdir.iterdir()))
    ok(store, "--now", T0, "admit", "s1")
    state = json.loads(ok(store, "--now", T0, "--json", "state", "s1"))
    assert "Queue" not in state and "Priority" not in state, state  # default, 0
