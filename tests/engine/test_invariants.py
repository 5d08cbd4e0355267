"""Escaped and orphaned blocks: `engine.invariants`, `doctor`, `doctor --fix`, `tree`
(docs/design.md §4.2 `doctor` and §6.2).

An escaped block is a pending or claimed record with a failed record in its
transitive needs; Go's escape windows (docs/design.md §2.8) leave them. An
orphaned block is a blocked record with no failed record in its transitive
needs. Built three ways: TaskState lists, the engine's documented window,
and plain SQL on the Go schema.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.core import Core
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.invariants import (
    EscapedBlock,
    OrphanedBlock,
    find_escaped_blocks,
    find_orphaned_blocks,
    fix_escaped_block,
    fix_orphaned_block,
)
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.memstore import MemStore
from ledger_cli.engine.record import TaskState
from tests.cli_support import Cli, ledger_cmd, subprocess_env
from tests.go_support import go_db, go_row

T0 = Instant.parse("2026-01-02T03:04:05Z")


def rec(key: str, status: str, *needs: str, blocked_by: str = "") -> TaskState:
    return TaskState(key=key, status=status, needs=needs or None, blocked_by=blocked_by)


def test_finders_walk_every_status_and_survive_cycles() -> None:
    records = [
        rec("f", "failed"),
        rec("b", "blocked", "f", blocked_by="f"),
        rec("a", "pending", "b"),  # below a blocked need: escaped
        rec("c", "claimed", "done"),  # through a completed need: escaped
        rec("done", "completed", "f"),
        rec("x", "pending", "y"),  # a cycle with no failure: fine
        rec("y", "pending", "x"),
        rec("o", "blocked", "ok", blocked_by="gone"),  # nothing failed below: orphaned
        rec("ok", "completed"),
        rec("m", "pending", "missing"),  # a need never admitted ends the path
        rec("loop", "pending", "loop2"),
        rec("loop2", "blocked", "loop", "f", blocked_by="f"),
    ]
    assert find_escaped_blocks(records) == [
        EscapedBlock("a", "pending", "f"),
        EscapedBlock("c", "claimed", "f"),
        EscapedBlock("loop", "pending", "f"),
    ]
    assert find_orphaned_blocks(records) == [OrphanedBlock("o", "gone")]
    assert find_escaped_blocks([]) == [] and find_orphaned_blocks([]) == []


def test_the_engine_escape_window_and_the_fixes() -> None:
    """docs/design.md §2.8: A admitted before its need B; B then blocked at admission."""
    store = MemStore()
    led = Ledger(store)
    led.admit("t", "a", 1, None, T0, "b")
    led.admit("t", "f", 1, None, T0)
    fence = led.claim("t", "f", "w", timedelta(minutes=1), T0)
    led.complete("t", "f", "w", fence, "failed", T0)
    led.admit("t", "b", 1, None, T0, "f")
    assert led.state("b").status == "blocked"  # type: ignore[union-attr]
    assert led.state("a").status == "pending"  # type: ignore[union-attr]  the escapee
    escaped = find_escaped_blocks(store.range())
    assert escaped == [EscapedBlock("a", "pending", "f")]
    core = Core(store, None)
    assert fix_escaped_block(core, "doctor", T0, escaped[0])
    a = led.state("a")
    assert a is not None and (a.status, a.blocked_by) == ("blocked", "b")  # Claim's walk
    assert find_escaped_blocks(store.range()) == []
    assert not fix_escaped_block(core, "doctor", T0, escaped[0])  # nothing left to do
    # Orphan it: the failure's row is edited to completed behind the engine's back.
    f = store.load("f")
    assert f is not None
    store.compare_and_swap("f", f, f.replace(status="completed"))
    orphans = find_orphaned_blocks(store.range())
    assert [o.key for o in orphans] == ["a", "b"]
    for o in orphans:
        assert fix_orphaned_block(core, "doctor", T0, o)
    b = led.state("b")
    assert b is not None and (b.status, b.blocked_by, b.owner) == ("pending", "", "")
    assert find_orphaned_blocks(store.range()) == []


def test_doctor_names_the_escape_window_through_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    cli = Cli(MemStore(), monkeypatch)
    cli.ok("admit", "a", "--needs", "b")
    cli.ok("admit", "f")
    cli.ok("claim", "f", "--owner", "w", "--lease", "1m")
    cli.ok("complete", "f", "--owner", "w", "--fence", "1", "--failed")
    cli.ok("admit", "b", "--needs", "f")
    res = cli("doctor")
    assert res.code == 9
    assert "problem: record a: escaped block: pending while f in its transitive needs failed" in (
        res.stdout
    )
    fixed = cli("doctor", "--fix")
    assert fixed.code == 0 and "fixed: blocked a by b" in fixed.stdout
    assert cli.ok("blocked", "a").stdout == "b\n"
    assert cli.ok("doctor").stdout.endswith("no problems found\n")


def ledger(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_cmd(), "--store", f"sqlite:{db}", "--actor", "doc", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )


def test_go_written_escaped_and_orphaned_blocks(tmp_path: Path) -> None:
    db = tmp_path / "go.db"
    conn = go_db(db)
    go_row(conn, key="f", status="failed", fence=1)
    go_row(conn, key="b", status="blocked", needs='["f"]', blocked_by="f")
    go_row(conn, key="a", status="pending", needs='["b"]')
    go_row(conn, key="c", status="claimed", needs='["f"]', owner="go-worker", fence=1,
           lease_until="2999-01-01T00:00:00Z")  # fmt: skip
    go_row(conn, key="ok", status="completed", fence=1)
    go_row(conn, key="o", status="blocked", needs='["ok"]', blocked_by="ok")
    conn.close()

    res = ledger(db, "doctor")
    assert res.returncode == 9, res.stdout
    problems = [ln for ln in res.stdout.splitlines() if ln.startswith("problem:")]
    assert problems == [
        "problem: record a: escaped block: pending while f in its transitive needs failed "
        "(--fix blocks it)",
        "problem: record c: escaped block: claimed while f in its transitive needs failed "
        "(--fix blocks it)",
        "problem: record o: orphaned block: blocked by ok while nothing in its transitive "
        "needs failed (--fix un-blocks it)",
    ]
    tree = ledger(db, "tree").stdout
    assert "a  pending  escaped block" in tree and "c  claimed  escaped block" in tree
    doc = json.loads(ledger(db, "--json", "tree").stdout)
    assert doc["failed"][0]["escaped"] == ["a", "c"]

    fixed = ledger(db, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert [ln for ln in fixed.stdout.splitlines() if ln.startswith("fixed:")] == [
        "fixed: blocked a by b",
        "fixed: blocked c by f",
        "fixed: un-blocked o",
    ]
    rows = dict(
        ((k, (s, bb)) for k, s, bb in sqlite3.connect(db).execute(
            "SELECT key, status, blocked_by FROM ledger_tasks"
        ))
    )  # fmt: skip
    assert rows["a"] == ("blocked", "b") and rows["c"] == ("blocked", "f")
    assert rows["o"] == ("pending", "")
    assert rows["f"] == ("failed", "") and rows["ok"] == ("completed", "")
    events = [ln.split()[2] for ln in ledger(db, "log").stdout.splitlines()]
    assert events == ["ledger.blocked", "ledger.blocked", "ledger.unblocked"]
    again = ledger(db, "doctor")
    assert again.returncode == 0 and "problem:" not in again.stdout
