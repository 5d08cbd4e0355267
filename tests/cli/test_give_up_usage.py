"""`--give-up-after` rides out a store outage only while a command waits for
a task (`--wait`) or drains (`--drain`): elsewhere it would be accepted and do
nothing, so it is a usage error (exit 2, one line, nothing written), as
`--wait` without `--next` is. A single run's renewals and outcome are bound
by its lease instead (docs/guide.md, "Store outages").

Fresh processes of the installed CLI on the JSON store; the fast path and the
typer path (`claim … -- KEY`, which the fast path leaves to typer) alike.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_support import ledger_ok as ok
from tests.cli_support import run_ledger

LEASE = ("--owner", "w", "--lease", "1m")
CLAIM = "ledger: --give-up-after goes with --wait\n"
RUN = "ledger: --give-up-after goes with --wait or --drain\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["claim", "--next", *LEASE, "--give-up-after", "5s"], CLAIM),
        (["claim", "a", *LEASE, "--give-up-after", "5s"], CLAIM),
        (["claim", *LEASE, "--give-up-after", "5s", "--", "a"], CLAIM),  # the typer path
        (["run", "a", *LEASE, "--give-up-after", "1s", "--", "true"], RUN),
        (["run", "--next", *LEASE, "--give-up-after=1s", "--", "true"], RUN),
    ],
)
def test_give_up_after_without_wait_or_drain_is_a_usage_error(
    tmp_path: Path, args: list[str], message: str
) -> None:
    store = tmp_path / "s"
    ok(store, "admit", "a")
    res = run_ledger(store, *args)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", message)
    res = run_ledger(store, "--json", *args)
    assert res.returncode == 2
    assert json.loads(res.stdout)["error"]["message"] == message.strip()
    assert json.loads(ok(store, "list", "--jsonl"))["Status"] == "pending"  # nothing written


@pytest.mark.parametrize(
    "args",
    [
        ["claim", "--next", *LEASE, "--wait", "0s", "--give-up-after", "5s"],
        ["run", "--next", *LEASE, "--wait", "0s", "--give-up-after", "1s", "--", "true"],
        ["run", "--next", "--drain", *LEASE, "--give-up-after", "1s", "--", "true"],
    ],
)
def test_give_up_after_with_wait_or_drain_is_taken(tmp_path: Path, args: list[str]) -> None:
    store = tmp_path / "s"
    ok(store, "admit", "a")
    res = run_ledger(store, *args)
    assert res.returncode == 0, res.stderr
