"""`ledger run [OPTIONS] -- KEY -- CMD…`: a key that starts with `-` (which
the options would take for an option) reaches `run` as it reaches `claim`
after `--` (docs/design.md §5.2), while every other form keeps its meaning: a
KEY before the `--`, `--next`, a command that holds a `--` of its own.

Fresh processes on the JSON store, through the fast path and through the
Typer app (the fast path turned off in the process: `TYPER_PATH`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, subprocess_env

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion
TYPER_PATH = (
    "import sys; from ledger_cli.cli import app, fast; "
    "fast.parse = lambda args: None; sys.argv[0] = 'ledger'; app.main()"
)
SHOW = ["sh", "-c", 'printf "%s|" "$LEDGER_KEY" "$@"', "sh"]  # the key, then the arguments
LEASE = ["--owner", "w", "--lease", "1m"]

Ledger = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(params=["fast", "typer"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Ledger:
    store = tmp_path / "s"
    head = [*ledger_cmd()] if request.param == "fast" else [*ledger_cmd()[:1], "-c", TYPER_PATH]

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*head, "--store", str(store), *args],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=EXIT_TIMEOUT,
            check=False,
        )

    return call


def _status(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr
    status: str = json.loads(res.stdout)["Status"]
    return status


def test_a_key_starting_with_a_dash_goes_between_two_separators(ledger: Ledger) -> None:
    call = ledger
    for key in ("-x", "--y"):
        assert call("admit", "--", key).returncode == 0
    res = call("run", *LEASE, "--", "-x", "--", *SHOW, "a", "--", "b")
    assert (res.returncode, res.stdout, res.stderr) == (0, "-x|a|--|b|", "")
    assert _status(call("--json", "state", "--", "-x")) == "completed"
    res = call("--json", "run", *LEASE, "--", "--y", "--", "false")
    assert res.returncode == 1
    assert json.loads(res.stdout)["key"] == "--y"
    assert _status(call("--json", "state", "--", "--y")) == "failed"


def test_the_other_forms_keep_their_meaning(ledger: Ledger) -> None:
    call = ledger
    for key in ("k", "n"):
        assert call("admit", key).returncode == 0
    res = call("run", "k", *LEASE, "--", *SHOW, "--", "b")  # KEY first: the rest is the command
    assert (res.returncode, res.stdout) == (0, "k|--|b|"), res.stderr
    res = call("run", "--next", *LEASE, "--", *SHOW, "--", "b")  # --next: likewise
    assert (res.returncode, res.stdout) == (0, "n|--|b|"), res.stderr
    assert call("admit", "--", "-z").returncode == 0
    for args, message in (
        (["--", "-z"], "ledger: run needs a KEY (or --next)"),  # no second `--`
        (
            ["--", "-z", "--"],
            "ledger: run needs a command after --, e.g. ledger run K ... -- ./job.sh",
        ),
        (["--", "", "--", "true"], "ledger: key must not be empty"),
    ):
        res = call("run", *LEASE, *args)
        assert (res.returncode, res.stderr) == (2, message + "\n"), args
    assert _status(call("--json", "state", "--", "-z")) == "pending"
