"""The ready index partitioned by queue (stores/jsonfile/readyindex.py
QUEUES_DIR): `claim --next` takes the Ready order across queues exactly as one
index would; on the JSON store a queue filter reads only the wanted queues'
partitions, and a queue at its limit is not read at all; an index of an
older format is rebuilt by queue; a partition ready/'s manifest lists whose
directory is gone is damage, never "nothing ready". Through the installed CLI."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from tests.cli_support import T0, run_ledger
from tests.cli_support import ledger_ok as ok


def at(seconds: int) -> str:
    return str(Instant.parse(T0) + timedelta(seconds=seconds)) if seconds else T0


def claim_next(url: str, *args: str) -> tuple[int, str]:
    res = run_ledger(
        url, "--now", at(100), "claim", "--next", "--owner", "w", "--lease", "1h", *args
    )
    return res.returncode, (res.stdout.split() or [""])[0]


# (key, queue, priority, admitted seconds after T0): keys named against the order
TASKS = [
    ("z-old", "a", 0, 1),
    ("y-prio", "b", 3, 9),
    ("x-mid", "default", 0, 4),
    ("w-mid", "b", 0, 4),
    ("v-new", "a", 0, 8),
    ("u-prio", "c", 3, 2),
    ("t-low", "c", -1, 0),
    ("s-old", "b", 0, 2),
]


def _admit_all(url: str) -> None:
    for key, queue, priority, s in TASKS:
        ok(url, "--now", at(s), "admit", key, "--queue", queue, "--priority", str(priority))


def _ready_order(queues: set[str] | None) -> list[str]:
    chosen = [t for t in TASKS if queues is None or t[1] in queues]
    return [k for k, _, _, _ in sorted(chosen, key=lambda t: (-t[2], t[3], t[0].encode()))]


def _drain(url: str, *args: str) -> list[str]:
    got: list[str] = []
    while True:
        code, key = claim_next(url, *args)
        if code == 7:
            return got
        assert code == 0, key
        got.append(key)


def test_claim_next_takes_the_ready_order_across_every_queue(url: str) -> None:
    _admit_all(url)
    assert _drain(url) == _ready_order(None)


def test_claim_next_queue_takes_the_ready_order_across_the_named_queues(url: str) -> None:
    _admit_all(url)
    assert _drain(url, "--queue", "a,b", "--queue", "nowhere") == _ready_order({"a", "b"})
    assert _drain(url, "--queue", "default,c") == _ready_order({"default", "c"})


def test_a_queue_at_its_limit_is_passed_over_in_order(url: str) -> None:
    _admit_all(url)
    ok(url, "limit", "b", "1")
    got = _drain(url)
    # b's first task takes its one slot; the rest of b waits, the order holds.
    first_b = _ready_order({"b"})[0]
    rest = [k for k in _ready_order(None) if k not in _ready_order({"b"})]
    assert [k for k in got if k != first_b] == rest
    assert first_b in got


# -- the JSON store's partitions ---------------------------------------------------------


def _partition(store: Path, queue: str) -> Path:
    return store / "ready" / "q" / queue.encode().hex()


def _damage(part: Path) -> None:
    """Every chunk of a partition unreadable: reading it is an error."""
    chunks = [p for p in part.iterdir() if p.name.startswith("c")]
    assert chunks
    for chunk in chunks:
        chunk.write_bytes(b"garbage\n")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    for i in range(20):
        ok(str(path), "--now", T0, "admit", f"a{i:02}", "--queue", "a")
    ok(str(path), "--now", at(5), "admit", "b1", "--queue", "b")
    ok(str(path), "--now", at(6), "admit", "d1")
    return path


def test_a_queue_filter_reads_only_the_wanted_partitions(store: Path) -> None:
    assert _partition(store, "a").is_dir() and _partition(store, "b").is_dir()
    _damage(_partition(store, "a"))
    # a's partition is damaged: only a reader of it would see.
    assert claim_next(str(store), "--queue", "b") == (0, "b1")
    assert claim_next(str(store), "--queue", "default") == (0, "d1")
    res = run_ledger(
        store, "--now", at(100), "claim", "--next", "--owner", "w", "--queue", "a", "--lease", "1h"
    )
    assert res.returncode != 0 and "ready index" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_queue_at_its_limit_is_not_read(store: Path) -> None:
    ok(str(store), "limit", "a", "1")
    assert claim_next(str(store), "--queue", "a") == (0, "a00")
    _damage(_partition(store, "a"))
    # a is full: claim --next from every queue never reads its partition.
    assert claim_next(str(store)) == (0, "b1")
    assert claim_next(str(store)) == (0, "d1")
    assert claim_next(str(store))[0] == 7


def test_an_index_of_the_previous_format_is_rebuilt_by_queue(store: Path) -> None:
    # Release 3's index: one partition, ready/'s own, holding every queue.
    shutil.rmtree(store / "ready" / "q")
    manifest = store / "ready" / "manifest"
    manifest.write_bytes(
        manifest.read_bytes().replace(b"ledger_cli.ready 5", b"ledger_cli.ready 3")
    )
    assert claim_next(str(store), "--queue", "b") == (0, "b1")
    assert manifest.read_bytes().startswith(b"ledger_cli.ready 5 ")
    assert sorted(os.listdir(store / "ready" / "q")) == sorted(q.encode().hex() for q in ("a", "b"))
    assert _drain(str(store), "--queue", "a") == [f"a{i:02}" for i in range(20)]


def test_a_store_of_format_4_opens_and_its_partitions_are_listed(store: Path) -> None:
    """Release 4's index: the same partitions, found by listing ready/q/, and a
    manifest that lists none; it is rebuilt (format 5) by the next claim."""
    manifest = store / "ready" / "manifest"
    lines = manifest.read_text().splitlines(keepends=True)
    assert lines[0].startswith("ledger_cli.ready 5 ")
    assert sorted(ln for ln in lines if ln.startswith("+ ")) == ["+ 61\n", "+ 62\n"]
    kept = [ln for ln in lines[1:] if not ln.startswith("+ ")]
    manifest.write_text(lines[0].replace("ready 5", "ready 4") + "".join(kept))
    assert claim_next(str(store), "--queue", "b") == (0, "b1")
    assert manifest.read_text().startswith("ledger_cli.ready 5 ")
    assert "+ 61\n" in manifest.read_text()
    assert _drain(str(store), "--queue", "a") == [f"a{i:02}" for i in range(20)]
    assert run_ledger(store, "doctor").returncode == 0


@pytest.mark.parametrize("gone", ["partition", "every partition", "ready/q"])
def test_a_lost_partition_directory_is_damage_not_nothing_ready(store: Path, gone: str) -> None:
    """A queue's partition directory deleted (its entries with it): `claim
    --next` of that queue, or of every queue, exits 9 naming it, never 7
    while its tasks are ready; `doctor` names it and `--fix` rebuilds."""
    if gone == "partition":
        shutil.rmtree(_partition(store, "a"))
    elif gone == "every partition":
        for part in (store / "ready" / "q").iterdir():
            shutil.rmtree(part)
    else:
        shutil.rmtree(store / "ready" / "q")
    shown = str(_partition(store, "a"))
    for args in (("--queue", "a"), ()):
        res = run_ledger(
            store, "--now", at(100), "claim", "--next", "--owner", "w", "--lease", "1h", *args
        )
        assert res.returncode == 9, (args, res.returncode, res.stdout)
        (line,) = res.stderr.splitlines()
        assert shown in line and "missing" in line and "doctor --fix" in line, line
    doctor = run_ledger(store, "doctor")
    assert doctor.returncode == 9 and shown in doctor.stdout, doctor.stdout
    assert run_ledger(store, "doctor", "--fix").returncode == 0
    assert _drain(str(store), "--queue", "a") == [f"a{i:02}" for i in range(20)]


def test_a_write_that_meets_a_lost_partition_lands_and_rebuilds(store: Path) -> None:
    shutil.rmtree(_partition(store, "a"))
    ok(str(store), "--now", at(7), "admit", "a20", "--queue", "a")
    assert _drain(str(store), "--queue", "a") == [f"a{i:02}" for i in range(21)]


def test_a_rebase_to_another_queue_moves_its_entry(store: Path) -> None:
    ok(str(store), "--now", at(7), "admit", "a05", "--seq", "2", "--queue", "b")
    # A rebase keeps the task's age (CreatedAt): a05 is b's oldest now.
    assert claim_next(str(store), "--queue", "b") == (0, "a05")
    assert claim_next(str(store), "--queue", "b") == (0, "b1")
    got = _drain(str(store), "--queue", "a")
    assert got == [f"a{i:02}" for i in range(20) if i != 5]
    res = run_ledger(store, "doctor")
    assert res.returncode == 0, res.stdout + res.stderr
