"""A `ledger restore` cut short is finished by running it again (docs/design.md
§2.9): a key that already holds exactly the snapshot's record counts as
restored, one that holds anything else is refused (exit 8) before anything is
written. Fresh `ledger` processes on every durable store (the `url` fixture;
PostgreSQL skips when unreachable, as elsewhere).

- kill -9 a large restore once part of it has landed (waiting for that state,
  its first key's `state`), run it again: the store's snapshot is the snapshot's (but
  for `Rev`, which a store sets), one `ledger.restored` line a live record,
  `doctor` clean;
- a store where one key holds another record (another payload, queue or
  pruned mark, a claim since): exit 8 naming it and what differs, nothing
  written; the same snapshot unchanged then restores, counting what was there;
- PostgreSQL: the restore's connection terminated mid-way exits 9 saying what
  landed and to run it again, which finishes it;
- JSON store: a kill just after a block's pruned lines land (they are durable
  at once, before the block's commit) leaves nothing a re-run refuses.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.cli_support import ledger_cmd, ledger_ok, run_ledger, subprocess_env

LARGE = 8_000
"""Synthetic records in the middle of the large snapshot: many blocks (they
grow from 32, at most twofold, chunks.py), so a kill once the first has
landed falls far from the end."""

FIRST = "a-blocked"
"""The large snapshot's first key."""

FORK = multiprocessing.get_context("fork")


def _record(key: str, status: str = "pending", task: str = '{"n":1}', **extra: str) -> str:
    """A wire record (Go's encoding: the 14 fields in order), then `extra` members."""
    owner, fence = ("w", 1) if status != "pending" else ("", 0)
    text = (
        f'{{"Key":"{key}","Status":"{status}","Sequence":1,"Owner":"{owner}","Fence":{fence},'
        f'"LeaseUntil":"0001-01-01T00:00:00Z","Needs":null,"BlockedBy":"","Task":{task},'
        f'"Rev":3,"CreatedBy":"t","CreatedAt":"2026-01-02T03:04:05Z","UpdatedBy":"t",'
        f'"UpdatedAt":"2026-01-02T03:04:06.5Z"'
    )
    return text + "".join(f',"{k}":{v}' for k, v in extra.items()) + "}"


def _snapshot(*records: str) -> bytes:
    return ('{"Tasks":[' + ",".join(records) + "]}").encode()


def _as_restored(snap: bytes) -> bytes:
    """A snapshot as the store it is restored into shows it: each `Rev` 0."""
    return re.sub(rb'"Rev":\d+', b'"Rev":0', snap)


def _landed(url: str, key: str) -> bool:
    """`key` has its record: a cheap read (`stats` waits for the lock behind the
    restore's blocks)."""
    return run_ledger(url, "state", key).returncode == 0


def _held(url: str) -> int:
    """Records in the store (pruned ones too), 0 while there is no store."""
    res = run_ledger(url, "--json", "stats")
    if res.returncode != 0:
        return 0
    stats = json.loads(res.stdout)
    return int(sum(stats["counts"].values()) + stats["pruned"])


def _large_snapshot(tmp_path: Path) -> tuple[bytes, int, int]:
    """Records of every kind (claimed, blocked on a failure, queued and
    scheduled, pruned with a queue) at both ends, plain ones between: the
    snapshot's bytes, its records, and how many of them are live (not pruned)."""
    src = tmp_path / "source"
    ledger_ok(src, "admit", "a-queued", "--queue", "q1", "--priority", "5", "--delay", "1h")
    ledger_ok(src, "admit", "a-failed")
    ledger_ok(src, "admit", "a-blocked", "--needs", "a-failed")
    for key in ("a-pruned", "z-pruned"):
        ledger_ok(src, "admit", key, "--queue", "q2", "--priority", "-3", "--task", '{"p":1}')
        fence = ledger_ok(src, "claim", key, "--owner", "w", "--lease", "1h").strip()
        ledger_ok(src, "complete", key, "--owner", "w", "--fence", fence)
    fence = ledger_ok(src, "claim", "a-failed", "--owner", "w", "--lease", "1h").strip()
    ledger_ok(src, "complete", "a-failed", "--owner", "w", "--fence", fence, "--failed")
    ledger_ok(src, "prune", "--older-than", "0s", "--status", "completed")
    ledger_ok(src, "admit", "z-claimed", "--task", '{"big":18446744073709551615}')
    ledger_ok(src, "claim", "z-claimed", "--owner", "w", "--lease", "1h")
    ledger_ok(src, "admit", "z-queued", "--queue", "q1", "--needs", "a-queued")
    small = ledger_ok(src, "snapshot")
    entries = small[len('{"Tasks":[') : -len("]}")]
    head, sep, tail = entries.partition(',{"Key":"z-')
    assert sep, small
    middle = ",".join(
        _record(f"m-{i:06d}", task=f'{{"i":{i},"s":"{"x" * 40}"}}') for i in range(LARGE)
    )
    snap = ('{"Tasks":[' + head + "," + middle + sep + tail + "]}").encode()
    return snap, LARGE + 7, LARGE + 5


def test_a_killed_restore_run_again_finishes_it(url: str, tmp_path: Path) -> None:
    snap, total, live = _large_snapshot(tmp_path)
    path = tmp_path / "big.json"
    path.write_bytes(snap)
    proc = subprocess.Popen(
        [*ledger_cmd(), "--store", url, "restore", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    try:
        while not _landed(url, FIRST):  # wait for its first block to land
            assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGKILL)
    finally:
        out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, (out, err)
    landed = _held(url)
    assert 0 < landed < total
    assert run_ledger(url, "doctor").returncode == 0  # a partial store is a sound one

    again = run_ledger(url, "restore", str(path))
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"restored {total} records ({landed} already there)\n"
    assert run_ledger(url, "snapshot").stdout.encode() == _as_restored(snap)
    restored = [
        json.loads(line)["key"]
        for line in run_ledger(url, "log", "--jsonl").stdout.splitlines()
        if json.loads(line)["event"] == "ledger.restored"
    ]
    assert len(restored) == len(set(restored)) == live  # one line a live record, none twice
    doctor = run_ledger(url, "doctor")
    assert doctor.returncode == 0, doctor.stdout
    # Once whole, the same restore writes nothing and says so.
    done = run_ledger(url, "--json", "restore", str(path))
    assert json.loads(done.stdout) == {"restored": total, "already_there": total}


def _small(**changes: str) -> list[str]:
    """k1 plain, k2 queued with a priority, k3 pruned (queued, with a
    priority), k4 plain; `changes`
    replaces a key's entry."""
    entries = {
        "k1": _record("k1"),
        "k2": _record("k2", Priority="5", Queue='"q1"'),
        "k3": _record("k3", "completed", task="null", Priority="-3", Queue='"q2"', Pruned="true"),
        "k4": _record("k4"),
    }
    entries.update(changes)
    return list(entries.values())


@pytest.mark.parametrize(
    ("change", "differs"),
    [
        ({"k1": _record("k1", task='{"n":2}')}, "its Task differs"),
        ({"k2": _record("k2", Priority="5", Queue='"q2"')}, "its Queue differs"),
        ({"k2": _record("k2", Queue='"q1"')}, "its NotBefore/Priority differs"),
        (
            {"k3": _record("k3", "completed", task="null", Priority="-3", Queue='"q2"')},
            "its Pruned differs",
        ),
    ],
    ids=["payload", "queue", "priority", "pruned mark"],
)
def test_a_key_holding_another_record_is_refused_writing_nothing(
    url: str, tmp_path: Path, change: dict[str, str], differs: str
) -> None:
    first = tmp_path / "first.json"
    first.write_bytes(_snapshot(*_small()[:3]))
    assert ledger_ok(url, "restore", str(first)) == "restored 3 records\n"
    before = run_ledger(url, "snapshot").stdout
    other = _snapshot(*_small(**change))
    res = run_ledger(url, "restore", "-", input=other)
    key = next(iter(change))
    assert (res.returncode, res.stdout) == (8, "")
    assert res.stderr == (
        f'ledger: restore: key "{key}" already has a record other than the snapshot\'s'
        f" ({differs}); nothing was restored\n"
    )
    assert run_ledger(url, "snapshot").stdout == before  # k4 not written, nothing changed
    res = run_ledger(url, "--json", "restore", "-", input=other)
    assert json.loads(res.stdout)["error"]["code"] == "restore_conflict"
    # The snapshot itself finishes what the first restore began.
    whole = _snapshot(*_small())
    res = run_ledger(url, "restore", "-", input=whole)
    assert (res.returncode, res.stdout) == (0, "restored 4 records (3 already there)\n")
    assert run_ledger(url, "snapshot").stdout.encode() == _as_restored(whole)


def test_a_record_changed_since_it_was_restored_is_refused(url: str, tmp_path: Path) -> None:
    """A claim of a restored record changes it (status, fence, UpdatedAt): the
    same snapshot no longer passes for what the key holds."""
    whole = _snapshot(*_small())
    assert run_ledger(url, "restore", "-", input=whole).returncode == 0
    ledger_ok(url, "claim", "k1", "--owner", "w2", "--lease", "1h")
    before = run_ledger(url, "snapshot").stdout
    res = run_ledger(url, "restore", "-", input=whole)
    assert res.returncode == 8
    assert res.stderr.startswith(
        'ledger: restore: key "k1" already has a record other than the snapshot\'s'
        " (its Status, Owner, Fence, LeaseUntil, UpdatedBy, UpdatedAt differ)"
    ), res.stderr
    assert run_ledger(url, "snapshot").stdout == before


def test_postgresql_restore_whose_connection_is_cut_says_to_run_it_again(
    tmp_path: Path,
) -> None:
    from tests.stores import KINDS

    psycopg = pytest.importorskip("psycopg")
    with KINDS["postgresql"].place(tmp_path) as base:
        app = f"restore-{uuid.uuid4().hex[:8]}"
        url = f"{base}&{quote('application_name')}={app}"
        snap, total, _ = _large_snapshot(tmp_path)
        path = tmp_path / "big.json"
        path.write_bytes(snap)
        proc = subprocess.Popen(
            [*ledger_cmd(), "--store", url, "restore", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )
        try:
            while not _landed(base, FIRST):  # wait for its first block to land
                assert proc.poll() is None, proc.communicate()
            from tests.sql_support import postgres_url

            with psycopg.connect(postgres_url(), autocommit=True) as conn:
                cut = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (app,),
                ).fetchall()
        finally:
            out, err = proc.communicate()
        assert cut == [(True,)]
        assert (proc.returncode, out) == (9, ""), err
        landed = _held(base)
        assert 0 < landed < total
        assert len(err.splitlines()) == 1
        assert "; restore stopped: restored " in err
        assert err.endswith(
            "; run the same restore again to finish it (records already there are skipped)\n"
        )
        again = run_ledger(url, "restore", str(path))
        assert again.returncode == 0, again.stderr
        assert again.stdout == f"restored {total} records ({landed} already there)\n"
        assert run_ledger(url, "snapshot").stdout.encode() == _as_restored(snap)
        assert run_ledger(url, "doctor").returncode == 0


def _restore_killed_after_pruned_lines(store: str, snap: str) -> None:
    """`ledger restore`, in this (forked) process, killed as soon as a block's
    pruned records are in (before the block's commit)."""
    from ledger_cli.engine import prune
    from tests.faults_support import invoke

    original = prune.restore

    def restore_then_die(store_: object, records: object) -> str | None:
        taken = original(store_, records)  # type: ignore[arg-type]
        if records:
            os.kill(os.getpid(), signal.SIGKILL)
        return taken

    prune.restore = restore_then_die  # type: ignore[assignment]
    invoke(store, "restore", snap)


def test_json_restore_killed_after_its_pruned_lines_is_finished_again(tmp_path: Path) -> None:
    """The JSON store's pruned lines are durable before their block commits: a
    pruned record's queue and schedule went in after them, and a kill between
    left it without them, which a re-run then refused (its queue and priority
    differ)."""
    store = tmp_path / "st"
    snap = _snapshot(*_small())
    path = tmp_path / "snap.json"
    path.write_bytes(snap)
    child = FORK.Process(target=_restore_killed_after_pruned_lines, args=(str(store), str(path)))
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL
    assert _held(str(store)) == 1  # k3, pruned; the block's other records did not commit
    res = run_ledger(store, "restore", str(path))
    assert (res.returncode, res.stdout) == (0, "restored 4 records (1 already there)\n"), res.stderr
    assert run_ledger(store, "snapshot").stdout.encode() == _as_restored(snap)
    assert run_ledger(store, "doctor").returncode == 0


def test_a_fence_the_json_store_raised_to_its_floor_is_the_snapshots(tmp_path: Path) -> None:
    """The JSON store raises a new key's fence to its fence floor (docs/design.md
    §3.1): what it set itself is no difference, the record counts as restored."""
    store = tmp_path / "st"
    ledger_ok(store, "admit", "x")
    meta = store / "ledger-store.json"
    meta.write_text(meta.read_text().replace('"fence_floor": 0', '"fence_floor": 5'))
    snap = _snapshot(_record("k1", "completed"))
    first = run_ledger(store, "restore", "-", input=snap)
    assert first.stdout == "restored 1 record\n", first.stderr
    assert json.loads(ledger_ok(store, "--json", "state", "k1"))["Fence"] == 5
    res = run_ledger(store, "restore", "-", input=snap)
    assert (res.returncode, res.stdout) == (0, "restored 1 record (1 already there)\n"), res.stderr
