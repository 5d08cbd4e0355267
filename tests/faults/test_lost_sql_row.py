"""An SQL store's row of `ledger_tasks` deleted by hand is lost primary data,
as a JSON store's deleted record file (docs/design.md §3.3, docs/guide.md
§doctor): `ledger doctor` names each key the history has writes for that is
neither in `ledger_tasks` nor pruned (exit 9), and an admit of the key
starts at or above the highest fence its history shows, so a claim never
hands out again a fence the lost row granted and the worker still holding
it is fenced off (exit 5). A dropped `ledger_history` is a problem too. Each
command is a fresh `ledger` process, on SQLite and PostgreSQL (which skips
when unreachable)."""

from __future__ import annotations

import json

from tests.cli_support import ledger_ok, run_ledger, run_sane
from tests.stores import execute_sql as _execute
from tests.stores import sql_url

url = sql_url  # the fixture, under the name its tests take

HELD = 3
"""The fence worker `old` holds when the row is deleted."""


def _held_then_deleted(url: str) -> None:
    """`job` claimed up to fence HELD by `old` (its lease live), `after`
    needing it; then job's row deleted by hand."""
    ledger_ok(url, "admit", "job")
    ledger_ok(url, "admit", "after", "--needs", "job")
    for fence in range(1, HELD):
        assert ledger_ok(url, "claim", "job", "--owner", "old", "--lease", "1h") == f"{fence}\n"
        ledger_ok(url, "release", "job", "--owner", "old", "--fence", str(fence))
    assert ledger_ok(url, "claim", "job", "--owner", "old", "--lease", "1h") == f"{HELD}\n"
    _execute(url, "DELETE FROM ledger_tasks WHERE key = 'job'")


def _doctor(url: str) -> tuple[int, dict[str, list[str]]]:
    res = run_sane(url, "doctor", "--json")
    return res.returncode, json.loads(res.stdout)


def test_doctor_names_a_row_deleted_by_hand(url: str) -> None:
    _held_then_deleted(url)
    code, found = _doctor(url)
    assert code == 9
    assert found["problems"] == [
        "record job is lost: its row in ledger_tasks is missing while the history has its"
        " writes (restore it from a snapshot or backup with `ledger restore`, or accept the"
        " loss by admitting the key again; either starts it above every fence its history"
        " shows. An SQL store has no --drop-damaged)"
    ]
    assert "after: needs job, which is lost (see above)" in found["notes"]
    # Admitting the key again accepts the loss: no problem left.
    ledger_ok(url, "admit", "job")
    assert _doctor(url)[0] == 0


def test_an_admit_after_the_deletion_never_hands_out_a_granted_fence(url: str) -> None:
    _held_then_deleted(url)
    ledger_ok(url, "admit", "job")
    assert ledger_ok(url, "claim", "job", "--owner", "new", "--lease", "1h") == f"{HELD + 1}\n"
    for fence in range(1, HELD + 1):
        res = run_sane(url, "complete", "job", "--owner", "old", "--fence", str(fence))
        assert res.returncode == 5, (fence, res.stdout, res.stderr)
        assert res.stderr.startswith("ledger: fence token is stale"), res.stderr
    state = json.loads(ledger_ok(url, "--json", "state", "job"))
    assert (state["Status"], state["Owner"], state["Fence"]) == ("claimed", "new", HELD + 1)


def test_a_batch_admit_after_the_deletion_starts_above_the_history(url: str) -> None:
    """`admit --batch` inserts its keys in blocks: each still starts at or above its
    key's history, and a key without history at fence 0."""
    _held_then_deleted(url)
    res = run_ledger(url, "admit", "--batch", "-", input=b'{"key":"job"}\n{"key":"fresh"}\n')
    assert res.returncode == 0, res.stderr
    assert json.loads(ledger_ok(url, "--json", "state", "job"))["Fence"] == HELD
    assert json.loads(ledger_ok(url, "--json", "state", "fresh"))["Fence"] == 0


def test_a_dropped_history_table_is_a_problem(url: str) -> None:
    ledger_ok(url, "admit", "x")
    _execute(url, "DROP TABLE ledger_history")
    code, found = _doctor(url)
    assert code == 9
    assert len(found["problems"]) == 1, found
    problem = found["problems"][0]
    assert problem.startswith("ledger_history was dropped and made again empty at "), problem
    assert "DELETE FROM ledger_history WHERE event = 'ledger.history_lost'" in problem
    # Accepting the loss as the problem says: doctor is content again.
    _execute(url, "DELETE FROM ledger_history WHERE event = 'ledger.history_lost'")
    assert _doctor(url)[0] == 0
