"""A task admitted after a failure that lies behind a completed need is
blocked by that failure (docs/design.md §2.2), as it would have been had it
been admitted before the failure: a completed record passes a failure on
(§2.7), and a pending task with a failure among its transitive needs is
never ready, so left pending it would wait for ever. Through the installed
`ledger` in fresh processes, on every store; the library's `Ledger` keeps
Go's one-level check unless made with `behind_completed`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger_cli import Ledger, MemStore
from tests.cli_support import run_ledger


def ok(url: str | Path, *args: str) -> str:
    done = run_ledger(url, "--actor", "tester", *args)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def status(url: str, key: str) -> tuple[str, str]:
    rec = json.loads(ok(url, "--json", "state", key))
    return rec["Status"], rec["BlockedBy"]


def fail_behind_completed(url: str) -> None:
    """`c` failed, and `g`, which needs it, completed before (claimed by key)."""
    ok(url, "admit", "c")
    ok(url, "admit", "g", "--needs", "c")
    fence = ok(url, "claim", "g", "--owner", "w", "--lease", "1m").strip()
    ok(url, "complete", "g", "--owner", "w", "--fence", fence)
    fence = ok(url, "claim", "c", "--owner", "w", "--lease", "1m").strip()
    ok(url, "complete", "c", "--owner", "w", "--fence", fence, "--failed")


def test_an_admit_behind_a_completed_need_is_blocked_by_the_failure(url: str) -> None:
    fail_behind_completed(url)
    ok(url, "admit", "h", "--needs", "g")
    assert status(url, "h") == ("blocked", "c")
    assert run_ledger(url, "wait", "h").stdout == "blocked h by c\n"
    assert run_ledger(url, "doctor").returncode == 0
    # What needs the blocked task is blocked by it at once, as ever.
    ok(url, "admit", "i", "--needs", "h")
    assert status(url, "i") == ("blocked", "h")
    # Retrying the failure un-blocks both.
    assert ok(url, "retry", "c").splitlines() == ["retried c", "unblocked h", "unblocked i"]
    assert status(url, "h") == ("pending", "")


def test_a_batch_admit_behind_a_completed_need_is_blocked(url: str) -> None:
    fail_behind_completed(url)
    lines = b'{"key": "h", "needs": ["g"]}\n{"key": "j", "needs": ["h"]}\n'
    done = run_ledger(url, "admit", "--batch", "-", input=lines)
    assert done.returncode == 0, done.stderr
    assert (status(url, "h"), status(url, "j")) == (("blocked", "c"), ("blocked", "h"))
    assert run_ledger(url, "doctor").returncode == 0


def test_a_completed_ancestry_blocks_nothing(url: str) -> None:
    ok(url, "admit", "c")
    ok(url, "admit", "g", "--needs", "c")
    for key in ("c", "g"):
        fence = ok(url, "claim", key, "--owner", "w", "--lease", "1m").strip()
        ok(url, "complete", key, "--owner", "w", "--fence", fence)
    ok(url, "admit", "h", "--needs", "g")
    assert status(url, "h") == ("pending", "")
    assert ok(url, "claim", "--next", "--owner", "w", "--lease", "1m").split()[0] == "h"


def test_the_library_keeps_gos_one_level_check_unless_asked() -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)
    for behind, expected in ((False, "pending"), (True, "blocked")):
        led = Ledger(MemStore(), behind_completed=behind)
        led.admit("t", "c", 1, None, now)
        led.admit("t", "g", 1, None, now, "c")
        led.complete(
            "t", "g", "w", led.claim("t", "g", "w", timedelta(minutes=1), now), "completed", now
        )
        led.complete(
            "t", "c", "w", led.claim("t", "c", "w", timedelta(minutes=1), now), "failed", now
        )
        led.admit("t", "h", 1, None, now, "g")
        rec = led.state("h")
        assert rec is not None and rec.status == expected
