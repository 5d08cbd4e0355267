"""`ledger stats` describes one instant (docs/design.md §6.5): while drain
workers claim and complete the tasks of a queue with a limit, every
`stats --json` output, a fresh process each, agrees with itself: every task
is in that queue, so the store's pending and claimed counts are the queue's,
the queue never shows more claimed than its limit, its held slots are its
claimed tasks (leases outlive the run), and the counts add up to the tasks
admitted. Read figure by figure, a commit between two reads broke each of
these (a queue claimed 3 under a limit of 2) on every store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli_support import ledger_ok, run_ledger, start_ledger

TASKS = 300
WORKERS = 4
LIMIT = 2
SAMPLES = 30
"""Outputs read while the drain still has tasks claimed, at the least."""


def contradictions(body: dict[str, Any]) -> list[str]:
    """What in one `stats --json` output disagrees with the rest of it."""
    counts, row = body["counts"], body["queues"].get("qa")
    found = []
    if sum(counts.values()) != TASKS:
        found.append(f"counts add up to {sum(counts.values())}, not {TASKS}")
    if row is None:
        return [*found, "no queue qa"] if counts["pending"] + counts["claimed"] else found
    for status in ("pending", "claimed"):
        if counts[status] != row[status]:
            found.append(f"{status}: {counts[status]} in the store, {row[status]} in qa")
    if row["claimed"] > LIMIT:
        found.append(f"qa claimed {row['claimed']} over its limit {LIMIT}")
    if row["held"] != row["claimed"]:
        found.append(f"qa held {row['held']}, claimed {row['claimed']}")
    return found


def test_stats_while_draining_is_one_instant(url: str, tmp_path: Path) -> None:
    ledger_ok(url, "limit", "qa", str(LIMIT))
    batch = "".join(json.dumps({"key": f"t{i:04d}", "queue": "qa"}) + "\n" for i in range(TASKS))
    res = run_ledger(url, "admit", "--batch", "-", input=batch.encode())
    assert res.returncode == 0, res.stderr
    workers = [
        start_ledger(
            url,
            *("run", "--next", "--drain", "--queue", "qa", "--owner", f"w{n}"),
            *("--lease", "10m", "--", "true"),
            cwd=tmp_path,
        )
        for n in range(WORKERS)
    ]
    seen: list[str] = []
    busy = 0
    try:
        while any(w.poll() is None for w in workers) or busy < SAMPLES:
            out = run_ledger(url, "--json", "stats")
            assert out.returncode == 0, out.stderr
            body = json.loads(out.stdout)
            seen += [f"{bad}: {body}" for bad in contradictions(body)]
            if body["counts"]["claimed"]:
                busy += 1
            elif all(w.poll() is not None for w in workers):
                break  # drained before enough busy samples: judged on what was read
    finally:
        for w in workers:
            w.wait(timeout=120)
    assert not seen, "\n".join(seen[:5])
    for w in workers:  # 7: a worker that found the queue at its limit or done
        assert w.returncode in (0, 7), w.stderr.read() if w.stderr else ""
    assert json.loads(ledger_ok(url, "--json", "stats"))["counts"]["completed"] == TASKS
