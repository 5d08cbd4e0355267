"""`ledger --version` / `-V`: `ledger_cli X.Y.Z` from the package's one version
(`ledger_cli.__version__`, which pyproject.toml reads), exit 0, on both paths;
alone on the line it is the fast path's and imports neither typer nor the store."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

import ledger_cli
from tests.cli_support import make_cli, subprocess_env

EXPECTED = f"ledger_cli {ledger_cli.__version__}"

PROBE = """
import json, sys
from ledger_cli.cli import app
sys.argv = ["ledger", sys.argv[1]]
try:
    app.main()
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in ("typer", "click", "rich", "ledger_cli.stores", "importlib.metadata")
               if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def test_the_version_is_the_installed_distributions() -> None:
    assert importlib.metadata.version("ledger_cli") == ledger_cli.__version__
    assert ledger_cli.__version__.count(".") == 2


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_alone_is_the_fast_path(flag: str) -> None:
    res = subprocess.run(
        [sys.executable, "-c", PROBE, flag],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=True,
    )
    first, last = res.stdout.splitlines()
    assert first == EXPECTED
    assert json.loads(last) == {"code": 0, "heavy": []}


@pytest.mark.parametrize(
    "args",
    [["--version"], ["-V"], ["--store", "memory:", "--version"], ["--json", "-V"]],
)
def test_version_on_the_typer_path(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger_cli.cli.app import run_typer

    assert run_typer(args) == 0
    cli = make_cli(monkeypatch)
    out = cli(*args)
    assert (out.code, out.stdout, out.stderr) == (0, EXPECTED + "\n", "")


def test_version_is_in_the_groups_help(monkeypatch: pytest.MonkeyPatch) -> None:
    out = make_cli(monkeypatch)("--help")
    assert "-V, --version" in out.stdout
