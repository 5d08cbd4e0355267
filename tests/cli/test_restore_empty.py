"""`ledger restore` of a snapshot without records into a store that does not
exist yet leaves an empty store, which `list`, `stats` and `doctor` read
(exit 0) as after any other restore, on every durable store (the `url`
fixture), through the installed `ledger`."""

from __future__ import annotations

from tests.cli_support import run_ledger


def test_an_empty_snapshot_restored_leaves_an_empty_store(url: str) -> None:
    done = run_ledger(url, "restore", "-", input=b'{"Tasks":[]}')
    assert (done.returncode, done.stdout, done.stderr) == (0, "restored 0 records\n", "")
    for args in (("list", "--jsonl"), ("stats", "--json"), ("doctor",)):
        read = run_ledger(url, *args)
        assert (read.returncode, read.stderr) == (0, ""), args
    again = run_ledger(url, "restore", "-", input=b'{"Tasks":[]}')
    assert again.returncode == 0, again.stderr
