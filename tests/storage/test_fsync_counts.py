"""fsync(2), fdatasync(2) and syncfs(2) calls per command on the JSON store,
pinned as tests/interop/test_postgres_round_trips.py pins round trips: counted around
`os.fsync`, `os.fdatasync` and `fsutil.sync_filesystem`, never timed.

A small write (every command line write: a record, its history line, the
attempt's file) is one frame of wal.log, made durable by one fdatasync(2):
the commit point and the write's only sync. The files it describes are
written unsynced; a checkpoint (one syncfs(2) per CHECKPOINT_BYTES of log)
makes them durable and empties the log (stores/jsonfile/wal.py). Before:
3 per `claim --next` (journal, root directory, syncfs), 6 per `ledger run
--next`; before that 6 and 13.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import JsonFileStore, durability, fsutil
from tests.faults_support import invoke

CLAIM_NEXT = 1
"""The wal.log frame's fdatasync (was 3: journal, root directory, syncfs)."""
COMPLETE_PROMOTING = 1
"""The same for a completion that makes a dependent ready (was 3, then 8)."""
RUN_NEXT = 2
"""`ledger run --next -- true`: the claim's frame, which also starts the
attempt (docs/design.md §7.1; its file goes in the frame), and the
completion's, which also saves the attempt's end and output; the pid noted
once the command runs (attempts/…/1.pid, renamed into place, not fsynced:
stores/jsonfile/attemptfiles.py) costs none (was 6, then 13)."""
DRAIN_PER_TASK = 1
"""`ledger run --next --drain -- true`, per task: each outcome's frame also
claims the next task (and starts its attempt), so N tasks cost the first
claim's frame and N outcome frames (was 2 per task)."""
ADMIT = 1
"""An admission, with a queue, a priority or a not-before too: the side files
(queue/, schedule/) go in the same frame as the record, and a new queue's
ready/ partition is made unsynced under it (was 13 for `--queue` on a new
queue, 6 for `--priority`, 5 for `--delay`: each file written durably on its
own, and the ready entry added synced)."""
LIBRARY_CAS_SAME_COUNTS = 1
"""A compare-and-swap outside a batch that changes no count (a renewal): its
frame (was 3: the root directory, the record file, its shard directory)."""

FALLBACK_CLAIM_NEXT = 1
"""Much dirty memory changes nothing for a small write: its one fdatasync
writes the frame alone (was 8: every file fsynced, as syncfs(2) would have
written others' dirty pages too)."""


class SyncCounter:
    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def total(self) -> int:
        return sum(self.calls.values())


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[SyncCounter]:
    c = SyncCounter()
    real_fsync, real_fdatasync, real_syncfs = os.fsync, os.fdatasync, fsutil.sync_filesystem

    def fsync(fd: int) -> None:
        c.calls["fsync"] += 1
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        c.calls["fdatasync"] += 1
        real_fdatasync(fd)

    def syncfs(fd: int, shown: str) -> None:
        c.calls["syncfs"] += 1
        real_syncfs(fd, shown)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(fsutil, "sync_filesystem", syncfs)
    yield c


def dirty(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kib: int) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"Dirty: {kib} kB\nWriteback: 0 kB\n")
    monkeypatch.setattr(durability, "MEMINFO", str(meminfo))


def counted(counter: SyncCounter, store: Path, *argv: str, input: str | None = None) -> int:
    counter.calls.clear()
    res = invoke(store, *argv, input=input)
    assert res.code == 0, res.stderr
    return counter.total()


needs_syncfs = pytest.mark.skipif(
    not fsutil.sync_filesystem_available(), reason="syncfs(2) is Linux only"
)


@needs_syncfs
def test_fsyncs_per_command(
    counter: SyncCounter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dirty(monkeypatch, tmp_path, 100)
    store = tmp_path / "store"
    for key in ("a", "b", "c"):
        assert invoke(store, "admit", key).code == 0
    assert invoke(store, "admit", "d", "--needs", "c").code == 0
    assert counted(counter, store, "admit", "e") == ADMIT
    assert counted(counter, store, "claim", "--next", "--owner", "w", "--lease", "60s") == (
        CLAIM_NEXT
    )
    assert counter.calls["fdatasync"] == 1
    assert counted(counter, store, "claim", "c", "--owner", "w", "--lease", "60s") == CLAIM_NEXT
    fence = JsonFileStore(store).load("c")
    assert fence is not None
    n = counted(counter, store, "complete", "c", "--owner", "w", "--fence", str(fence.fence))
    assert n == COMPLETE_PROMOTING
    rec = JsonFileStore(store).load("d")
    assert rec is not None and rec.status == "pending"  # promoted: ready now
    n = counted(counter, store, "run", "--next", "--owner", "w", "--lease", "60s", "--", "true")
    assert n == RUN_NEXT


@needs_syncfs
def test_a_drain_syncs_once_per_task(
    counter: SyncCounter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dirty(monkeypatch, tmp_path, 100)
    store = tmp_path / "store"
    keys = [f"k{i}" for i in range(5)]
    for key in keys:
        assert invoke(store, "admit", key).code == 0
    argv = ("run", "--next", "--drain", "--owner", "w", "--lease", "60s", "--", "true")
    assert counted(counter, store, *argv) == 1 + DRAIN_PER_TASK * len(keys)
    for key in keys:
        rec = JsonFileStore(store).load(key)
        assert rec is not None and rec.status == "completed"


@needs_syncfs
def test_a_library_write_that_changes_no_count(
    counter: SyncCounter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dirty(monkeypatch, tmp_path, 100)
    store = JsonFileStore(tmp_path / "store")
    t0 = Instant.parse("2026-01-01T00:00:00Z")
    lease = Instant.parse("2026-01-01T00:01:00Z")
    claimed = TaskState(key="k", status="claimed", owner="w", lease_until=lease, created_at=t0)
    assert store.compare_and_swap("k", None, claimed)
    old = store.load("k")
    assert old is not None
    counter.calls.clear()
    later = Instant.parse("2026-01-01T00:02:00Z")
    assert store.compare_and_swap("k", old, old.replace(lease_until=later))
    assert counter.total() == LIBRARY_CAS_SAME_COUNTS
    assert counter.calls["syncfs"] == 0


@pytest.mark.parametrize("kib", [1024, 1 << 30])
def test_with_much_dirty_memory_each_file_is_fsynced(
    counter: SyncCounter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kib: int
) -> None:
    # 1 MiB of others' dirty pages: more than the claim's own fsyncs would write.
    dirty(monkeypatch, tmp_path, kib)
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert invoke(store, "admit", key).code == 0
    n = counted(counter, store, "claim", "--next", "--owner", "w", "--lease", "60s")
    assert n == FALLBACK_CLAIM_NEXT
    assert counter.calls["syncfs"] == 0


@needs_syncfs
@pytest.mark.parametrize(
    "extra",
    [
        ("--queue", "q"),
        ("--priority", "3"),
        ("--delay", "1m"),
        ("--queue", "r", "--not-before", "2026-06-01T00:00:00Z", "--priority", "-2"),
    ],
    ids=["queue", "priority", "delay", "all"],
)
def test_an_admission_with_a_queue_or_a_schedule_syncs_once(
    counter: SyncCounter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    dirty(monkeypatch, tmp_path, 100)
    store = tmp_path / "store"
    assert invoke(store, "admit", "first").code == 0
    assert counted(counter, store, "admit", "x", *extra) == ADMIT  # a new queue's partition too
    assert counted(counter, store, "admit", "y", *extra) == ADMIT
    # A rebase back to the default queue and no schedule: the files removed in the frame.
    assert counted(counter, store, "admit", "x", "--seq", "2") == ADMIT
    side = JsonFileStore(store)
    assert side.queue_of("x") is None and side.schedule_of("x") is None
    assert (side.queue_of("y") is not None) == ("--queue" in extra)
    assert (side.schedule_of("y") is not None) == (extra != ("--queue", "q"))


def _batch_lines(n: int, member: str) -> str:
    return "".join(f'{{"key":"k{i:04d}"{member}}}\n' for i in range(n))


@needs_syncfs
@pytest.mark.parametrize(
    "member",
    [',"queue":"q"', ',"priority":5', ',"not_before":"2026-06-01T00:00:00Z","queue":"q"'],
    ids=["queue", "priority", "both"],
)
def test_a_batch_with_queues_or_schedules_syncs_as_a_plain_one(
    counter: SyncCounter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, member: str
) -> None:
    """`admit --batch` of keys with a queue or a priority costs no more syncs
    than the same keys without (was 136 and 163 against 26 for 50 keys)."""
    dirty(monkeypatch, tmp_path, 100)
    plain = counted(
        counter, tmp_path / "plain", "admit", "--batch", "-", input=_batch_lines(50, "")
    )
    n = counted(counter, tmp_path / "side", "admit", "--batch", "-", input=_batch_lines(50, member))
    assert n <= plain
