"""Fixtures shared by several test files, and the one-line PostgreSQL skip summary."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stores import KINDS


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """Where the fault runs put their stores: /dev/shm when there is one (a tmpfs:
    hundreds of store copies and syncfs calls cost little there), else tmp_path."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        base = shm / f"ledger-faults-{uuid.uuid4().hex[:12]}"
        base.mkdir(mode=0o700)
        try:
            yield base
        finally:
            shutil.rmtree(base, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture(params=sorted(k for k, v in KINDS.items() if v.durable))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The `--store` URL of a fresh store of each durable kind (JSON, SQLite,
    PostgreSQL), for tests that run the installed `ledger` against it. A test
    file may override it (tests/storage/test_postgres_open.py: PostgreSQL only)."""
    kind = KINDS[str(request.param)]
    with kind.place(tmp_path) as location:
        yield kind.url(location)


def _skip_message(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Without a PostgreSQL server hundreds of tests skip for one reason: say it once,
    with how to start the server (`-rs` lists every skipped test as usual)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    from tests.sql_support import postgres_skip_reason

    reason = postgres_skip_reason()
    if reason is None:
        return
    count = sum(1 for report in skipped if _skip_message(report) == reason)
    if count:
        terminalreporter.write_line(
            f"{count} PostgreSQL tests skipped: {reason}; `-rs` lists them", yellow=True
        )
