"""Crash at each named step of the write path.

A child process runs a fixed sequence of writes — command-line writes (each a
journalled batch: record + history), a library compare-and-swap (one file, no
journal), a batch big enough for syncfs(2), a restore — acknowledging each,
and SIGKILLs itself at the n-th occurrence of one step of the write path:

    temp-created   a temporary file was just created
    linked         a spare file was linked under a temporary name (batches)
    mid-write      a write(2) is half done (half the bytes are in the file)
    file-fsynced   a regular file (a temporary file, the history) was fsynced
    renamed        a rename(2) over the target landed
    dir-fsynced    a directory was fsynced (what makes a rename durable)
    syncfs         syncfs(2) returned (large batches)

for every n the sequence reaches. Then: the store opens; every record file
validates (checksum, wire record, name); the state equals the state after a
prefix of the writes — all the acknowledged ones, plus perhaps the one in
flight; and the next writer leaves no temporary file behind. A command that
commits in blocks (docs/design.md §5.4: a failed completion's blocking walk, a retry's
un-blocking) may also be cut between two of its blocks: then `doctor` names
what is left undone (an escaped or an orphaned block), `claim --next` hands
none of it out, and `doctor --fix` completes it to exactly the command's
whole result (records, and history but for the un-block's note).

Random-moment kills (100+ in CI, `LEDGER_KILLS=1000` on demand) are in
tests/storage/test_jsonfile_multiprocess.py.
"""

from __future__ import annotations

import collections
import multiprocessing
import shutil
import signal
from collections.abc import Callable, Iterator
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from ledger_cli.engine.dependents import dependents_walk
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.stores import jsonfile
from ledger_cli.stores.jsonfile import JsonFileStore, durability
from tests.faults_support import (
    STEPS,
    T0,
    OsFaults,
    State,
    between_blocks,
    fake_meminfo,
    invoke,
    logical_state,
    temps,
)

FORK = multiprocessing.get_context("fork")
NOW = Instant.parse(T0)
PROBE = "~probe"
LIVE = ("pending", "claimed")
BATCH = b"".join(
    b'{"key":"bulk-%02d","task":{"n":%d}}\n' % (i, i) for i in range(jsonfile.SYNC_EACH_MAX + 1)
)


SIDE_BATCH = b"".join(
    b'{"key":"side-%02d","queue":"q%d","priority":%d}\n' % (i, i % 2, i)
    for i in range(jsonfile.SYNC_EACH_MAX + 1)
)


def _snapshot_bytes() -> bytes:
    return (
        b'{"Tasks":[{"Key":"restored","Status":"pending","Sequence":3,"Owner":"","Fence":4,'
        b'"LeaseUntil":"0001-01-01T00:00:00Z","Needs":null,"BlockedBy":"","Task":{"r":1},'
        b'"Rev":0,"CreatedBy":"a","CreatedAt":"2026-01-02T03:04:05Z","UpdatedBy":"a",'
        b'"UpdatedAt":"2026-01-02T03:04:05Z"}]}'
    )


def _cli(*argv: str, data: bytes | None = None) -> Callable[[Path], None]:
    def op(root: Path) -> None:
        res = invoke(root, *argv, input=data)
        assert res.code == 0, (argv, res.stderr)

    op.__name__ = " ".join(argv[:2])
    return op


def _library_renew(root: Path) -> None:
    """The library path: one compare-and-swap, durable on its own (no journal)."""
    Ledger(JsonFileStore(root)).renew("lib", "a", "w", 1, timedelta(hours=2), NOW)


def _batch_fsync_each(root: Path) -> None:
    """A large batch while much else is dirty: an fsync(2) per file, no syncfs(2)."""
    saved = durability.DIRTY_MAX, durability.FSYNC_BYTES
    durability.DIRTY_MAX, durability.FSYNC_BYTES = -1, -1  # even with nothing dirty
    try:
        _cli("admit", "--batch", "-", data=BATCH.replace(b"bulk-", b"each-"))(root)
    finally:
        durability.DIRTY_MAX, durability.FSYNC_BYTES = saved


_KEPT: dict[Path, JsonFileStore] = {}
"""A store object kept open from one op to the next (spares live in it)."""


def _library_batch(part: str) -> Callable[[Path], None]:
    def op(root: Path) -> None:
        store = _KEPT.setdefault(root, JsonFileStore(root))
        led = Ledger(store)
        with store.batch():
            for i in range(jsonfile.SYNC_EACH_MAX + 1):
                led.admit("lib", f"{part}{i:02d}", 1, {"n": i}, NOW)

    op.__name__ = f"library batch {part}"
    return op


def _library_batch_from_spares(root: Path) -> None:
    """A large batch on the store object that just committed one: it writes its
    records into spare files made before it took the lock (spares.py)."""
    _library_batch("lib2-")(root)
    _KEPT.pop(root).close()


def _library_history(root: Path) -> None:
    """One history line appended alone (the single-file path)."""
    from ledger_cli.engine.history import HistoryEntry

    JsonFileStore(root).append_history([HistoryEntry(T0, "lib", "ledger.note", "a", 1, "note")])


OPS: list[Callable[[Path], None]] = [
    _cli("admit", "a", "--task", '{"cmd":"make"}'),  # creates the store
    _cli("admit", "b", "--needs", "a"),
    _cli("claim", "a", "--owner", "w", "--lease", "1h"),
    _library_renew,
    _library_history,
    _cli("complete", "a", "--owner", "w", "--fence", "1", "--failed"),  # blocks b too
    _cli("admit", "--batch", "-", data=BATCH),  # syncfs(2)
    _batch_fsync_each,
    _library_batch("lib1-"),
    _library_batch_from_spares,
    _cli("restore", "-", data=_snapshot_bytes()),
    # The ready index: a waiter (listed in deps/ under its need), then its need
    # completing (the waiter promoted to a candidate through deps/).
    _cli("admit", "c", "--needs", "d"),
    _cli("admit", "d"),
    _cli("claim", "d", "--owner", "w", "--lease", "1h"),
    _cli("complete", "d", "--owner", "w", "--fence", "1"),
    # The deps/ index: a need completed before its dependent's admission, a
    # rebase changing needs, and a walk through it (retry un-blocks b).
    _cli("admit", "e", "--needs", "d"),
    _cli("admit", "c", "--seq", "2", "--needs", "e"),
    _cli("retry", "a"),
    # Side files (a key's queue and schedule) ride in the commit of their
    # records: an admission with both, a rebase moving them, and a large
    # batch (journal.json) of queued and prioritized keys.
    _cli("admit", "f", "--queue", "q", "--priority", "5"),
    _cli("admit", "f", "--seq", "2", "--queue", "r", "--not-before", "2026-01-02T03:05:05Z"),
    _cli("admit", "--batch", "-", data=SIDE_BATCH),
]
# (A prune is no single write, so no prefix of OPS: its tally is removed
# first and written after; tests/storage/test_tally.py kills one in between.)


def _child(root: str, kill_at: tuple[str, int], ack: Connection) -> None:
    faults = OsFaults(kill_at=kill_at)
    for i, op in enumerate(OPS):
        with faults:
            op(Path(root))
        ack.send_bytes(bytes([i + 1]))  # acknowledged: op i+1 returned, its write is durable
    ack.close()


@pytest.fixture(scope="module", autouse=True)
def _syncfs_whatever_is_dirty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The large batch takes the syncfs(2) path however much the machine has dirty
    (else the reference and the children could take different paths), and so
    does a small journalled commit (durability.use_syncfs_small reads the
    dirty memory: a fake /proc/meminfo with nothing dirty)."""
    saved = durability.DIRTY_MAX, durability.MEMINFO
    meminfo = fake_meminfo(tmp_path_factory.mktemp("meminfo"), 0)
    durability.DIRTY_MAX, durability.MEMINFO = 1 << 62, meminfo
    yield
    durability.DIRTY_MAX, durability.MEMINFO = saved


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[State], dict[str, int]]:
    """The state after each prefix of OPS, and how often the whole run meets each step."""
    root = tmp_path_factory.mktemp("reference") / "store"
    states = [logical_state(root)]
    counting = OsFaults()
    for op in OPS:
        with counting:
            op(root)
        states.append(logical_state(root))
    assert len(set(states)) == len(states)  # every op changes the state
    return states, dict(counting.steps)


def _without_probe(state: State) -> State:
    records, history = state
    return tuple(r for r in records if f'"Key":"{PROBE}"' not in r), history


def _probe_write(root: Path) -> None:
    """The next writer: one compare-and-swap of a key outside the sequence."""
    store = JsonFileStore(root)
    rec = TaskState(key=PROBE, status="pending", sequence=1, created_at=NOW, updated_at=NOW)
    assert store.compare_and_swap(PROBE, None, rec)


def _every_record_file_validates(root: Path) -> int:
    store = JsonFileStore(root)
    n = 0
    for path in sorted((root / "records").glob("*/*.json")) if (root / "records").exists() else []:
        store.check_record_file(path.read_bytes(), str(path), path.stem)
        n += 1
    return n


def _deps_index_agrees(root: Path, where: str) -> None:
    """The deps/ index lists every record under each need it names (a superset),
    or is not built (then the next one to need it rebuilds it); and the walk
    through it finds what a walk over every record finds, from every key."""
    store = JsonFileStore(root)
    assert store.check_deps_index() == [], where
    every = _RangeOnly(list(store.range()))
    for key in (r.key for r in every.records):
        hooked = dependents_walk(store, [key])
        assert hooked == dependents_walk(every, [key]), f"{where}: from {key}"
    assert store.check_deps_index() == [], where


class _RangeOnly:
    """The records of one Range, read once (the walks in between write nothing),
    with no `dependents` hook: dependents_walk's full-Range path over them."""

    def __init__(self, records: list[TaskState]) -> None:
        self.records = records

    def range(self) -> Iterator[TaskState]:
        return iter(self.records)


def _ready_index_agrees(root: Path, where: str) -> None:
    from ledger_cli.engine import schedule
    from ledger_cli.engine.ready import is_ready, order_key, ready_iter

    store = JsonFileStore(root)
    assert store.check_ready_index() == [], where
    records = {r.key: r for r in store.range()}
    kept = store.schedules()  # the Ready order and due instants (docs/design.md §8.2)
    brute = [
        r.key
        for r in sorted(records.values(), key=lambda r: schedule.order_key(r, kept.get(r.key)))
        if is_ready(r, records.get, NOW) and schedule.is_due(r, kept.get(r.key), NOW)
    ]
    assert [r.key for r in ready_iter(store, store.load, NOW)] == brute, where
    live = [r.key for r in sorted(records.values(), key=order_key) if r.status in LIVE]
    assert sorted(r.key for r in store.by_status(LIVE)) == sorted(live), where  # live/ index


def _tally_agrees(root: Path, where: str) -> None:
    """The tally (tally.py) counts what the records hold, and names the noted
    ones: after a crash it was right, or the next writer rebuilt it."""
    store = JsonFileStore(root)
    assert store.check_tally_index() == [], where
    counts = store.status_counts()
    assert counts is not None, f"{where}: the next writer left the tally unbuilt"
    truth = collections.Counter(r.status for r in store.visible_range())
    assert counts == {s: truth[s] for s in counts}, where


def _completing_the_needs_promotes(root: Path, where: str) -> None:
    """The next writer completes every need a live task waits on (one write each,
    in key order; a need with no record is written completed): the ready index
    finds what the records make ready after each, whatever the kill left of
    deps/ (its promotion reads it, or rebuilds it)."""
    store = JsonFileStore(root)
    records = {r.key: r for r in store.range()}
    waited = sorted({n for r in records.values() if r.status in LIVE for n in r.needs or ()})
    for key in waited:
        rec = records.get(key)
        if rec is None:  # a need not admitted yet: it arrives completed
            new = TaskState(key=key, status="completed", sequence=1, created_at=NOW, updated_at=NOW)
            assert store.compare_and_swap(key, None, new), where
        elif rec.status in LIVE:
            done = rec.replace(status="completed", owner="", updated_at=NOW)
            assert store.compare_and_swap(key, rec, done), where
        else:
            continue
        _ready_index_agrees(root, f"{where}, {key} completed")


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_each_step_of_the_write_path(
    reference: tuple[list[State], dict[str, int]], scratch: Path, step: str
) -> None:
    states, occurrences = reference
    total = occurrences.get(step, 0)
    assert total > 0, f"the sequence never reaches {step}"
    outcomes: collections.Counter[str] = collections.Counter()
    for n in range(1, total + 1):
        root = scratch / f"{step}-{n}"
        recv, send = FORK.Pipe(duplex=False)
        proc = FORK.Process(target=_child, args=(str(root), (step, n), send))
        proc.start()
        send.close()
        acked = 0
        while True:
            try:
                acked = recv.recv_bytes()[0]
            except EOFError:
                break
        proc.join(60)
        recv.close()
        where = f"{step} #{n} (after {acked} acknowledged writes)"
        assert proc.exitcode == -signal.SIGKILL, f"{where}: exit {proc.exitcode}"
        left = temps(root)
        outcomes["temp files left"] += len(left)
        outcomes["journals left"] += (root / "journal.json").exists()
        # The store opens (replaying a journal), every record validates...
        opened = JsonFileStore(root)
        outcomes["record files checked"] += _every_record_file_validates(root)
        # ...the deps index is a superset of the records' needs (or not built)...
        assert opened.check_deps_index() == [], where
        # ...the next writer sweeps the temporary files...
        _probe_write(root)
        assert temps(root) == [], f"{where}: the next writer left {temps(root)} (was {left})"
        # ...the ready and deps indexes agree with the records (supersets, or rebuilt)...
        _ready_index_agrees(root, where)
        _deps_index_agrees(root, where)
        _tally_agrees(root, where)
        # ...and the state is a prefix of the writes: the acknowledged ones, maybe one more.
        state = _without_probe(logical_state(root))
        if state == states[acked]:
            outcomes["in-flight write lost"] += acked < len(OPS)
        elif acked < len(OPS) and state == states[acked + 1]:
            outcomes["in-flight write landed"] += 1
        elif acked < len(OPS) and between_blocks(
            root, states[acked], states[acked + 1], _without_probe
        ):
            outcomes["cut between blocks, completed by doctor --fix"] += 1
        else:
            raise AssertionError(
                f"{where}: the store holds no prefix of the writes: "
                f"{set(state[0]) ^ set(states[acked + 1][0])} "
                f"{set(state[1]) ^ set(states[acked + 1][1])}"
            )
        # ...and completing the needs still waited on promotes their dependents.
        _completing_the_needs_promotes(root, where)
        _tally_agrees(root, f"{where}, needs completed")
        outcomes["kills"] += 1
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{step}: {dict(outcomes)}")
    assert outcomes["kills"] == total
