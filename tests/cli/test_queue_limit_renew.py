"""A queue's limit holds for a renewal of an expired lease (docs/design.md
§8.7): the expired lease freed its slot, another claim took it, and the
renewal is refused (exit 4, nothing written) rather than leave two live
leases in a queue of one. A live lease renews as before. Fresh `ledger`
processes on a fixed clock (`--now`)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.cli_support import run_ledger, start_ledger

T0 = "2026-01-02T03:04:05Z"
T3 = "2026-01-02T03:04:08Z"  # T0 + 3 s: past a 2 s lease


@pytest.mark.parametrize("name", ["s", "s.db"], ids=["json", "sqlite"])
def test_renewing_an_expired_lease_in_a_full_queue_is_refused(tmp_path: Path, name: str) -> None:
    store = tmp_path / name

    def ok(*args: str) -> str:
        res = run_ledger(store, *args)
        assert res.returncode == 0, (args, res.stderr)
        return res.stdout

    ok("admit", "db-1", "--queue", "db")
    ok("admit", "db-2", "--queue", "db")
    ok("limit", "db", "1")
    fence = ok("--now", T0, "claim", "db-1", "--owner", "w1", "--lease", "2s").strip()
    ok("--now", T3, "claim", "db-2", "--owner", "w2", "--lease", "60s")
    before = ok("--json", "state", "db-1")
    renew = ("renew", "db-1", "--owner", "w1", "--fence", fence, "--lease", "60s")
    refused = run_ledger(store, "--now", T3, *renew)
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr == "ledger: queue db is at its limit (1 of 1 held)\n"
    assert ok("--json", "state", "db-1") == before  # nothing written
    held = json.loads(ok("--now", T3, "--json", "stats", "--queue", "db"))["queues"]["db"]
    assert held["held"] == 1
    # The other lease ends: the slot is free, and the renewal lands.
    ok("--now", T3, "release", "db-2", "--owner", "w2", "--fence", "1")
    ok("--now", T3, *renew)


@pytest.mark.parametrize("name", ["s", "s.db"], ids=["json", "sqlite"])
def test_a_live_lease_renews_in_a_full_queue(tmp_path: Path, name: str) -> None:
    store = tmp_path / name
    assert run_ledger(store, "admit", "a", "--queue", "q").returncode == 0
    assert run_ledger(store, "limit", "q", "1").returncode == 0
    claim = run_ledger(store, "--now", T0, "claim", "a", "--owner", "w", "--lease", "5s")
    renew = ("renew", "a", "--owner", "w", "--fence", claim.stdout.strip(), "--lease", "5s")
    assert run_ledger(store, "--now", T3, *renew).returncode == 0


def test_run_tells_a_lease_lost_to_a_full_queue(tmp_path: Path) -> None:
    """`ledger run` stopped past its lease while another claim took the queue's
    only slot: its renewal is refused (exit 4 inside), which it reports as a
    lost lease, exit 5, saying the command was stopped."""
    store = tmp_path / "s"
    lease = 1.0
    setup = (("limit", "db", "1"), ("admit", "a", "--queue", "db"), ("admit", "b", "--queue", "db"))
    for args in setup:
        assert run_ledger(store, *args).returncode == 0
    proc = start_ledger(
        store, "run", "a", "--owner", "w1", "--lease", f"{lease}s", "--", "sleep", "30",
        cwd=tmp_path, session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60 * lease
        while json.loads(run_ledger(store, "--json", "state", "a").stdout)["Status"] != "claimed":
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(lease / 10)
        os.kill(proc.pid, signal.SIGSTOP)  # its lease runs out while it cannot renew
        claim = ("claim", "b", "--owner", "w2", "--lease", "1m")
        while run_ledger(store, *claim).returncode != 0:  # 4 until a's lease is over
            assert time.monotonic() < deadline
            time.sleep(lease / 10)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=60 * lease)
    assert proc.returncode == 5, err
    assert err.count("\n") == 1 and "the command was stopped" in err, err
