"""`admit --batch` killed while it streams its results: every key it printed
as `admitted` is in the store (a block's lines are printed once the block is
committed, cli/chunks.py `committed`). Before, the lines of a block went to
stdout as each line was admitted, and stdout's buffer could reach the file
before the block's commit: a kill then left `admitted` lines for keys that
were never stored.

Fresh `ledger` processes; the kill comes when the output file holds a given
number of lines (a state, polled), at several points of the batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

KEYS = 3000
KILL_AFTER = (1, 400, 1200)
"""Kill once stdout holds at least this many lines."""
PATIENCE = 120.0
"""Seconds to wait for a state on a slow machine (a safety net only)."""


def _printed(out: Path) -> list[str]:
    return [ln.split()[1] for ln in out.read_text().splitlines() if ln.startswith("admitted ")]


@pytest.mark.parametrize("name", ["s", "s.db"], ids=["json", "sqlite"])
def test_every_printed_admit_survives_a_kill(tmp_path: Path, name: str) -> None:
    store = tmp_path / name
    for n, lines in enumerate(KILL_AFTER):
        batch = tmp_path / f"b{n}.jsonl"
        batch.write_text("".join(json.dumps({"key": f"r{n}-{i}"}) + "\n" for i in range(KEYS)))
        out = tmp_path / f"out{n}"
        with out.open("w") as sink:
            proc = subprocess.Popen(
                [*ledger_cmd(), "--store", str(store), "admit", "--batch", str(batch)],
                stdout=sink,
                stderr=subprocess.DEVNULL,
                env=subprocess_env(),
            )
        deadline = time.monotonic() + PATIENCE
        while proc.poll() is None and len(_printed(out)) < lines:
            assert time.monotonic() < deadline, "no output came"
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        printed = _printed(out)
        listed = run_ledger(store, "--json", "list", "--status", "pending")
        assert listed.returncode == 0, listed.stderr
        stored = {rec["Key"] for rec in json.loads(listed.stdout)}
        lost = [key for key in printed if key not in stored]
        assert not lost, f"{len(lost)} of {len(printed)} printed keys are not stored: {lost[:3]}"
        # Admission is idempotent: the same batch again finishes the job.
        again = run_ledger(store, "admit", "--batch", str(batch))
        assert again.returncode == 0, again.stderr
