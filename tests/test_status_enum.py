"""The public `Status` enum and the plain strings the engine compares."""

from __future__ import annotations

import subprocess
import sys

from ledger_cli.engine import status
from tests.cli_support import subprocess_env


def test_each_member_is_the_engines_string() -> None:
    from ledger_cli import Status

    assert [str(s) for s in Status] == [
        status.PENDING, status.CLAIMED, status.COMPLETED, status.FAILED, status.BLOCKED
    ]  # fmt: skip
    assert frozenset(Status) == status.KNOWN
    assert status.Status is Status and Status("failed") is Status.FAILED


def test_status_is_loaded_when_first_asked_for() -> None:
    probe = (
        "import sys\n"
        "import ledger_cli.engine.status as st\n"
        "assert 'enum' not in sys.modules and 'ledger_cli.engine.statusenum' not in sys.modules\n"
        "from ledger_cli.engine.status import Status\n"
        "print(Status.BLOCKED.value, 'enum' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=True,
    )
    assert out.stdout.split() == ["blocked", "True"]
