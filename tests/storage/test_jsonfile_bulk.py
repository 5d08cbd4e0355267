"""The JSON store's large batches: how they are made durable (one syncfs(2) while
little else is dirty, an fsync per file otherwise) and their append-only live/
index (a batch's cost is its own size, not the store's)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import JsonFileStore, durability, fsutil, key_digest
from tests.storage.test_jsonfile import rec

N = 64  # records a batch: well past SYNC_EACH_MAX


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> Iterator[JsonFileStore]:
    with JsonFileStore(root) as s:
        yield s


def fake_meminfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dirty_kb: int) -> None:
    path = tmp_path / "meminfo"
    path.write_text(
        f"MemTotal:       24000000 kB\nDirty:          {dirty_kb:>8} kB\n"
        "Writeback:             0 kB\nWritebackTmp:          0 kB\n"
    )
    monkeypatch.setattr(durability, "MEMINFO", str(path))


class Syncs:
    """Counts syncfs(2) calls and fsync(2) calls on regular files and directories."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.syncfs = 0
        self.files = 0
        self.dirs = 0
        real_syncfs, real_fsync = fsutil.sync_filesystem, os.fsync

        def syncfs_spy(fd: int, shown: str) -> None:
            self.syncfs += 1
            real_syncfs(fd, shown)

        def fsync_spy(fd: int) -> None:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                self.dirs += 1
            else:
                self.files += 1
            real_fsync(fd)

        monkeypatch.setattr(fsutil, "sync_filesystem", syncfs_spy)
        monkeypatch.setattr(os, "fsync", fsync_spy)


def admit_all(store: JsonFileStore, keys: list[str], status: str = "pending") -> None:
    with store.batch():
        for key in keys:
            cur = store.load(key)
            assert store.compare_and_swap(key, cur, rec(key, status))


def live_lines(root: Path) -> list[str]:
    return [
        line
        for p in sorted((root / "live").glob("*.idx"))
        for line in p.read_text().splitlines()
        if line
    ]


def test_little_dirty_memory_one_syncfs(
    store: JsonFileStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not fsutil.sync_filesystem_available():
        pytest.skip("no syncfs(2) here")
    fake_meminfo(tmp_path, monkeypatch, 1024)
    syncs = Syncs(monkeypatch)
    admit_all(store, [f"k{i:03d}" for i in range(N)])
    assert syncs.syncfs == 1
    assert syncs.files < 10  # the journal, not a record file each


@pytest.mark.parametrize("dirty_kb", [(durability.DIRTY_MAX >> 10) + 1, None])
def test_much_dirty_memory_an_fsync_per_file(
    store: JsonFileStore,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dirty_kb: int | None,
) -> None:
    """Someone else's pending writes would make a syncfs(2) under the lock as long
    as they are: each file is fsynced instead (also where the kernel says nothing)."""
    if dirty_kb is None:
        monkeypatch.setattr(durability, "MEMINFO", str(tmp_path / "missing"))
    else:
        fake_meminfo(tmp_path, monkeypatch, dirty_kb)
    syncs = Syncs(monkeypatch)
    keys = [f"k{i:03d}" for i in range(N)]
    admit_all(store, keys)
    assert syncs.syncfs == 0
    assert syncs.files >= N  # every record file (and the journal, the index files)
    assert [r.key for r in store.by_status(["pending"])] == keys
    assert not (root / "journal.json").exists()


def test_a_batch_appends_to_the_live_index(store: JsonFileStore, root: Path) -> None:
    first = [f"a{i:03d}" for i in range(N)]
    admit_all(store, first)
    inodes = {p.name: p.stat().st_ino for p in (root / "live").glob("*.idx")}
    assert sorted(live_lines(root)) == sorted(key_digest(k) for k in first)
    second = [f"b{i:03d}" for i in range(N)]
    admit_all(store, second)
    # Appended in place: the first batch's files are the same files, grown.
    for name, ino in inodes.items():
        assert (root / "live" / name).stat().st_ino == ino
    assert sorted(live_lines(root)) == sorted(key_digest(k) for k in first + second)
    # Claiming records the index lists already appends nothing.
    admit_all(store, first, "claimed")
    assert len(live_lines(root)) == 2 * N
    # Finishing them leaves stale entries, which the scan drops.
    admit_all(store, first, "completed")
    assert [r.key for r in store.by_status(["pending", "claimed"])] == second
    assert sorted(live_lines(root)) == sorted(key_digest(k) for k in second)


def test_repeated_entries_are_tidied_by_the_scan(store: JsonFileStore, root: Path) -> None:
    keys = [f"k{i:03d}" for i in range(N)]
    admit_all(store, keys)
    # A replayed journal knows nothing of what was indexed: it appends again.
    digests = live_lines(root)
    path = next((root / "live").glob("*.idx"))
    path.write_text(path.read_text() * 2)
    assert len(live_lines(root)) > len(digests)
    assert [r.key for r in store.by_status(["pending"])] == keys
    assert sorted(live_lines(root)) == sorted(digests)


def test_a_torn_append_is_skipped_and_tidied(store: JsonFileStore, root: Path) -> None:
    keys = [f"k{i:03d}" for i in range(N)]
    admit_all(store, keys)
    path = next((root / "live").glob("*.idx"))
    shard = path.name[:2]
    with open(path, "a") as fh:
        fh.write("\n" + shard + "0f3")  # an append cut short by a crash
    assert [r.key for r in store.by_status(["pending"])] == keys
    assert path.read_text().endswith("\n")
    more = [f"m{i:03d}" for i in range(N)]
    admit_all(store, more)
    assert [r.key for r in store.by_status(["pending"])] == keys + more


@pytest.mark.parametrize("junk", ["not-a-digest", "zz" + "0" * 62, "0" * 70])
def test_a_damaged_live_index_is_refused(store: JsonFileStore, root: Path, junk: str) -> None:
    admit_all(store, [f"k{i:03d}" for i in range(N)])
    path = next((root / "live").glob("*.idx"))
    with open(path, "a") as fh:
        fh.write(junk + "\n")
    with pytest.raises(StoreError, match=path.name):
        store.by_status(["pending"])


def test_a_store_with_rewritten_index_files_still_reads(store: JsonFileStore, root: Path) -> None:
    """Index files as earlier releases wrote them (sorted, rewritten whole) read the same."""
    keys = [f"k{i:03d}" for i in range(N)]
    admit_all(store, keys)
    for p in (root / "live").glob("*.idx"):
        p.write_text("".join(d + "\n" for d in sorted(p.read_text().split())))
    assert [r.key for r in store.by_status(["pending"])] == keys


# -- spare files (spares.py) ----------------------------------------------------------------


def test_a_run_of_large_batches_writes_into_spare_files(
    store: JsonFileStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store._spares.usable:
        pytest.skip("no O_TMPFILE here")
    admit_all(store, [f"a{i:03d}" for i in range(N)])
    assert len(store._spares._fds) == 0 and store._spares.want == 2 * N
    created: list[str] = []
    real_open = os.open

    def open_spy(path: str, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_CREAT and str(path).endswith(fsutil.TEMP_SUFFIX):
            created.append(str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", open_spy)
    second = [f"b{i:03d}" for i in range(N)]
    admit_all(store, second)
    # No record file was created under the lock: each one is a spare, linked.
    assert not [p for p in created if p.endswith(".json" + fsutil.TEMP_SUFFIX)]
    assert len(store._spares._fds) == N  # the rest waits for the next batch
    fresh = JsonFileStore(root)
    assert [r.key for r in fresh.by_status(["pending"])][-N:] == second
    for key in second:
        path = root / "records" / key_digest(key)[:2] / f"{key_digest(key)}.json"  # type: ignore[index]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_nlink == 1
        fresh.check_record_file(path.read_bytes(), str(path), path.stem)
    store.close()
    assert store._spares._fds == []


@pytest.mark.parametrize("func", ["link", "write"])
@pytest.mark.parametrize("persistent", [False, True])
def test_a_failure_writing_into_a_spare_leaves_before_or_after(
    root: Path, func: str, persistent: bool
) -> None:
    from tests.faults_support import OsFaults, logical_state, temps

    store = JsonFileStore(root)
    if not store._spares.usable:
        pytest.skip("no O_TMPFILE here")
    admit_all(store, [f"a{i:03d}" for i in range(N)])
    store._fill_spares()
    before = logical_state(root)
    k = N // 2
    faults = OsFaults(fail=(func, k), persistent=persistent)
    with faults, pytest.raises(StoreError, match="injected"):
        admit_all(store, [f"b{i:03d}" for i in range(N)])
    assert faults.injected
    store.close()
    after = logical_state(root)  # a fresh opener replays the journal
    assert after != before
    assert len(after[0]) == 2 * N
    JsonFileStore(root).compare_and_swap("next", None, rec("next"))
    assert temps(root) == []


def test_a_large_batch_syncs_whichever_is_cheaper(
    store: JsonFileStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dirty memory past DIRTY_MAX, but less than what an fsync per file would
    cost: one syncfs(2) still."""
    if not fsutil.sync_filesystem_available():
        pytest.skip("no syncfs(2) here")
    monkeypatch.setattr(durability, "DIRTY_MAX", 1 << 20)
    fake_meminfo(tmp_path, monkeypatch, (N * durability.FSYNC_BYTES >> 10) - 1)
    syncs = Syncs(monkeypatch)
    admit_all(store, [f"k{i:03d}" for i in range(N)])
    assert syncs.syncfs == 1


def test_a_run_of_large_batches_flushes_before_taking_the_lock(
    store: JsonFileStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not fsutil.sync_filesystem_available():
        pytest.skip("no syncfs(2) here")
    admit_all(store, [f"a{i:03d}" for i in range(N)])  # a large commit: a run may follow
    fake_meminfo(tmp_path, monkeypatch, (durability.DIRTY_MAX >> 10) * 4)
    flushed_unlocked: list[bool] = []
    real_syncfs = fsutil.sync_filesystem

    def syncfs_spy(fd: int, shown: str) -> None:
        flushed_unlocked.append(not store._holding())
        real_syncfs(fd, shown)

    monkeypatch.setattr(fsutil, "sync_filesystem", syncfs_spy)
    admit_all(store, [f"b{i:03d}" for i in range(N)])
    assert flushed_unlocked[:1] == [True]  # first, before the lock
