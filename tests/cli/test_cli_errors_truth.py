"""Errors that say what is true, through the installed
`ledger` in fresh processes: the ledger's sentinel first (the Go package's
exact text), then the key, or the state of the record that refused the call.
The `--json` error object carries the same message, its code and exit
unchanged; the typer-free path and the typer path print the same line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.cli.output import MAX_MESSAGE
from tests.cli_support import ledger_ok as ok
from tests.cli_support import run_ledger
from tests.stores import KINDS


@pytest.fixture(params=["json", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        yield kind.url(location)


def refused(store: str, code: int, line: str, *args: str) -> None:
    """`args` exits `code` with exactly `line` on stderr, and `--json` reports
    the same message with the same exit."""
    res = run_ledger(store, *args)
    assert (res.returncode, res.stdout, res.stderr) == (code, "", line + "\n"), args
    res = run_ledger(store, "--json", *args)
    assert res.returncode == code, args
    assert json.loads(res.stdout)["error"]["message"] == line
    assert json.loads(res.stdout)["error"]["exit"] == code


def test_refusals_name_the_key_and_the_state(store: str) -> None:
    ok(store, "admit", "r4")
    fence = ok(store, "claim", "r4", "--owner", "w", "--lease", "1h").strip()
    ok(store, "complete", "r4", "--owner", "w", "--fence", fence)
    ok(store, "admit", "part-03")
    f3 = ok(store, "claim", "part-03", "--owner", "w", "--lease", "1h").strip()
    ok(store, "complete", "part-03", "--owner", "w", "--fence", f3, "--failed")
    ok(store, "admit", "merge-a", "--needs", "part-03")
    ok(store, "admit", "held")
    ok(store, "claim", "held", "--owner", "w", "--lease", "1h")
    before = ok(store, "--json", "list")

    done = "ledger: record is not claimed (r4 is completed)"
    lease = ("--owner", "w", "--lease", "1m")
    refused(store, 6, done, "claim", "r4", *lease)
    refused(store, 6, done, "run", "r4", *lease, "--", "true")
    refused(store, 6, done, "renew", "r4", "--owner", "w", "--fence", fence, "--lease", "1m")
    refused(store, 6, done, "release", "r4", "--owner", "w", "--fence", fence)
    refused(store, 6, done, "complete", "r4", "--owner", "w", "--fence", fence)
    refused(store, 6, done, "takeover", "r4", *lease)
    refused(store, 6, done, "check", "r4", "--owner", "w", "--fence", fence)
    failed = "ledger: record is not claimed (part-03 is failed)"
    refused(store, 6, failed, "claim", "part-03", *lease)
    blocked = "ledger: record is not claimed (merge-a is blocked by part-03)"
    refused(store, 6, blocked, "claim", "merge-a", *lease)
    refused(store, 6, blocked, "run", "merge-a", *lease, "--", "true")
    active = "ledger: lease is still active (held is claimed by w)"
    refused(store, 4, active, "claim", "held", *lease)
    refused(
        store,
        5,
        "ledger: fence token is stale (the current fence of r4 is 1)",
        "complete",
        "r4",
        "--owner",
        "w",
        "--fence",
        "7",
    )
    assert ok(store, "--json", "list") == before  # every refusal wrote nothing


@pytest.mark.parametrize(
    "args",
    [
        ("state", "nope"),
        ("tree", "nope"),
        ("blocked", "nope"),
        ("output", "nope"),
        ("wait", "nope", "--timeout", "1s"),
        ("cancel", "nope"),
        ("retry", "nope"),
        ("claim", "nope", "--owner", "w", "--lease", "1m"),
        ("run", "nope", "--owner", "w", "--lease", "1m", "--", "true"),
        ("complete", "nope", "--owner", "w", "--fence", "1"),
        ("renew", "nope", "--owner", "w", "--fence", "1", "--lease", "1m"),
        ("release", "nope", "--owner", "w", "--fence", "1"),
        ("takeover", "nope", "--owner", "w", "--lease", "1m"),
        ("check", "nope", "--owner", "w", "--fence", "1"),
    ],
    ids=lambda args: args[0],
)
def test_no_record_names_the_key(tmp_path: Path, args: tuple[str, ...]) -> None:
    store = tmp_path / "s"
    ok(str(store), "admit", "other")
    refused(str(store), 3, "ledger: key has no record: nope", *args)


def test_a_long_key_is_shown_on_one_line_and_clipped(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ok(str(store), "admit", "other")
    res = run_ledger(store, "state", "k" * 1024)
    assert res.returncode == 3
    assert res.stderr.startswith("ledger: key has no record: kkk")
    assert res.stderr.count("\n") == 1 and len(res.stderr) <= MAX_MESSAGE + 1


def test_a_lease_past_year_9999_is_one_ledger_line(store: str) -> None:
    """The wire format cannot hold an instant past 9999: the lease is refused
    before the store is touched, one `ledger:` line, exit 2 (as `--delay`),
    the same message in the --json object, and no claim written."""
    ok(store, "admit", "a")
    far = ("--now", "9999-12-31T23:59:59Z")
    res = run_ledger(store, *far, "claim", "a", "--owner", "w", "--lease", "5s")
    assert res.returncode == 2, res.stderr
    assert "past the year 9999" in res.stderr, res.stderr
    assert res.stderr.startswith("ledger: ") and res.stderr.count("\n") == 1, res.stderr
    as_json = run_ledger(store, "--json", *far, "claim", "a", "--owner", "w", "--lease", "5s")
    assert json.loads(as_json.stdout)["error"]["message"] == res.stderr.strip()
    assert json.loads(ok(store, "--json", "state", "a"))["Status"] == "pending"
