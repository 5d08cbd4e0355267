"""History lines carry times in the order of their commits: each write reads
its clock once it holds the store's write lock (docs/design.md §3
"Stores"), `admit --batch`'s blocks and `pause` / `resume` included.
Through the installed `ledger`; the lock held by the test is waited for by
the queue's files, never by time."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from ledger_cli.engine.instant import Instant
from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

HANG = 60.0  # a bound for a hung test, never a timing assertion


def test_admit_batch_blocks_each_take_their_own_time(url: str, tmp_path: Path) -> None:
    """A batch over several blocks (the first holds cli/chunks.py's 32
    items): each block's lines carry the time read in it, so a line another
    writer commits between two blocks is not older than the later block's."""
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({"key": f"k{n:03}"}) + "\n" for n in range(100)))
    res = run_ledger(url, "admit", "--batch", str(batch))
    assert res.returncode == 0, res.stderr
    log = run_ledger(url, "log", "--jsonl")
    assert log.returncode == 0, log.stderr
    times = [Instant.parse(json.loads(line)["time"]) for line in log.stdout.splitlines()]
    assert len(times) == 100
    assert times == sorted(times)
    assert len(set(times)) > 1  # not one instant, the batch's start, for every block


def test_pause_reads_its_clock_once_it_holds_the_lock(tmp_path: Path) -> None:
    """A pause that waited for the store's lock is not dated before the
    writes committed while it waited."""
    from ledger_cli.stores import open_store
    from ledger_cli.stores.jsonfile import fairlock

    root = tmp_path / "store"
    assert run_ledger(root, "admit", "a").returncode == 0
    queue = root / fairlock.QUEUE_DIR
    store = open_store(str(root))
    try:
        with store.batch():  # the store's lock, held while the pause waits for it
            proc = subprocess.Popen(
                [*ledger_cmd(), "--store", str(root), "--json", "pause"],
                env=subprocess_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            end = time.monotonic() + HANG
            while sum(n.startswith(fairlock.NODE_PREFIX) for n in os.listdir(queue)) < 2:
                assert proc.poll() is None and time.monotonic() < end, "the pause never queued"
                time.sleep(0.01)
            waited = Instant.now()  # the pause is waiting: it holds no lock yet
        out, err = proc.communicate(timeout=HANG)
    finally:
        store.close()
    assert proc.returncode == 0, err
    assert waited <= Instant.parse(json.loads(out)["since"])
