"""`ledger tree` with pruned needs (docs/design.md §6.4): a pruned record keeps
its status, so `tree` shows it, marked pruned, instead of "never admitted", and
a task blocked by a pruned failure is in the overview of failures. Through the
installed `ledger` on every durable store (the `url` fixture)."""

from __future__ import annotations

import json

from tests.cli_support import ledger_ok as ok

T0 = ("--now", "2026-01-01T00:00:00Z")


def test_a_pruned_completed_need_shows_its_status(url: str) -> None:
    ok(url, *T0, "admit", "c")
    fence = ok(url, *T0, "claim", "c", "--owner", "w", "--lease", "1m").strip()
    ok(url, *T0, "complete", "c", "--owner", "w", "--fence", fence)
    ok(url, "admit", "h", "--needs", "c")
    assert ok(url, "prune", "--older-than", "30d") == "pruned 1 record\n"
    assert ok(url, "tree", "h") == "h  pending\n└── c  completed (pruned)\n"
    assert json.loads(ok(url, "--json", "tree", "h")) == {
        "key": "h",
        "status": "pending",
        "pruned": False,
        "needs": [{"key": "c", "status": "completed", "pruned": True, "blocked_by": ""}],
        "cycles": [],
    }
    assert ok(url, "tree", "c") == "c  completed (pruned)\n"
    assert json.loads(ok(url, "--json", "tree", "c"))["pruned"] is True


def test_a_task_blocked_by_a_pruned_failure_is_in_the_overview(url: str) -> None:
    ok(url, "admit", "f")
    ok(url, "cancel", "f")
    ok(url, "admit", "kept")
    ok(url, "cancel", "kept")
    assert ok(url, "prune", "--older-than", "0s") == "pruned 2 records\n"
    ok(url, "admit", "g", "--needs", "f")
    assert ok(url, "tree") == "f  failed (pruned)\n└── g  blocked by f\n"
    assert ok(url, "tree", "g") == "g  blocked by f\n└── f  failed (pruned)\n"
    doc = json.loads(ok(url, "--json", "tree"))
    assert [(f["key"], f["pruned"], f["blocked"]) for f in doc["failed"]] == [("f", True, ["g"])]
    need = json.loads(ok(url, "--json", "tree", "g"))["needs"]
    assert need == [
        {
            "key": "f",
            "status": "failed",
            "pruned": True,
            "blocked_by": "",
            "exit": None,  # f never ran
            "signal": None,
            "timed_out": False,
        }
    ]
