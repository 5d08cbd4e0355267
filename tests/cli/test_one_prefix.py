"""Every error line carries `ledger:` once (docs/design.md §4.5), also when
it wraps another error's message: a batch line's (`ledger: line N: …`), a
snapshot entry's (`ledger: snapshot entry I: …`, Go's own text carrying the
prefix twice), a damaged record file's (`ledger: store: PATH: …`), and
`ledger run`'s warnings (`ledger: recording the run of K: …`).

Fresh processes on the JSON store; the run's warnings in process, the store
failing on cue.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import run_ledger

Record = dict[str, Any]
NOT_RFC3339 = "is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)"


@pytest.mark.parametrize(
    ("line", "code", "message"),
    [
        ('{"key":"a","not_before":"yesterday"}', 2, f'"not_before" "yesterday" {NOT_RFC3339}'),
        (
            '{"key":"a","not_before":"2026-13-01T00:00:00Z"}',
            2,
            f'"not_before" "2026-13-01T00:00:00Z" {NOT_RFC3339}',
        ),
        ('{"key":""}', 2, "key must not be empty"),
        ('{"key":"a","needs":["a"]}', 8, 'task "a" names itself in Needs'),
        ('{"key":"a","priority":5000}', 2, '"priority" must be an integer from -1000 to 1000'),
    ],
)
def test_a_batch_line_error_has_one_prefix(
    tmp_path: Path, line: str, code: int, message: str
) -> None:
    res = run_ledger(tmp_path / "s", "admit", "--batch", "-", input=(line + "\n").encode())
    assert (res.returncode, res.stderr) == (code, f"ledger: line 1: {message}\n")


def test_a_snapshot_entry_error_has_one_prefix(tmp_path: Path) -> None:
    source = tmp_path / "a"
    assert run_ledger(source, "admit", "k").returncode == 0
    snap = json.loads(run_ledger(source, "snapshot").stdout)
    snap["Tasks"][0]["Status"] = "bogus"
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    message = 'ledger: snapshot entry 0: task "k" has an unknown status "bogus"'
    res = run_ledger(tmp_path / "b", "restore", str(path))
    assert (res.returncode, res.stderr) == (8, message + "\n")
    res = run_ledger(tmp_path / "b", "--json", "restore", str(path))
    assert res.returncode == 8
    assert json.loads(res.stdout)["error"]["message"] == message
    assert run_ledger(tmp_path / "b", "list", "--jsonl").stdout == ""  # nothing written


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (
            lambda rec: {**rec, "Status": "bogus"},
            'invalid record: task "a" has an unknown status "bogus"',
        ),
        (lambda rec: {**rec, "Fence": "x"}, "corrupt record: decode: "),
    ],
)
def test_a_damaged_record_file_has_one_prefix(
    tmp_path: Path, damage: Callable[[Record], Record], what: str
) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    (record,) = (store / "records").rglob("*.json")
    rec = json.loads(record.read_text())
    del rec["Sum"]  # a record without our checksum: read by the Go-compatible decoder
    record.write_text(json.dumps(damage(rec)))
    res = run_ledger(store, "state", "a")
    assert res.returncode == 9
    assert res.stderr.startswith(f"ledger: store: {record}: {what}"), res.stderr
    assert res.stderr.count("ledger:") == 1, res.stderr


OUTAGE = "ledger: postgres commit (w@h:5432/db): the connection was lost"


def test_a_run_warning_wrapping_a_store_error_has_one_prefix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger run`'s warnings that the run or its attempt could not be recorded
    (a store outage in a drain) wrap the store's message: `ledger:` once. In
    process, the store failing on cue (the output's flush through a real
    outage: tests/faults/test_faults_outage_sqlite.py)."""
    from types import SimpleNamespace

    from ledger_cli.cli.commands.run import attempts
    from ledger_cli.errors import StoreError
    from ledger_cli.stores import attemptlog

    def failing(store: object) -> object:
        raise StoreError(OUTAGE)

    monkeypatch.setattr(attemptlog, "attempt_log", failing)
    session: Any = SimpleNamespace(store=None, settings=SimpleNamespace(now=None, json=False))
    attempts.AttemptRecorder(session, "oc-59", 1, "w", 1, 0)
    attempts.drop_begun(session, "oc-59", 2)
    detail = OUTAGE.removeprefix("ledger: ")
    assert capsys.readouterr().err.splitlines() == [
        f"ledger: recording the run of oc-59: {detail} (the command goes on)",
        f"ledger: removing attempt 2 of oc-59: {detail}",
    ]
