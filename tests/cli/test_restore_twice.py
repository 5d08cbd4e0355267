"""`ledger restore` of a snapshot that holds a key twice: refused before
anything is written (exit 8), saying the key appears twice and where, on every
durable store (the `url` fixture), through the installed `ledger`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_support import run_ledger


def test_a_key_twice_in_the_snapshot_is_named_with_both_entries(url: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    for key in ("a", "b"):
        assert run_ledger(source, "admit", key).returncode == 0
    snap = json.loads(run_ledger(source, "snapshot").stdout)
    snap["Tasks"].append(snap["Tasks"][0])  # "a" again, as entry 2
    data = json.dumps(snap).encode()
    done = run_ledger(url, "restore", "-", input=data)
    assert (done.returncode, done.stdout) == (8, "")
    twice = 'key "a" appears twice in the snapshot (entries 0 and 2)'
    assert done.stderr == f"ledger: restore: {twice}\n"
    done = run_ledger(url, "--json", "restore", "-", input=data)
    assert json.loads(done.stdout)["error"]["code"] == "restore_conflict"
    assert run_ledger(url, "admit", "z").returncode == 0
    listed = run_ledger(url, "list", "--jsonl").stdout.splitlines()
    assert [json.loads(line)["Key"] for line in listed] == ["z"]  # nothing was restored
