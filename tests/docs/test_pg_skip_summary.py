"""Without a PostgreSQL server the test run says so in one line (tests/conftest.py),
and `-rs` still lists every skipped test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nobody listens there once the socket is closed


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # under CI they would fail
    env["LEDGER_TEST_POSTGRES_URL"] = f"postgresql://ledger:ledger@127.0.0.1:{_closed_port()}/x"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_an_unreachable_server_is_one_line_and_rs_lists_each_skip() -> None:
    res = _pytest("tests/storage/test_postgres_store.py")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    summary = [line for line in lines if "PostgreSQL tests skipped" in line]
    assert len(summary) == 1, res.stdout
    assert "is not reachable" in summary[0] and "bash .ci/postgres.sh" in summary[0]
    assert not [line for line in lines if line.startswith("SKIPPED")], res.stdout
    count = int(summary[0].split()[0])
    assert f"{count} skipped" in lines[-1]

    listed = _pytest("-rs", "tests/storage/test_postgres_store.py")
    skipped = [line for line in listed.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all("is not reachable" in line for line in skipped)
    assert sum(int(line.split("[")[1].split("]")[0]) for line in skipped) == count
