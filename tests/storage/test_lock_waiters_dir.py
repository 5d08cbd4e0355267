"""The JSON store's lock queue lives in `waiters/`, apart from the keys' task
queues in `queue/` (stores/jsonfile/fairlock.py, queuefile.py): a store
whose keys have no queue has no `queue/`, so no read looks for a queue file,
and a store an earlier build left with its waiters in `queue/` still works
and passes `ledger doctor`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ledger_cli.stores.jsonfile import fairlock, key_digest
from tests.cli_support import run_ledger


def test_writers_queue_in_waiters_and_no_queue_dir_without_task_queues(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    assert run_ledger(store, "claim", "--next", "--owner", "w", "--lease", "1m").returncode == 0
    assert (store / fairlock.QUEUE_DIR / fairlock.TAIL_NAME).is_file()
    assert not (store / "queue").exists()

    assert run_ledger(store, "admit", "m", "--queue", "mail").returncode == 0
    assert sorted(os.listdir(store / "queue")) == [f"{key_digest('m')}.json"]
    assert not any(n.startswith(fairlock.NODE_PREFIX) for n in os.listdir(store / "queue"))


def test_a_store_with_an_earlier_builds_waiters_in_queue_works(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "m", "--queue", "mail").returncode == 0
    old = store / fairlock.OLD_QUEUE_DIR
    (old / fairlock.TAIL_NAME).write_text(fairlock.NODE_PREFIX + "1" * 24)
    os.chmod(old / fairlock.TAIL_NAME, 0o600)
    os.mkfifo(old / (fairlock.NODE_PREFIX + "1" * 24), 0o600)

    got = run_ledger(store, "claim", "--next", "--queue", "mail", "--owner", "w", "--lease", "1m")
    assert got.returncode == 0, got.stderr
    assert json.loads(run_ledger(store, "state", "m", "--json").stdout)["Status"] == "claimed"
    doctor = run_ledger(store, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
