"""`list`'s full scan checks its count against the JSON store's tally (a lost
record file makes them disagree): writers running during the
scan must never make it report damage. Fresh processes (tests/cli_support.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

TASKS = 200


def test_a_list_beside_busy_writers_never_reports_damage(tmp_path: Path) -> None:
    store = tmp_path / "store"
    lines = "".join(f'{{"key": "t{i:03}", "task": {{}}}}\n' for i in range(TASKS))
    res = run_ledger(store, "admit", "--batch", "-", input=lines.encode())
    assert res.returncode == 0, res.stderr
    workers = [
        subprocess.Popen(
            [
                *ledger_cmd(),
                "--store",
                str(store),
                "run",
                "--next",
                "--drain",
                "--until-idle",
                "--owner",
                f"w{n}",
                "--lease",
                "60s",
                "--",
                "true",
            ],
            env=subprocess_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    lists = 0
    try:
        # List until both workers are done (a state, not a time), then once more.
        while any(w.poll() is None for w in workers) or lists == 0:
            listed = run_ledger(store, "list", "--jsonl")
            lists += 1
            assert listed.returncode == 0, listed.stderr
    finally:
        for w in workers:
            _, err = w.communicate(timeout=120)
            assert w.returncode == 0, err
    final = run_ledger(store, "--json", "stats")
    assert final.returncode == 0 and '"completed":200' in final.stdout.replace(" ", "")
    assert lists >= 1
    print(f"{lists} lists beside {len(workers)} draining workers, {TASKS} tasks")  # -s
