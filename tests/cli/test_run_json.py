"""`ledger --json run`: stdout holds only the result's JSON (a script pipes it
to jq), the command's own stdout goes to stderr; with output kept or not
(`--keep-output 0` connects the command straight through), on the typer
path as on the fast path. Real processes, as a script runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_support import run_ledger


@pytest.mark.parametrize("keep", [[], ["--keep-output", "0"]])
@pytest.mark.parametrize("where", ["before", "after"])  # --json before run: the fast path
def test_json_run_keeps_stdout_for_the_result(tmp_path: Path, keep: list[str], where: str) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "k").returncode == 0
    args = ["run", "k", "--owner", "w", "--lease", "1m", *keep]
    argv = ["--json", *args] if where == "before" else [*args, "--json"]
    res = run_ledger(store, *argv, "--", "sh", "-c", "echo hi; echo oops >&2")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)  # the whole of stdout is one JSON document
    assert (doc["key"], doc["status"], doc["exit"]) == ("k", "completed", 0)
    assert sorted(res.stderr.splitlines()) == ["hi", "oops"]
    if not keep:
        shown = run_ledger(store, "output", "k")
        assert shown.returncode == 0, shown.stderr
        assert sorted(shown.stdout.splitlines()) == ["hi", "oops"]  # still kept, both


def test_json_drain_prints_one_result_per_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    res = run_ledger(
        store, "--json", "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--",
        "sh", "-c", "echo $LEDGER_KEY",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert [json.loads(line)["key"] for line in res.stdout.splitlines()] == ["a", "b"]
    assert res.stderr.splitlines() == ["a", "b"]


def test_run_without_json_keeps_the_command_on_stdout(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "k").returncode == 0
    res = run_ledger(store, "run", "k", "--owner", "w", "--lease", "1m", "--", "echo", "hi")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "hi\n"


@pytest.mark.parametrize(("command", "code"), [("/no/such/command", 127), ("/", 126)])
def test_json_run_of_a_command_that_cannot_start_prints_its_error(
    tmp_path: Path, command: str, code: int
) -> None:
    """--json promises JSON on stdout, errors included: here `cannot_run`."""
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    res = run_ledger(store, "--json", "run", "a", "--owner", "w", "--lease", "30s", "--", command)
    assert res.returncode == code, res.stderr
    error = json.loads(res.stdout)["error"]
    assert (error["code"], error["exit"]) == ("cannot_run", code)
    assert error["message"] == res.stderr.strip()
    state = json.loads(run_ledger(store, "--json", "state", "a").stdout)
    assert state["Status"] == "pending"  # released for someone who can run it
