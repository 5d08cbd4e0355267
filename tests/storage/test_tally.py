"""The JSON store's tally (stores/jsonfile/tally.py): counts kept by every
write, read by `stats` and `watch` instead of the records; checked and
rebuilt by `doctor`; rebuilt by the next writer when missing. (Crashes at
every step of the write path, prune included: tests/faults/test_faults_crash.py.)"""

from __future__ import annotations

import collections
import dataclasses
import json
import random
import shutil
from pathlib import Path

import pytest

from ledger_cli.cli.commands import stats, watch
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import JsonFileStore, tally
from tests.faults_support import invoke

NOW = "2026-01-02T03:04:05Z"
LATER = "2026-01-02T05:00:00Z"


def brute(store: JsonFileStore, now: Instant) -> stats.Stats:
    """`stats` as it was: every unpruned record read and judged."""
    from ledger_cli.engine import ready

    records = {r.key: r for r in store.scan_visible()}
    counts = collections.Counter(r.status for r in records.values())
    found = ready.ready_records(
        records.values(), lambda k: records[k] if k in records else store.load(k), now
    )
    oldest = None if not found else max(now.unix_ns - found[0].created_at.unix_ns, 0) / 1e9
    return stats.Stats(
        {s: counts[s] for s in stats.STATUSES},
        store.count_pruned(),
        len(found),
        sum(r.status == "claimed" and r.lease_until <= now for r in records.values()),
        oldest,
    )


def agrees(root: Path, now: str = LATER) -> None:
    store = JsonFileStore(root)
    assert store.check_tally_index() == []
    at = Instant.parse(now)
    # Queue figures have their own tests (test_queues.py); the tally is this one's.
    assert dataclasses.replace(stats.collect(store, at), queues={}) == brute(store, at)


def fence_of(root: Path, key: str) -> str:
    rec = JsonFileStore(root).load(key)
    assert rec is not None
    return str(rec.fence)


def test_random_writes_keep_the_tally_exact(tmp_path: Path) -> None:
    rng = random.Random(21)
    root = tmp_path / "store"
    keys = [f"k{i}" for i in range(14)]
    for step in range(90):
        key = rng.choice(keys)
        rec = JsonFileStore(root).load(key) if root.exists() else None
        op = rng.random()
        if rec is None or op < 0.15:
            needs = rng.sample([k for k in keys if k != key], rng.choice([0, 0, 1, 2]))
            args = ["admit", key] + (["--needs", ",".join(needs)] if needs else [])
            if rec is not None:
                args += ["--seq", str(rec.sequence + 1)]
            invoke(root, *args, now=NOW)
        elif rec.status == "pending" or op < 0.3:
            lease = rng.choice(["1s", "1h"])
            invoke(root, "claim", key, "--owner", "w", "--lease", lease, now=NOW)
        elif rec.status == "claimed":
            failed = ["--failed"] if op < 0.5 else []
            invoke(root, "complete", key, "--owner", "w", "--fence", fence_of(root, key), *failed)
        elif rec.status in ("failed", "blocked") and op < 0.7:
            invoke(root, "retry", key)
        elif op < 0.75:
            invoke(root, "prune", "--older-than", "0s", now=LATER)
        if step % 10 == 0:
            agrees(root)
    agrees(root)
    agrees(root, NOW)


def test_stats_and_watch_read_only_the_noted_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    store = JsonFileStore(root)
    t0 = Instant.parse(NOW)
    with store.batch():
        for i in range(300):
            rec = TaskState(key=f"p{i:03d}", status="pending", created_at=t0, updated_at=t0)
            assert store.compare_and_swap(rec.key, None, rec)
        lease = Instant.parse(LATER)
        for i in range(3):
            rec = TaskState(
                key=f"c{i}", status="claimed", owner="w", lease_until=lease, created_at=t0
            )
            assert store.compare_and_swap(rec.key, None, rec)
        waiting = TaskState(key="w0", status="pending", needs=("c0",), created_at=t0)
        assert store.compare_and_swap("w0", None, waiting)
    reads: list[str] = []
    real = JsonFileStore._read_digest

    def counted(self: JsonFileStore, root_fd: int, digest: str) -> TaskState | None:
        reads.append(digest)
        return real(self, root_fd, digest)

    def no_scan(self: JsonFileStore) -> None:
        raise AssertionError("a full scan")

    monkeypatch.setattr(JsonFileStore, "_read_digest", counted)
    monkeypatch.setattr(JsonFileStore, "scan_visible", no_scan)
    monkeypatch.setattr(JsonFileStore, "visible_range", no_scan)
    figures = stats.collect(store, t0)
    assert figures.counts["pending"] == 301 and figures.counts["claimed"] == 3
    assert figures.ready == 300
    # The noted ones (twice: the claimed, the ready split), the first plain
    # one, the needs of the noted ones judged; and the claimed ones once more,
    # for their queues' held slots (engine/queues.py held_by_queue).
    assert len(reads) <= 2 * 4 + 1 + 4 + 3 + 1
    reads.clear()
    shown, total = watch.unfinished(store, None, limit=20, counts=figures.counts)
    assert total == 304
    assert [r.key for r in shown] == sorted(["c0", "c1", "c2", *(f"p{i:03d}" for i in range(17))])
    assert len(reads) <= 2 * 4 + 20


def test_a_store_without_a_tally_is_counted_from_the_records_then_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "store"
    for key in ("a", "b"):
        assert invoke(root, "admit", key).code == 0
    assert invoke(root, "claim", "a", "--owner", "w", "--lease", "1h").code == 0
    shutil.rmtree(root / "tally")  # as a store older than the tally
    store = JsonFileStore(root)
    assert store.status_counts() is None
    agrees(root)  # stats reads the records meanwhile
    assert invoke(root, "admit", "c").code == 0  # the next writer builds it
    assert store.status_counts() == {
        "pending": 2, "claimed": 1, "completed": 0, "failed": 0, "blocked": 0
    }  # fmt: skip
    agrees(root)


def test_doctor_reports_a_wrong_tally_and_fix_rebuilds_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    for key in ("a", "b"):
        assert invoke(root, "admit", key).code == 0
    path = root / "tally" / "counts"
    counts = json.loads(path.read_text())["counts"]
    counts["pending"] = 7  # a whole counts file, its checksum right, the count wrong
    path.write_bytes(tally.encode_counts(counts))
    res = invoke(root, "doctor")
    assert res.code == 9
    assert "tally: pending count is 7, the records say 2" in res.stdout
    res = invoke(root, "doctor", "--fix")
    assert "rebuilt the tally" in res.stdout
    assert invoke(root, "doctor").code == 0
    agrees(root)


def test_a_damaged_counts_file_is_reported_by_stats(tmp_path: Path) -> None:
    root = tmp_path / "store"
    assert invoke(root, "admit", "a").code == 0
    (root / "tally" / "counts").write_text("{")
    res = invoke(root, "stats")
    assert res.code == 9
    assert "corrupt tally counts" in res.stderr and "doctor --fix" in res.stderr


def test_a_journal_without_counts_leaves_the_tally_to_be_rebuilt(tmp_path: Path) -> None:
    # A journal written by a release before the tally (no "counts"): replayed,
    # and the tally removed, for the next writer to rebuild.
    root = tmp_path / "store"
    assert invoke(root, "admit", "a").code == 0
    store = JsonFileStore(root)
    rec = store.load("a")
    assert rec is not None
    from ledger_cli.stores.jsonfile.records import encode_record

    done = rec.replace(status="failed", rev=rec.rev + 1)
    header = {
        "format": "ledger_cli.journal", "version": 1, "records": 1, "history": 0,
        "history_at": None,
    }  # fmt: skip
    (root / "journal.json").write_bytes((json.dumps(header) + "\n").encode() + encode_record(done))
    store = JsonFileStore(root)  # replays it
    assert not (root / "journal.json").exists()
    assert store.status_counts() is None
    assert invoke(root, "admit", "b").code == 0
    agrees(root)


def test_a_prune_cut_short_leaves_the_tally_to_the_next_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger_cli.stores.jsonfile import prunedfile

    root = tmp_path / "store"
    for key in ("a", "b", "c"):
        assert invoke(root, "admit", key).code == 0
    for key in ("a", "b"):
        assert invoke(root, "claim", key, "--owner", "w", "--lease", "1h").code == 0
        assert (
            invoke(root, "complete", key, "--owner", "w", "--fence", fence_of(root, key)).code == 0
        )

    def crash(*args: object) -> None:
        raise KeyboardInterrupt  # as a kill after the records went, before the tally came back

    monkeypatch.setattr(prunedfile, "write_count", crash)
    with pytest.raises(KeyboardInterrupt):
        JsonFileStore(root).prune_records(
            [
                (r, r.replace(task=None))
                for r in JsonFileStore(root).range()
                if r.status == "completed"
            ]
        )
    monkeypatch.undo()
    store = JsonFileStore(root)
    assert store.status_counts() is None  # removed before the prune touched a record
    assert store.count_pruned() == 2  # its count too: counted from pruned/ meanwhile
    agrees(root)  # counted from the records meanwhile
    assert invoke(root, "admit", "d").code == 0  # the next writer rebuilds it
    assert store.status_counts() is not None
    agrees(root)
    assert invoke(root, "prune", "--older-than", "0s", now=LATER).code == 0  # nothing left
    assert store.count_pruned() == 2


def _waiting_store(root: Path, n: int) -> JsonFileStore:
    """A claimed root and `n` pending dependents needing it (noted, spread over
    the tally's shards)."""
    store = JsonFileStore(root)
    t0 = Instant.parse(NOW)
    with store.batch():
        lease = Instant.parse(LATER)
        rec = TaskState(key="root", status="claimed", owner="w", lease_until=lease, created_at=t0)
        assert store.compare_and_swap("root", None, rec)
        for i in range(n):
            dep = TaskState(key=f"d{i:05d}", status="pending", needs=("root",), created_at=t0)
            assert store.compare_and_swap(dep.key, None, dep)
    return store


def _tally_io_of_one_block(
    root: Path, n: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], list[str], int]:
    """The tally files one block of a failed completion's walk (64 dependents
    blocked in one batch) reads and writes, and the bytes it reads of them."""
    from ledger_cli.stores.jsonfile import fsutil

    store = _waiting_store(root, n)
    t1 = Instant.parse(LATER)
    recs = [store.load(f"d{i:05d}") for i in range(64)]
    reads: list[str] = []
    writes: list[str] = []
    size = [0]
    real_read, real_replace = fsutil.read_file, fsutil.replace_file

    def read_file(dir_fd: int, name: str, shown: str) -> bytes | None:
        data = real_read(dir_fd, name, shown)
        if "/tally/" in shown:
            reads.append(name)
            size[0] += len(data or b"")
        return data

    def replace_file(dir_fd: int, name: str, data: bytes, shown: str, **kw: object) -> None:
        if "/tally/" in shown:
            writes.append(name)
        real_replace(dir_fd, name, data, shown, **kw)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(fsutil, "read_file", read_file)
        m.setattr(fsutil, "replace_file", replace_file)
        with store.batch():
            for rec in recs:
                assert rec is not None
                blocked = rec.replace(status="blocked", blocked_by="root", updated_at=t1)
                assert store.compare_and_swap(rec.key, rec, blocked)
    assert store.check_tally_index() == []
    return reads, writes, size[0]


def test_a_block_of_records_that_stay_noted_costs_the_counts_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pending with needs -> blocked (a failed completion's, a cancel's walk; a
    retry's the other way): every record stays noted, so a block's commit reads
    and writes the tally's counts only, not the shard files listing every noted
    record of the store (it did: a block's cost grew with the store)."""
    small = _tally_io_of_one_block(tmp_path / "small", 100, monkeypatch)
    large = _tally_io_of_one_block(tmp_path / "large", 2_000, monkeypatch)
    for reads, writes, size in (small, large):
        # The same files, and as many bytes (the counts' digits aside),
        # whatever the store's size.
        assert set(reads) == {"counts"} and set(writes) == {"counts"}
        assert size < 300
    assert small[:2] == large[:2]
    agrees(tmp_path / "large")


def test_a_block_that_changes_membership_rewrites_those_shards_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Noted -> not noted (claimed -> completed) still moves the record out of
    its shard file; the shards of the untouched records are not read."""
    from ledger_cli.stores.jsonfile import fsutil
    from ledger_cli.stores.jsonfile.records import key_digest

    root = tmp_path / "store"
    store = _waiting_store(root, 500)
    cur = store.load("root")
    assert cur is not None
    reads: list[str] = []
    real_read = fsutil.read_file

    def read_file(dir_fd: int, name: str, shown: str) -> bytes | None:
        if "/tally/" in shown:
            reads.append(name)
        return real_read(dir_fd, name, shown)

    with monkeypatch.context() as m:
        m.setattr(fsutil, "read_file", read_file)
        done = cur.replace(status="completed", owner="", updated_at=Instant.parse(LATER))
        assert store.compare_and_swap("root", cur, done)
    digest = key_digest("root")
    assert digest is not None
    assert sorted(reads) == sorted(["counts", digest[:2]])
    agrees(root)


def test_doctor_fix_does_not_confirm_the_problems_it_just_fixed_under_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`doctor --fix` un-blocks orphaned blocks, then checks the tally: on the
    records as they are now, not on its walk's reads from before the fix
    (those show the blocks it fixed: a false problem, which the check then
    confirmed by a scan of every record under the lock, 7-10 s at 100,000)."""
    root = tmp_path / "store"
    store = _waiting_store(root, 40)
    cur = store.load("root")
    assert cur is not None
    failed = cur.replace(status="failed", owner="", updated_at=Instant.parse(LATER))
    assert store.compare_and_swap("root", cur, failed)
    assert invoke(root, "retry", "root").code == 0
    assert invoke(root, "cancel", "root").code == 0
    cur = store.load("root")
    assert cur is not None and cur.status == "failed"
    assert store.compare_and_swap("root", cur, cur.replace(status="pending"))  # orphaned blocks
    fresh: list[bool] = []
    real = JsonFileStore._scan_unswept

    def scan(self: JsonFileStore, root_fd: int, fresh_: bool = False) -> dict[str, TaskState]:
        fresh.append(fresh_)
        return real(self, root_fd, fresh_)

    monkeypatch.setattr(JsonFileStore, "_scan_unswept", scan)
    out = invoke(root, "doctor", "--fix")
    assert "un-blocked d00000" in out.stdout
    assert fresh and not any(fresh)  # no scan under the lock
    monkeypatch.undo()
    assert invoke(root, "doctor").code == 0
    agrees(root)


def test_a_shard_file_as_written_is_told_as_its_pattern_tells_it() -> None:
    import random
    import re

    from ledger_cli.stores.jsonfile.tally import _as_written

    rng = random.Random(7)
    for _ in range(3000):
        shard = rng.choice(["00", "ab", "f3"])
        lines = [shard + "".join(rng.choice("0123456789abcdef") for _ in range(62)) + "\n"
                 for _ in range(rng.randrange(4))]  # fmt: skip
        data = bytearray("".join(lines).encode("ascii"))
        if data and rng.random() < 0.8:  # damage one byte, or drop one
            at = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[at] = ord(rng.choice("0aAg\n x9f"))
            else:
                del data[at]
        want = re.fullmatch(rb"(?:" + shard.encode() + rb"[0-9a-f]{62}\n)*", bytes(data))
        assert _as_written(bytes(data), shard) == (want is not None), bytes(data)
