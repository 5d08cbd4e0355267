"""`ledger demo`: a small real workflow on a temporary JSON store.

It admits a build pipeline in which the integration tests fail, starts
worker loops that each run `ledger run --next … -- python -c JOB` as real
processes until nothing is left to do, then shows the table and the blocked
tree, and says where the store is so it can be inspected further.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings

# key, needs, seconds of work, exit status
PIPELINE: tuple[tuple[str, tuple[str, ...], float, int], ...] = (
    ("fetch-sources", (), 0.3, 0),
    ("compile-core", ("fetch-sources",), 0.4, 0),
    ("compile-ui", ("fetch-sources",), 0.3, 0),
    ("unit-tests", ("compile-core",), 0.3, 0),
    ("integration-tests", ("compile-core", "compile-ui"), 0.4, 1),
    ("build-docs", ("compile-ui",), 0.2, 0),
    ("package", ("unit-tests", "integration-tests"), 0.2, 0),
    ("deploy", ("package",), 0.2, 0),
    ("announce", ("deploy", "build-docs"), 0.1, 0),
)

JOB = (
    "import json, os, sys, time\n"
    "task = json.loads(os.environ['LEDGER_TASK'])\n"
    "time.sleep(task['seconds'])\n"
    "sys.exit(task['exit'])\n"
)

LEASE = "30s"


def _ledger(store: str, actor: str) -> list[str]:
    return [sys.executable, "-m", "ledger_cli", "--store", store, "--actor", actor]


def _busy(store: str) -> bool:
    """Does any record still hold a claim (so more work may become ready)?"""
    with Session(Settings(store=store)) as s:
        return any(rec.status == "claimed" for rec in s.store.range())


def _worker(
    store: str, name: str, log: list[dict[str, Any]], lock: threading.Lock, quiet: bool
) -> None:
    """Run `ledger run --next` processes until nothing is ready and nothing is
    running (so nothing more can become ready)."""
    argv = [
        *_ledger(store, name),
        "--json",
        "run",
        "--next",
        "--owner",
        name,
        "--lease",
        LEASE,
        "--",
        sys.executable,
        "-c",
        JOB,
    ]
    while True:
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode == 7:  # nothing ready
            if not _busy(store):
                return
            time.sleep(0.2)
            continue
        lines = proc.stdout.strip().splitlines()
        try:
            result = json.loads(lines[-1])
        except (IndexError, ValueError):
            result = {"error": {"message": proc.stderr.strip() or f"exit {proc.returncode}"}}
        if "error" in result:
            # A lost race or a store hiccup: say so and carry on.
            with lock:
                output.diag(f"{name}: {result['error']['message']}")
            time.sleep(0.2)
            continue
        entry = {
            "worker": name,
            "key": result["key"],
            "status": result["status"],
            "seconds": round(time.monotonic() - started, 1),
        }
        with lock:
            log.append(entry)
            if not quiet:
                output.line(f"  {name}  ran {entry['key']:<18} → {entry['status']}")
                sys.stdout.flush()


def demo(settings: Settings, workers: int = 3) -> int:
    base = Path(tempfile.mkdtemp(prefix="ledger-demo-"))
    store = str(base / "store")
    with Session(Settings(store=store, actor="demo", now=None)) as s:
        now = s.now()
        for attempt in s.writes(now):
            with attempt:
                for key, needs, seconds, status in PIPELINE:
                    s.ledger.admit(
                        s.actor, key, 1, {"seconds": seconds, "exit": status}, now, *needs
                    )
    if not settings.json:
        output.line(
            f"Admitted {len(PIPELINE)} tasks; integration-tests is set up to fail. "
            f"Starting {workers} workers (ledger run --next):"
        )
        sys.stdout.flush()
    log: list[dict[str, Any]] = []
    lock = threading.Lock()
    threads = [
        threading.Thread(
            target=_worker, args=(store, f"worker-{n}", log, lock, settings.json), daemon=True
        )
        for n in range(1, workers + 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with Session(Settings(store=store)) as s:
        records = {rec.key: rec for rec in s.store.range()}
        now = s.now()
        from ledger_cli.cli import outcome

        failed = [rec.key for rec in records.values() if rec.status == "failed"]
        marks = outcome.failure_marks(s.store, failed)  # as `ledger tree` shows them
    if settings.json:
        output.json_line(
            {
                "store": store,
                "runs": log,
                "records": [output.record(rec) for rec in records.values()],
            }
        )
        return 0
    from ledger_cli.cli import render

    con = render.console()
    con.print()
    con.print(render.record_table(records.values(), now))
    con.print()
    con.print("What the failure blocks (ledger tree):")
    render.print_trees(con, render.failure_trees(records, marks), "no failed tasks")
    con.print()
    con.print(f"The store is kept at {store}; look around:", markup=False)
    for cmd in ("list", "tree announce", "state integration-tests", "log"):
        con.print(f"  ledger --store {store} {cmd}", markup=False)
    return 0
