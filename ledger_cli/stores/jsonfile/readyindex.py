"""ready/: the index that makes `claim --next` an index lookup (docs/design.md §6.1).

A derived structure, a superset of the truth (an entry is added durably
before the record that needs it is written; a stale entry is harmless, it is
dropped when found), kept as a chunked index (chunkindex.py: ready/manifest
and ready/c<id>, chunks of sorted lines `<order> <key hex>`). `<order>` is
(1000 - priority) * RANK plus the due time in ns, the later of CreatedAt and
not-before (`entry_of`, docs/design.md §8.2), one entry per *candidate*: a
pending or claimed record whose direct needs are all completed.

A record that waits on a need becomes a candidate when the need is written as
completed: the write reads the need's file in deps/ (depsindex.py, the
store's one reverse-needs index, complete: built first when it is not) and
adds the records it lists that are live and whose needs are now all met,
before the need's record goes to disk (apply.py). A `ready/needs/` directory
(the reverse-needs index of older releases) is ignored, and removed by a
rebuild.

The next ready record is the first candidate in the Ready order (priority,
then due, then key) that passes the full Ready rule: reading it costs one
manifest and one chunk, whatever the number of ready, waiting, finished or
pruned records. A missing manifest (a store older than the index, or a rebuild a crash cut
short) means "rebuild from the records": the next holder of the lock does.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import chunkindex, derived, fsutil
from ledger_cli.stores.jsonfile.chunkindex import MANIFEST, Chunks, Entry
from ledger_cli.stores.jsonfile.layout import LIVE_STATUSES, shown

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    Load = Callable[[str], "TaskState | None"]

__all__ = ["MANIFEST", "Chunks", "Entry"]  # an Entry's sort number: entry_of

DEFAULT_QUEUE = "default"
"""engine/queues.py's DEFAULT (not imported: this module is on the hot path)."""
READY_DIR = "ready"
LEGACY_NEEDS_DIR = "needs"
"""ready/needs/: the waiter files of older releases; no longer read or written."""
MANIFEST_HEADER = "ledger_cli.ready 5"
"""Version 5: ready/'s manifest lists the queue partitions (`+ <hex>` lines).
Version 4: partitioned by queue (ready/q/, below). Version 3: each chunk
starts with its number of entries. Version 2: entries sort in the Ready order
of docs/design.md §8.2 (`entry_of`). An older manifest (version 1: CreatedAt only; 2:
chunks without a count; 3: every queue in one partition; 4: partitions found
by listing ready/q/) means "rebuild", as a missing one does."""
OLDER_HEADERS = (
    "ledger_cli.ready 1",
    "ledger_cli.ready 2",
    "ledger_cli.ready 3",
    "ledger_cli.ready 4",
)
FORMAT = chunkindex.Format(READY_DIR, MANIFEST_HEADER, "ready index")
INDEX = derived.Index(READY_DIR, MANIFEST)
QUEUES_DIR = "q"
"""ready/q/<queue name's UTF-8 in hex>/: the partition of a queue other than
`default` (docs/design.md §8.7), a manifest and chunks of the same format as ready/'s own,
which holds `default`'s. `claim --next --queue X` walks X's partition only, and
a queue at its limit is not walked at all; a claim from every queue merges the
partitions' heads, each in the Ready order, so the order across queues is the
same as one index's. A partition is made (chunk, then manifest, each durable)
by the first write that adds one of its entries, then listed in ready/'s
manifest (durably) before any entry goes in: a partition the manifest lists
whose directory or manifest is gone is damage (its entries are lost), one it
does not list holds nothing (a crash cut its making short).
An entry whose key is no longer in the partition's queue is stale, dropped
when met (a rebase that changed the queue added the entry to its new queue's
partition first)."""
RANK = 10**22
"""The weight of the priority in an entry's sort number (above any due instant)."""
DUE_OFFSET = 10**21
"""Added to the due instant's unix ns: every instant Go can hold sorts positive."""
Schedule = tuple[Instant, int]
"""A record by key, or None."""


def entry_of(rec: TaskState, value: Schedule | None = None) -> Entry | None:
    """The index entry of a record with its schedule (not-before, priority), None
    for a key no file can name (a lone surrogate)."""
    try:
        raw = rec.key.encode("utf-8")
    except UnicodeEncodeError:
        return None
    due = rec.created_at.unix_ns
    priority = 0
    if value is not None:
        # Clamped to the range (docs/design.md §8.2): a schedule written out of it
        # (by the library before it checked) must not make an entry no chunk can
        # hold, or a rebuild could never mend the index (ledger doctor notes it).
        priority = min(max(value[1], -1000), 1000)
        if value[0].unix_ns > due:
            due = value[0].unix_ns
    return ((1000 - priority) * RANK + DUE_OFFSET + due, raw.hex())


def due_ns(entry: Entry) -> int:
    return entry[0] % RANK - DUE_OFFSET


def next_level(entry: Entry) -> Entry:
    """The last entry sorting before every entry of the next priority level."""
    return ((entry[0] // RANK + 1) * RANK - 1, "")


def key_of(entry: Entry) -> str:
    return bytes.fromhex(entry[1]).decode("utf-8")


def is_candidate(rec: TaskState, load: Load, completed: str | None = None) -> bool:
    """Pending or claimed, and every direct need completed (the index's rule).

    `completed`: a need of `rec` this write completes. The needs named after
    it are read first: needs tend to complete in the order they are named,
    so a fan-in's check stops at the next one rather than reading every need
    completed so far (quadratic over a fan-in otherwise)."""
    if rec.status not in LIVE_STATUSES:
        return False
    needs = rec.needs or ()
    if completed is not None and completed in needs:
        at = needs.index(completed) + 1
        needs = needs[at:] + needs[:at]
    for need in needs:
        dep = load(need)
        if dep is None or dep.status != "completed":
            return False
    return True


def open_dir(root: str, root_fd: int, *, create: bool, sync: bool = True) -> int | None:
    return fsutil.open_subdir(root_fd, READY_DIR, shown(root, READY_DIR), create=create, sync=sync)


def load_chunks(root: str, root_fd: int, rfd: int) -> Partitioned | None:
    """The candidate index, or None when it has to be rebuilt (no manifest)."""
    default = _load_part(root, root_fd, rfd, ())
    return None if default is None else Partitioned(root, root_fd, rfd, default)


@contextmanager
def opened(root: str, root_fd: int) -> Iterator[Partitioned | None]:
    """The candidate index for the block (None: not built), ready/ closed after."""
    rfd = open_dir(root, root_fd, create=False)
    try:
        yield None if rfd is None else load_chunks(root, root_fd, rfd)
    finally:
        fsutil.close_all([rfd])


@contextmanager
def opened_built(root: str, root_fd: int, rebuild: Callable[[], None]) -> Iterator[Partitioned]:
    """The candidate index for the block, built first by `rebuild` (from the
    records on disk, under the lock) when it is not."""
    with opened(root, root_fd) as chunks:
        if chunks is not None:
            yield chunks
            return
    rebuild()
    with opened(root, root_fd) as chunks:
        assert chunks is not None
        yield chunks


def _load_part(root: str, root_fd: int, rfd: int, sub: tuple[str, ...]) -> Chunks | None:
    """One partition (`sub`: its directory below ready/), None when it has no
    manifest (or, for ready/'s own, an older release's)."""
    older = () if sub else OLDER_HEADERS
    return chunkindex.load(FORMAT, root, root_fd, rfd, (READY_DIR, *sub), older)


def part_dir(queue: str) -> str:
    """The directory below ready/q/ of a queue's partition."""
    return queue.encode("utf-8", "surrogatepass").hex()


def _queue_named(name: str) -> str | None:
    """The queue a directory below ready/q/ is for; None for a name no
    partition has (a temporary file, say)."""
    if not name or len(name) % 2 or name.strip("0123456789abcdef"):
        return None
    try:
        return bytes.fromhex(name).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


class Partitioned:
    """The whole index: `default`'s partition in ready/ itself and each other
    queue's in ready/q/<hex>/ (QUEUES_DIR). A partition other than `default`'s
    is opened for one use at a time: no descriptor outlives a method."""

    def __init__(self, root: str, root_fd: int, rfd: int, default: Chunks) -> None:
        self._root, self._root_fd, self._rfd = root, root_fd, rfd
        self.default = default
        self._reader: Callable[[str], str] | None = None

    def queue_of(self, key: str) -> str:
        """`key`'s queue, as its queue file says (read once per key and use)."""
        if self._reader is None:
            from ledger_cli.stores.jsonfile.queueread import reader

            self._reader = reader(self._root)
        return self._reader(key)

    def names(self) -> list[str]:
        """The queues that have a partition besides `default`, sorted: those
        ready/'s manifest lists."""
        named = map(_queue_named, self.default.subs)
        return sorted(q for q in named if q is not None and q != DEFAULT_QUEUE)

    @contextmanager
    def part(
        self, queue: str, *, create: bool = False, sync: bool = True
    ) -> Iterator[Chunks | None]:
        """The partition of `queue` (None: it has none yet); with `create`, a
        missing one is made, empty (durably with `sync`; else the caller's
        syncfs, or wal.log's rebuild of the indexes after a restart, covers it)."""
        if queue == DEFAULT_QUEUE:
            yield self.default
            return
        sub = (QUEUES_DIR, part_dir(queue))
        listed = sub[1] in self.default.subs
        if not listed and not create:  # no partition: nothing to open
            yield None
            return
        qfd = fsutil.open_subdir(
            self._rfd,
            QUEUES_DIR,
            shown(self._root, READY_DIR, QUEUES_DIR),
            create=create,
            sync=sync,
        )
        pfd = None
        try:
            if qfd is not None:
                pfd = fsutil.open_subdir(
                    qfd, sub[1], shown(self._root, READY_DIR, *sub), create=create, sync=sync
                )
            if listed:
                chunks = None if pfd is None else _load_part(self._root, self._root_fd, pfd, sub)
                if chunks is None:
                    _refuse_lost(self._root, sub, pfd is None)
            else:  # made afresh (what a crash left unlisted held nothing), then listed
                assert pfd is not None
                chunks = write_part(self._root, self._root_fd, pfd, sub, [], sync=sync)
                self.default.subs.append(sub[1])
                self.default.write_manifest(sync)
            yield chunks
        finally:
            fsutil.close_all([pfd, qfd])

    def _by_queue(self, entries: Iterable[Entry]) -> dict[str, list[Entry]]:
        out: dict[str, list[Entry]] = {}
        for entry in entries:
            out.setdefault(self.queue_of(key_of(entry)), []).append(entry)
        return out

    def add(self, entries: Iterable[Entry], *, sync: bool) -> None:
        """Insert entries, each in its key's queue's partition (`Chunks.add`)."""
        for queue, group in self._by_queue(entries).items():
            with self.part(queue, create=True, sync=sync) as chunks:
                assert chunks is not None
                chunks.add(group, sync=sync)

    def remove(self, entries: Iterable[Entry]) -> None:
        """Drop entries from their key's queue's partition (`Chunks.remove`)."""
        for queue, group in self._by_queue(entries).items():
            with self.part(queue) as chunks:
                if chunks is not None:
                    chunks.remove(group)

    def by_queue(self) -> dict[str, set[Entry]]:
        """Every partition's entries (`ledger doctor`)."""
        out: dict[str, set[Entry]] = {DEFAULT_QUEUE: set(self.default.entries())}
        for queue in self.names():
            with self.part(queue) as chunks:
                if chunks is not None:
                    out[queue] = set(chunks.entries())
        return out

    def drop_legacy(self) -> None:
        """Remove ready/needs/, the waiter files of older releases, if there."""
        if os.path.lexists(os.path.join(self._root, READY_DIR, LEGACY_NEEDS_DIR)):
            drop_legacy(self._rfd)

    def holds(self, queue: str, entries: Iterable[Entry]) -> set[Entry]:
        """Those of `entries` that `queue`'s partition holds."""
        with self.part(queue) as chunks:
            return set() if chunks is None else chunks.holds(entries)

    def entries(self) -> Iterator[Entry]:
        """Every entry in the Ready order, across the partitions."""
        import heapq

        rest: list[list[Entry]] = []
        for queue in self.names():
            with self.part(queue) as chunks:
                if chunks is not None:
                    rest.append(list(chunks.entries()))
        if not rest:
            yield from self.default.entries()
            return
        yield from heapq.merge(self.default.entries(), *rest)


def _refuse_lost(root: str, sub: tuple[str, ...], directory: bool) -> None:
    """Refuse a partition ready/'s manifest lists whose directory (or its
    manifest) is gone: taken as empty, its entries would never be claimed,
    and `claim --next` would answer "nothing ready" while tasks are."""
    gone = shown(root, READY_DIR, *sub) if directory else shown(root, READY_DIR, *sub, MANIFEST)
    fix = "(ledger doctor --fix rebuilds the index)"
    raise fsutil.damaged_index(
        READY_DIR, gone, f"missing, ready/{MANIFEST} lists this queue's partition {fix}"
    )


def write_part(
    root: str,
    root_fd: int,
    pfd: int,
    sub: tuple[str, ...],
    entries: list[Entry],
    listed: list[str] | None = None,
    *,
    sync: bool = True,
) -> Chunks:
    """Write one partition afresh (its sorted `entries`; ready/'s own lists
    the `listed` partitions), durably with `sync`, its manifest last."""
    return chunkindex.write_fresh(
        FORMAT, root, root_fd, pfd, (READY_DIR, *sub), entries, (QUEUES_DIR,), listed, sync=sync
    )


def drop_legacy(rfd: int) -> None:
    """Remove ready/needs/, the waiter files of older releases, if there."""
    # Never read: what cannot be removed (a symlink, say) is harmless.
    import shutil  # rebuilds only: it imports zlib, bz2 and lzma

    shutil.rmtree(LEGACY_NEEDS_DIR, ignore_errors=True, dir_fd=rfd)
