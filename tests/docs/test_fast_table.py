"""The fast path's option table (cli/fast.py) is what cli/fastgen.py
generates from the Typer declarations: the declarations are the one source
of every command's options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger_cli.cli import fastgen

REQUIRED_OWNER = '"--owner": Opt("owner", required=True)'


def test_the_fast_table_is_generated_from_the_declarations() -> None:
    source = fastgen.FAST.read_text()
    assert fastgen.rewritten(source) == source, "run: python -m ledger_cli.cli.fastgen"


def test_a_stale_table_is_found_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = fastgen.FAST.read_text()
    assert REQUIRED_OWNER in good
    stale = tmp_path / "fast.py"
    stale.write_text(good.replace(REQUIRED_OWNER, '"--owner": Opt("owner")'))
    monkeypatch.setattr(fastgen, "FAST", stale)
    assert fastgen.main(["--check"]) == 1
    assert fastgen.main([]) == 0
    assert stale.read_text() == good
    assert fastgen.main(["--check"]) == 0


def test_the_check_runs_as_a_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ledger_cli.cli.fastgen", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
