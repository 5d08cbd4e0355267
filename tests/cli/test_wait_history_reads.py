"""`ledger wait` reads the JSON store's history once for all the failures it
reports (docs/design.md §7.5), not once per failure: the store's read of one
key's history is a pass over the whole of history.jsonl, so a read per
failed record made `wait --all --json` cost settled times history.

No timing assertion: the command runs in this process over a JSON store
whose `read_history` calls are counted; the marks and exits it prints are
checked to be the same as each key's alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.stores import open_store
from ledger_cli.stores.jsonfile.store import JsonFileStore
from tests.cli_support import Cli

FAILED = [f"f{i}" for i in range(6)]
CANCELLED = [f"c{i}" for i in range(4)]


def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Cli, list[str | None]]:
    """A JSON store with six failed keys (no attempt), four cancelled ones,
    their blocked dependents and one pending key; and the list `read_history`
    appends the key of each call to once the store is set up."""
    store = open_store(str(tmp_path / "s"))
    assert isinstance(store, JsonFileStore)
    cli = Cli(store, monkeypatch)
    cli.ok("admit", "pending")
    for key in FAILED:
        cli.ok("admit", key)
        fence = cli.ok("claim", key, "--owner", "w", "--lease", "1h").stdout.strip()
        cli.ok("complete", key, "--owner", "w", "--fence", fence, "--failed")
    for key in CANCELLED:
        cli.ok("admit", key)
        cli.ok("admit", f"after-{key}", "--needs", key)
        cli.ok("cancel", key, "--reason", f"why {key}")
    calls: list[str | None] = []
    read = JsonFileStore.read_history

    def counted(self: JsonFileStore, key: str | None = None) -> Iterator[HistoryEntry]:
        calls.append(key)
        return read(self, key)

    monkeypatch.setattr(JsonFileStore, "read_history", counted)
    return cli, calls


def test_wait_all_json_reads_the_history_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--json wait --all` timing out lists every failed and blocked record
    with one read of the history, the cancelled ones' exits null."""
    cli, calls = _store(tmp_path, monkeypatch)
    res = cli("--json", "wait", "--all", "--timeout", "0.01s", "--interval", "0.01s")
    assert res.code == 124, res.stderr
    doc = res.json()
    assert doc["unsettled"] == ["pending"]
    settled = {item["key"]: item for item in doc["settled"]}
    assert sorted(settled) == sorted([*FAILED, *CANCELLED, *(f"after-{c}" for c in CANCELLED)])
    assert all(item["exit"] is None for item in settled.values())
    assert len(calls) == 1, calls


def test_wait_keys_reads_the_history_once_a_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`wait KEY…` on failed and cancelled keys: each line as for the key
    alone (the cancel's mark), one read of the history for all of them."""
    cli, calls = _store(tmp_path, monkeypatch)
    res = cli("wait", *FAILED, *CANCELLED)
    assert res.code == 1, res.stderr
    assert res.stdout.splitlines() == [
        *(f"failed {key}" for key in FAILED),
        *(f"failed {key} (cancelled by tester: why {key})" for key in CANCELLED),
    ]
    assert len(calls) == 1, calls
