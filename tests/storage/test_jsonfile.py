"""JsonFileStore specifics: on-disk layout, refusing corruption, crash recovery,
permissions, symlinks, locking. The Store contract itself is in
tests/storage/test_store_conformance.py; processes and SIGKILL in test_jsonfile_multiprocess.py."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.wire.decode import record_from_json
from ledger_cli.engine.wire.encode import record_to_json
from ledger_cli.errors import StoreDamageError, StoreError
from ledger_cli.stores import jsonfile
from ledger_cli.stores.jsonfile import JsonFileStore, durability, fsutil, key_digest, swap, wal
from ledger_cli.stores.jsonfile.locking import DEFAULT_LOCK_TIMEOUT
from tests.faults_support import unapplied

T0 = Instant.parse("2024-01-01T00:00:00Z")


def rec(key: str, status: str = "pending", **fields: Any) -> TaskState:
    base: dict[str, Any] = {
        "key": key,
        "status": status,
        "sequence": 1,
        "created_by": "t",
        "created_at": T0,
        "updated_by": "t",
        "updated_at": T0,
    }
    if status == "claimed":
        base.update(owner="w", lease_until=T0 + timedelta(minutes=1))
    base.update(fields)
    return TaskState(**base)


def record_path(root: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return root / "records" / digest[:2] / f"{digest}.json"


def entry(key: str, fence: int) -> HistoryEntry:
    return HistoryEntry(str(T0), "actor", "ledger.admitted", key, fence, f"key {key}")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> Iterator[JsonFileStore]:
    with JsonFileStore(root) as s:
        yield s


def all_files(path: Path) -> dict[str, bytes]:
    swap.wait_retired()  # this process's old files, unlinked by a thread (swap.py)
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# -- layout ------------------------------------------------------------------------------------


def test_a_record_file_is_the_wire_record_under_a_hashed_name(
    store: JsonFileStore, root: Path
) -> None:
    r = rec("backup/db-1", task={"cmd": "pg_dump <db>"})
    assert store.compare_and_swap("backup/db-1", None, r)
    path = record_path(root, "backup/db-1")
    # The wire record, with its SHA-256 as a last member (readers ignore it).
    body = record_to_json(r).encode("utf-8")
    sha = hashlib.sha256(body).hexdigest().encode()
    assert path.read_bytes() == body[:-1] + b',"Sum":"' + sha + b'"}\n'
    assert json.loads(path.read_text("utf-8"))["Key"] == "backup/db-1"
    assert record_from_json(path.read_bytes()) == r
    meta = json.loads((root / "ledger-store.json").read_text())
    assert meta == {"format": "ledger_cli.jsonfile", "version": 2, "fence_floor": 0}
    assert (root / "ledger.lock").exists()
    assert (root / "live" / path.stem).exists()  # pending: indexed for the ready scan


def test_keys_never_name_a_path_outside_their_shard(store: JsonFileStore, root: Path) -> None:
    keys = ["../x", "../../escape", "a/b", "/etc/passwd", "\x00", "." * 300, "é" * 600]
    for key in keys:
        assert store.compare_and_swap(key, None, rec(key))
    outside = sorted(p.name for p in root.parent.iterdir())
    assert outside == ["store"]
    names = {p.name for p in (root / "records").rglob("*.json")}
    assert len(names) == len(keys)
    assert all(len(n) == 69 for n in names)
    for key in keys:
        got = store.load(key)
        assert got is not None and got.key == key


def test_a_lone_surrogate_key_is_refused_not_mangled(store: JsonFileStore, root: Path) -> None:
    with pytest.raises(StoreError, match="not valid Unicode"):
        store.compare_and_swap("a\udc80", None, rec("a\udc80"))
    assert store.load("a\udc80") is None
    assert not root.exists()


def test_a_record_for_another_key_is_refused(store: JsonFileStore) -> None:
    with pytest.raises(StoreError, match="does not match"):
        store.compare_and_swap("a", None, rec("b"))


# -- nothing is created by readers -------------------------------------------------------------


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "not" / "yet"
    s = JsonFileStore(root)
    assert s.load("k") is None
    assert list(s.range()) == []
    assert list(s.read_history()) == []
    assert s.by_status(["pending"]) == []
    assert s.fence_floor == 0
    with s.batch():
        assert s.load("k") is None
        assert list(s.range()) == []
    assert not (tmp_path / "not").exists()
    assert s.compare_and_swap("k", None, rec("k"))  # the first write creates it
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_an_empty_existing_directory_is_read_as_an_empty_store(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    s = JsonFileStore(root)
    assert list(s.range()) == [] and s.load("x") is None
    assert list(root.iterdir()) == []  # no lock file planted by a reader


def test_a_foreign_non_empty_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not a ledger store"):  # when opened, or at the write
        JsonFileStore(tmp_path).compare_and_swap("k", None, rec("k"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# -- permissions -------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_modes_are_owner_only_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        root = tmp_path / "store"
        s = JsonFileStore(root)
        with s.batch():
            for key in ("a", "b", "c"):
                assert s.compare_and_swap(key, None, rec(key))
            s.append_history([entry("a", 1)])
        assert s.compare_and_swap("d", None, rec("d"))
        s.append_history([entry("d", 2)])
    finally:
        os.umask(old)
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


# -- refuse, never reset -----------------------------------------------------------------------

CORRUPTIONS: dict[str, Any] = {
    "truncated": lambda good: good[: len(good) // 2],
    "empty": lambda good: b"",
    "garbage": lambda good: b"\x00\x01garbage{{{",
    "array": lambda good: b"[1, 2, 3]\n",
    "null": lambda good: b"null\n",
    "object-without-fields": lambda good: b"{}\n",
    "wrong-types": lambda good: good.replace(b'"Sequence":1', b'"Sequence":"one"'),
    "negative-int": lambda good: good.replace(b'"Fence":0', b'"Fence":-1'),
    "unknown-status": lambda good: good.replace(b'"pending"', b'"paused"'),
    "invalid-utf8": lambda good: good.replace(b'"payload"', b'"pay\xffload"'),
    "other-key": lambda good: good.replace(b'"Key":"victim"', b'"Key":"impostor"'),
    "trailing-garbage": lambda good: good + b"}",
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_corrupt_record_file_is_refused_and_left_alone(
    store: JsonFileStore, root: Path, kind: str
) -> None:
    assert store.compare_and_swap("victim", None, rec("victim", task="payload"))
    assert store.compare_and_swap("bystander", None, rec("bystander"))
    path = record_path(root, "victim")
    bad = CORRUPTIONS[kind](path.read_bytes())
    path.write_bytes(bad)
    before = all_files(root)
    for attempt in (
        lambda: store.load("victim"),
        lambda: list(store.range()),
        lambda: store.compare_and_swap("victim", None, rec("victim")),
        lambda: store.compare_and_swap("victim", rec("victim"), rec("victim", sequence=2)),
        lambda: Ledger(store).admit("t", "victim", 5, None, T0),
        lambda: list(JsonFileStore(root).range()),
    ):
        with pytest.raises(StoreError) as info:
            attempt()
        assert str(path) in str(info.value)
    assert path.read_bytes() == bad
    assert all_files(root) == before
    bystander = store.load("bystander")
    assert bystander is not None  # the rest of the store still reads


@pytest.mark.parametrize(
    "meta",
    [
        b'{"format": "ledger_cli.jsonfile", "version": 3, "fence_floor": 0}\n',
        b'{"format": "ledger_cli.jsonfile", "version": "1", "fence_floor": 0}\n',
        b'{"format": "something-else", "version": 1}\n',
        b'{"format": "ledger_cli.jsonfile", "version": 1, "fence_floor": -3}\n',
        b"not json",
        b"",
    ],
)
def test_an_unknown_or_corrupt_format_file_is_refused(root: Path, meta: bytes) -> None:
    s = JsonFileStore(root)
    assert s.compare_and_swap("k", None, rec("k"))
    (root / "ledger-store.json").write_bytes(meta)
    before = all_files(root)
    for attempt in (
        lambda: JsonFileStore(root),
        lambda: s.compare_and_swap("j", None, rec("j")),
        lambda: list(s.range()),
        lambda: s.append_history([entry("k", 1)]),
    ):
        with pytest.raises(StoreError) as info:
            attempt()
        assert str(root / "ledger-store.json") in str(info.value)
    assert all_files(root) == before


def test_records_without_a_format_file_are_refused(root: Path) -> None:
    s = JsonFileStore(root)
    assert s.compare_and_swap("k", None, rec("k"))
    (root / "ledger-store.json").unlink()
    before = all_files(root)
    with pytest.raises(StoreError, match="missing"):
        JsonFileStore(root)
    with pytest.raises(StoreError, match="missing"):
        s.compare_and_swap("j", None, rec("j"))
    assert all_files(root) == before


def test_a_symlinked_record_file_is_refused(
    store: JsonFileStore, root: Path, tmp_path: Path
) -> None:
    assert store.compare_and_swap("k", None, rec("k"))
    target = tmp_path / "outside.json"
    target.write_bytes(record_path(root, "k").read_bytes())
    record_path(root, "k").unlink()
    record_path(root, "k").symlink_to(target)
    with pytest.raises(StoreError, match="symlink"):
        store.load("k")
    with pytest.raises(StoreError, match="symlink"):
        store.compare_and_swap("k", rec("k"), rec("k", sequence=2))
    assert json.loads(target.read_text())["Sequence"] == 1


def test_a_symlinked_shard_directory_is_never_written_through(
    store: JsonFileStore, root: Path, tmp_path: Path
) -> None:
    assert store.compare_and_swap("k", None, rec("k"))
    shard = record_path(root, "x").parent
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    if shard.exists():
        for p in shard.iterdir():
            p.rename(outside / p.name)
        shard.rmdir()
    before = sorted(p.name for p in outside.iterdir())
    shard.symlink_to(outside, target_is_directory=True)
    with pytest.raises(StoreError, match="symlink"):
        store.compare_and_swap("x", None, rec("x"))
    assert sorted(p.name for p in outside.iterdir()) == before


def test_a_symlinked_history_file_is_never_appended_through(
    store: JsonFileStore, root: Path, tmp_path: Path
) -> None:
    store.append_history([entry("a", 1)])
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    (root / "history.jsonl").unlink()
    (root / "history.jsonl").symlink_to(target)
    with pytest.raises(StoreError):
        store.append_history([entry("b", 2)])
    assert target.read_text() == "precious\n"


# -- history -----------------------------------------------------------------------------------


def test_a_history_ending_mid_line_is_refused_never_cut(store: JsonFileStore, root: Path) -> None:
    """Every append goes through a journal, whose replay cuts what a crash
    tore (test_faults_crash.py); a file ending mid-line without one is damage
    (a truncation): readers yield the whole lines, then, finding it still
    there under the lock, refuse it as writers do."""
    store.append_history([entry("a", 1), entry("b", 2)])
    path = root / "history.jsonl"
    whole = path.read_bytes()
    damaged = whole + b'{"time":"2024-01-01T00:00:00Z","actor":"x","ev'
    path.write_bytes(damaged)
    read = store.read_history()
    assert [next(read).key, next(read).key] == ["a", "b"]
    with pytest.raises(StoreDamageError, match=r"history\.jsonl: damaged history"):
        next(read)
    with pytest.raises(StoreDamageError, match=r"history\.jsonl: damaged history"):
        store.append_history([entry("c", 3)])
    assert path.read_bytes() == damaged
    assert not (root / "journal.json").exists()


def test_a_corrupt_history_line_in_the_middle_is_refused(store: JsonFileStore, root: Path) -> None:
    store.append_history([entry("a", 1), entry("b", 2), entry("c", 3)])
    path = root / "history.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = b'{"not": "an entry"}'
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(StoreError, match="line 2"):
        list(store.read_history())


# -- crash recovery ----------------------------------------------------------------------------


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs (not even except Exception)."""


def test_a_batch_interrupted_after_its_commit_point_is_replayed_on_open(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = JsonFileStore(root)
    assert s.compare_and_swap("old", None, rec("old"))
    s.append_history([entry("old", 0)])
    calls = {"n": 0}
    real = fsutil.replace_file

    def dying_replace(dir_fd: int, name: str, data: bytes, shown: str, **kw: Any) -> None:
        if name.endswith(".json") and len(name) == 69:
            calls["n"] += 1
            if calls["n"] == 3:  # the journal is durable; two of five records applied
                raise Crash()
        real(dir_fd, name, data, shown, **kw)

    monkeypatch.setattr(fsutil, "replace_file", dying_replace)
    with pytest.raises(Crash), s.batch():
        cur = s.load("old")
        assert cur is not None
        assert s.compare_and_swap("old", cur, cur.replace(sequence=2))
        for key in ("b1", "b2", "b3", "b4"):
            assert s.compare_and_swap(key, None, rec(key))
        s.append_history([entry("b1", 1), entry("b2", 2)])
    monkeypatch.setattr(fsutil, "replace_file", real)
    assert unapplied(root)  # a wal.log frame (or journal.json where the log is not used)
    reopened = JsonFileStore(root)  # replays it
    assert not unapplied(root)
    keys = [(r.key, r.sequence, r.rev) for r in reopened.range()]
    assert keys == [("b1", 1, 0), ("b2", 1, 0), ("b3", 1, 0), ("b4", 1, 0), ("old", 2, 1)]
    assert [e.key for e in reopened.read_history()] == ["old", "b1", "b2"]


def test_a_batch_interrupted_before_its_commit_point_leaves_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = JsonFileStore(root)
    assert s.compare_and_swap("old", None, rec("old"))
    real, real_data = fsutil.fsync_fd, os.fdatasync

    def dying_fsync(fd: int, shown: str) -> None:
        raise Crash()

    def dying_fdatasync(fd: int) -> None:
        raise Crash()

    with pytest.raises(Crash), s.batch():
        for key in ("b1", "b2"):
            assert s.compare_and_swap(key, None, rec(key))
        monkeypatch.setattr(fsutil, "fsync_fd", dying_fsync)
        monkeypatch.setattr(os, "fdatasync", dying_fdatasync)
    monkeypatch.setattr(fsutil, "fsync_fd", real)
    monkeypatch.setattr(os, "fdatasync", real_data)
    # The frame (wal.log) or journal file is written but the crash hit before
    # the commit point's sync; on a real crash it may or may not survive.
    # Either way the store is the old state or the whole batch.
    reopened = JsonFileStore(root)
    keys = [r.key for r in reopened.range()]
    assert keys in (["old"], ["b1", "b2", "old"])


def test_a_corrupt_journal_is_refused(root: Path) -> None:
    s = JsonFileStore(root)
    assert s.compare_and_swap("k", None, rec("k"))
    (root / "journal.json").write_bytes(b'{"format": "ledger_cli.journal"}\n')
    before = all_files(root)
    with pytest.raises(StoreError, match="journal"):
        JsonFileStore(root)
    assert all_files(root) == before


def test_stray_temporary_files_are_ignored_then_swept(store: JsonFileStore, root: Path) -> None:
    assert store.compare_and_swap("k", None, rec("k"))
    shard = record_path(root, "k").parent
    strays = [shard / ".x.json.1.deadbeef.tmp", root / ".ledger-store.json.2.cafe.tmp"]
    for p in strays:
        p.write_bytes(b"{half a rec")
    assert store.load("k") is not None
    assert [r.key for r in store.range()] == ["k"]
    assert not any(p.exists() for p in strays)


# -- durability --------------------------------------------------------------------------------


def test_a_single_write_fsyncs_file_and_directory(
    store: JsonFileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.compare_and_swap("warm", None, rec("warm"))  # creates the directories
    synced: list[str] = []
    real, real_data = os.fsync, os.fdatasync

    def spy(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    def data_spy(fd: int) -> None:
        synced.append("log" if os.fstat(fd).st_size else "?")
        real_data(fd)

    monkeypatch.setattr(os, "fsync", spy)
    monkeypatch.setattr(os, "fdatasync", data_spy)
    cur = store.load("warm")
    assert cur is not None
    assert store.compare_and_swap("warm", cur, cur.replace(sequence=2))
    if wal.enabled():
        assert synced == ["log"]  # the wal.log frame, the commit point: nothing else
    else:
        # The root directory first (a journal removed since is durable then, so
        # a power cut cannot bring it back over this write: journal.py), then
        # the new bytes, then the rename.
        assert synced == ["dir", "file", "dir"]


def test_a_large_batch_syncs_once(
    store: JsonFileStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if not fsutil.sync_filesystem_available():
        pytest.skip("no syncfs(2) here")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("Dirty: 100 kB\nWriteback: 0 kB\n")  # little else to write
    monkeypatch.setattr(durability, "MEMINFO", str(meminfo))
    calls: list[int] = []
    fsyncs: list[int] = []
    real_syncfs, real_fsync = fsutil.sync_filesystem, os.fsync

    def syncfs_spy(fd: int, shown: str) -> None:
        calls.append(fd)
        real_syncfs(fd, shown)

    def fsync_spy(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(fsutil, "sync_filesystem", syncfs_spy)
    monkeypatch.setattr(os, "fsync", fsync_spy)
    with store.batch():
        for i in range(200):
            assert store.compare_and_swap(f"k{i}", None, rec(f"k{i}"))
    assert len(calls) == 1
    # The journal, and the directories and indexes a new store's first write
    # makes (about 20 with the ready index's queue partitions): not one a record.
    assert len(fsyncs) < 32
    assert len(list(store.range())) == 200


# -- fence floor -------------------------------------------------------------------------------


def test_the_fence_floor_lifts_inserts_and_persists(root: Path) -> None:
    s = JsonFileStore(root)
    assert s.compare_and_swap("first", None, rec("first"))
    meta_path = root / "ledger-store.json"
    meta = json.loads(meta_path.read_text())
    meta["fence_floor"] = 4
    meta_path.write_text(json.dumps(meta))
    reopened = JsonFileStore(root)
    assert reopened.fence_floor == 4
    ledger = Ledger(reopened)
    assert ledger.admit("t", "new", 1, None, T0)
    got = reopened.load("new")
    assert got is not None and got.fence == 4
    assert ledger.claim("t", "new", "w", timedelta(minutes=1), T0) == 5
    assert JsonFileStore(root).fence_floor == 4


# -- the live index ----------------------------------------------------------------------------


def test_by_status_reads_only_live_records_and_heals_the_index(
    store: JsonFileStore, root: Path
) -> None:
    ledger = Ledger(store)
    for i in range(5):
        assert ledger.admit("t", f"done-{i}", 1, None, T0 + timedelta(seconds=i))
        fence = ledger.claim("t", f"done-{i}", "w", timedelta(minutes=1), T0)
        ledger.complete("t", f"done-{i}", "w", fence, "completed", T0)
    assert ledger.admit("t", "todo", 1, None, T0)
    assert sorted(p.name for p in (root / "live").iterdir()) == [str(key_digest("todo"))]
    completed = record_path(root, "done-0").read_bytes()
    # Make every finished record unreadable: the ready scan must not touch them.
    for i in range(5):
        record_path(root, f"done-{i}").write_bytes(b"garbage")
    assert [r.key for r in store.by_status(["pending", "claimed"])] == ["todo"]
    # A stale marker (a crash between the record write and the marker removal) heals.
    for i in range(5):
        record_path(root, f"done-{i}").unlink()
    record_path(root, "done-0").write_bytes(completed)
    marker = root / "live" / str(key_digest("done-0"))
    marker.touch()
    assert [r.key for r in store.by_status(["pending"])] == ["todo"]
    assert not marker.exists()
    # A marker whose record file is missing (not pruned) names a lost record:
    # kept, and the scan refuses to answer without it, until a drop accepts it.
    record_path(root, "done-0").unlink()
    marker.touch()
    with pytest.raises(StoreError, match=r"the record is lost"):
        store.by_status(["pending"])
    assert marker.exists()
    assert [r.key for r in store.by_status(["pending"], drop_lost=True)] == ["todo"]
    assert not marker.exists()


# -- locking -----------------------------------------------------------------------------------


def test_a_lock_held_too_long_is_a_store_error(root: Path) -> None:
    holder = JsonFileStore(root)
    assert holder.compare_and_swap("k", None, rec("k"))
    waiter = JsonFileStore(root, lock_timeout=0.3)
    with holder.batch():
        start = time.monotonic()
        with pytest.raises(StoreError, match=r"locked by another process \(waited 0.3s\)"):
            waiter.compare_and_swap("j", None, rec("j"))
        waited = time.monotonic() - start
        assert waiter.load("k") is not None  # reads never wait
    # It waited its own timeout, not the default one (no upper bound tighter than that:
    # a loaded machine may be slow to wake the waiter).
    assert 0.3 <= waited < DEFAULT_LOCK_TIMEOUT
    assert waiter.compare_and_swap("j", None, rec("j"))  # and the queue is usable again


def test_threads_sharing_a_store_wait_for_a_batch(store: JsonFileStore) -> None:
    assert store.compare_and_swap("k", None, rec("k", sequence=0))
    order: list[str] = []
    entered = threading.Event()
    loaded = threading.Event()

    def other() -> None:
        entered.wait()
        cur = store.load("k")
        loaded.set()
        assert cur is not None
        ok = store.compare_and_swap("k", cur, cur.replace(sequence=cur.sequence + 1))
        order.append(f"thread:{ok}")

    t = threading.Thread(target=other)
    t.start()
    with store.batch():
        cur = store.load("k")
        assert cur is not None
        assert store.compare_and_swap("k", cur, cur.replace(sequence=10))
        entered.set()
        assert loaded.wait(60)  # it read before the batch committed (a state, not a time)
        time.sleep(0.05)  # a chance for its write to start waiting (not needed to pass)
        order.append("batch")
    t.join(10)
    # The thread read before the batch committed, so its compare fails: no lost update.
    assert order == ["batch", "thread:False"]
    final = store.load("k")
    assert final is not None and final.sequence == 10


def test_closed_store_refuses(store: JsonFileStore) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.load("k")


def test_the_module_does_not_import_filelock_until_locking(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ledger_cli.stores.jsonfile import JsonFileStore\n"
        f"s = JsonFileStore({str(tmp_path / 's')!r})\n"
        "s.load('k')\n"
        "assert 'filelock' not in sys.modules, 'load imported filelock'\n"
        "import ledger_cli.stores\n"
        "for m in ('platformdirs', 'sqlite3'):\n"
        "    assert m not in sys.modules, m\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
    assert jsonfile.FORMAT_VERSION == 2


def test_the_live_index_of_a_large_batch_is_one_file_per_shard(
    store: JsonFileStore, root: Path
) -> None:
    n = jsonfile.SYNC_EACH_MAX * 4
    ledger = Ledger(store)
    with store.batch():
        for i in range(n):
            assert ledger.admit("t", f"b{i:03d}", 1, None, T0 + timedelta(seconds=i))
    live = sorted(p.name for p in (root / "live").iterdir())
    assert live and all(name.endswith(".idx") for name in live)  # no marker per record
    assert [r.key for r in store.by_status(["pending"])] == [f"b{i:03d}" for i in range(n)]
    # Finish half of them one by one: the scan drops them, and heals the index files.
    for i in range(0, n, 2):
        fence = ledger.claim("t", f"b{i:03d}", "w", timedelta(minutes=1), T0)
        ledger.complete("t", f"b{i:03d}", "w", fence, "completed", T0)
    want = [f"b{i:03d}" for i in range(1, n, 2)]
    assert [r.key for r in store.by_status(["pending", "claimed"])] == want
    indexed = {d for p in (root / "live").glob("*.idx") for d in p.read_text().split()}
    assert indexed == {key_digest(k) for k in want}
    (root / "live" / live[0]).write_text("not-a-digest\n")
    with pytest.raises(StoreError, match=live[0]):
        store.by_status(["pending"])


def test_no_garbage_collection_while_the_lock_is_held(
    store: JsonFileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full collection over a big heap takes most of a second: none runs
    while the store's lock is held, in a write or in the short read holds of
    a dependents walk (engine/collector.py), and the collector is on again
    after each."""
    import gc

    at_release: list[bool] = []
    lock = store._lock
    release = lock.release

    def recording_release() -> None:
        at_release.append(gc.isenabled())
        release()

    monkeypatch.setattr(lock, "release", recording_release)
    led = Ledger(store)
    led.admit("t", "root", 1, None, T0)
    with store.batch():
        for i in range(3):
            led.admit("t", f"dep-{i}", 1, None, T0, "root")
    assert [r.key for r in store.dependents(["root"])] == ["dep-0", "dep-1", "dep-2"]
    assert len(at_release) >= 3 and not any(at_release), at_release
    assert gc.isenabled()
