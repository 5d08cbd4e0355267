"""The JSON store's side of the ready index: `ready_candidates` for `claim --next`,
the check and rebuild for `ledger doctor` (readyindex.py holds the files)."""

from __future__ import annotations

import functools
from contextlib import ExitStack
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import (
    depsindex,
    derived,
    fsutil,
    prunedfile,
    readyindex,
    schedulefile,
)
from ledger_cli.stores.jsonfile.locking import io_errors, store_method
from ledger_cli.stores.jsonfile.reading import RecordReader
from ledger_cli.stores.jsonfile.records import key_digest, scan_records

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ledger_cli.engine.queuefilter import Filter as QueueFilter
    from ledger_cli.stores.jsonfile import sidelost
    from ledger_cli.stores.jsonfile.locking import PendingBatch

_READY_PAGE = 8
"""Ready-index entries read from the index at a time by `ready_candidates`."""

_REPAIR_KEYS = 2_000
"""Missing candidates `rebuild_ready_index` adds per lock hold: each costs a
record read or two and a share of a chunk rewrite (about 0.1 s per block)."""


def _between_blocks() -> None:
    """The pause between two repair blocks (derived.pause; tests stand in for it)."""
    derived.pause()


def _head(
    chunks: readyindex.Chunks, after: readyindex.Entry | None, now_ns: int | None, limit: int
) -> tuple[list[readyindex.Entry], readyindex.Entry | None]:
    """Up to `limit` entries of one partition past `after` (from one chunk),
    cut before the first not due at `now_ns`, and the last entry looked at
    (None: the partition ends there). An entry not due yet means none of the
    rest of its priority level is (docs/design.md §8.1): the last is then that level's
    end."""
    pos = 0 if after is None else chunks.locate(after)
    while pos < len(chunks.ids):
        entries = chunks.head(pos, after, limit)
        if entries:
            break
        pos += 1
    else:
        return [], None
    if now_ns is not None:
        for i, entry in enumerate(entries):
            if readyindex.due_ns(entry) > now_ns:
                return entries[:i], readyindex.next_level(entry)
    return entries, entries[-1]


def _merged_page(
    parts: dict[str, readyindex.Chunks],
    after: readyindex.Entry | None,
    now_ns: int | None,
    limit: int,
) -> tuple[list[tuple[str, readyindex.Entry]], readyindex.Entry | None]:
    """The next entries past `after` across `parts` (queue -> partition), in the
    Ready order with their queue, and the entry up to which every partition
    was looked at (None: they all end there). Each partition gives its head;
    the page stops at the lowest of their last entries, so nothing a partition
    did not show is skipped: the order is that of one index over them all."""
    heads = {queue: _head(chunks, after, now_ns, limit) for queue, chunks in parts.items()}
    lasts = [last for _, last in heads.values() if last is not None]
    bound = min(lasts) if lasts else None
    page = sorted(
        (entry, queue)
        for queue, (entries, _) in heads.items()
        for entry in entries
        if bound is None or entry <= bound
    )
    return [(queue, entry) for entry, queue in page], bound


class ReadyMethods(RecordReader):
    orders_schedules = True
    """`ready_candidates` yields the Ready order of docs/design.md §8.2 and leaves out tasks
    not yet due: the index's entries sort by priority, due instant, key."""

    filters_queues = True
    """`ready_candidates` takes a queue filter and walks only the partitions of
    the queues it admits (readyindex.py QUEUES_DIR)."""

    def ready_candidates(
        self, now: Instant | None = None, queues: QueueFilter | None = None
    ) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed, in
        the Ready order (priority, due, key), read through the ready/ index
        (the caller applies the rest of the Ready rule: lease expiry, the
        transitive walk); with `queues`, only those of the queues it admits,
        whose partitions alone are read. Stale index entries met on the way
        are dropped. Each step holds the lock; writes of the caller's own open
        batch are not in the index.

        Inside a batch that holds the lock (claim --next), records are read one
        at a time as the caller asks for them (it mostly wants the first);
        otherwise a page of them is read under each lock hold."""
        self._check_open()
        batch = self._batch
        held = batch is not None and batch.owns_lock and batch.mine()
        after: readyindex.Entry | None = None
        while True:
            with io_errors(self._root), self._locked(create=False) as root_fd:
                if root_fd is None:
                    return
                page, after = self._ready_page(root_fd, after, now, queues)
                found = self._judged(root_fd, page, batch if held else None)
                if not held:
                    found = iter(list(found))  # every record read under this hold
            yield from found
            if after is None:
                return

    def _ready_page(
        self,
        root_fd: int,
        after: readyindex.Entry | None,
        now: Instant | None = None,
        queues: QueueFilter | None = None,
    ) -> tuple[list[tuple[str, readyindex.Entry]], readyindex.Entry | None]:
        """The next entries past `after` in the partitions `queues` admits,
        with their queue, and the last entry looked at (None: the index ends
        there)."""
        rebuild = functools.partial(self._rebuild_ready, root_fd)
        with readyindex.opened_built(self._root, root_fd, rebuild) as chunks:
            if queues is None:
                names = [readyindex.DEFAULT_QUEUE, *chunks.names()]
            elif queues.wanted is not None:
                names = sorted(queues.wanted - queues.skip)
            else:
                every = [readyindex.DEFAULT_QUEUE, *chunks.names()]
                names = [q for q in every if q not in queues.skip]
            with ExitStack() as stack:
                parts: dict[str, readyindex.Chunks] = {}
                for queue in names:
                    part = stack.enter_context(chunks.part(queue))
                    if part is not None:
                        parts[queue] = part
                return _merged_page(parts, after, None if now is None else now.unix_ns, _READY_PAGE)

    def _judged(
        self,
        root_fd: int,
        page: list[tuple[str, readyindex.Entry]],
        batch: PendingBatch | None,
    ) -> Iterator[TaskState]:
        """The live candidates of `page`, each read when asked for: under the
        caller's lock hold, or under `batch`'s, which must still be open.
        Stale entries are dropped once the page is read to its end."""

        def load(key: str) -> TaskState | None:
            digest = key_digest(key)
            return None if digest is None else self._current(root_fd, key, digest)

        from ledger_cli.stores.jsonfile.queueread import reader  # as readyindex: off start-up

        sched = schedulefile.reader(self._root)
        queue_of = reader(self._root)
        # The open batch's own writes are not on disk yet (and may be rolled
        # back): their entries are judged, never dropped here; the batch's
        # commit adds and drops its own (apply.py).
        writing = self._batch.records if self._batch is not None else {}
        stale: dict[str, list[readyindex.Entry]] = {}
        for queue, entry in page:
            if batch is not None and self._batch is not batch:
                raise RuntimeError("ready candidates read after their batch ended")
            key = readyindex.key_of(entry)
            with io_errors(self._root):
                rec = load(key)
                live = (
                    rec is not None
                    and readyindex.entry_of(rec, sched(rec.key)) == entry
                    and readyindex.is_candidate(rec, load)
                    and queue_of(rec.key) == queue
                )
            if live:
                assert rec is not None
                yield rec
            elif key_digest(key) not in writing:
                if rec is not None:  # a lost queue or schedule file is refused, not dropped
                    from ledger_cli.stores.jsonfile import sidelost

                    with io_errors(self._root):
                        q, at = queue_of(key), (queue, entry)
                        sidelost.refuse(self._root, root_fd, rec, at, load, q, sched(key))
                stale.setdefault(queue, []).append(entry)
        if stale and (batch is None or self._batch is batch):  # judged under this hold
            with io_errors(self._root), self._locked(create=False) as held_fd:
                if held_fd is not None:
                    self._drop_stale(held_fd, stale)

    def _drop_stale(self, root_fd: int, stale: dict[str, list[readyindex.Entry]]) -> None:
        rebuild = functools.partial(self._rebuild_ready, root_fd)
        with readyindex.opened_built(self._root, root_fd, rebuild) as chunks:
            for queue, entries in stale.items():
                with chunks.part(queue) as part:
                    if part is not None:
                        part.remove(entries)

    @store_method
    def check_ready_index(self) -> list[str]:
        """Problems of the ready/ index against the records (`ledger doctor`): a
        candidate it misses. The records that wait on a need are found through
        deps/ when the need completes: check_deps_index checks that index."""
        self._check_open()
        # A scan without the lock first (docs/design.md §5.4: at 200,000 records a scan
        # under it held every writer off for seconds); only what it finds is
        # judged again under the lock, where records and index agree, a block
        # of keys per hold. Without a readable index to judge: all under the lock.
        with io_errors(self._root):
            missing = self._missing_unlocked()
        if missing is None:
            with self._locked(create=False) as root_fd:
                return [] if root_fd is None else self._ready_problems(root_fd, fresh=True)
        confirmed: list[str] = []
        for block in derived.in_blocks(missing, _REPAIR_KEYS, _between_blocks):
            with io_errors(self._root), self._locked(create=False) as root_fd:
                if root_fd is None:
                    return []
                got = self._still_missing(root_fd, block)
                if got is not None:
                    confirmed += self._missing_lines(root_fd, got)
            if got is None:  # the index went away meanwhile: the next writer rebuilds it
                return []
        return confirmed

    def _ready_problems(self, root_fd: int, fresh: bool = False) -> list[str]:
        missing = self._missing_candidates(root_fd, fresh)
        return self._missing_lines(root_fd, missing or [])

    def _missing_lines(self, root_fd: int, missing: list[str]) -> list[str]:
        """Under the lock: a line for each candidate the index misses, or for
        each file of it the index tells is lost (sidelost.py) instead."""
        from ledger_cli.stores.jsonfile import sidelost

        lost = self._lost_sides(root_fd, missing)
        return sidelost.lines(self._root, missing, lost)

    def _lost_sides(self, root_fd: int, missing: list[str]) -> dict[str, sidelost.Lost]:
        """Under the lock: those of the candidates `missing` from the index
        whose other entries in it tell a lost queue or schedule file."""
        from ledger_cli.stores.jsonfile import sidelost

        def load(key: str) -> TaskState | None:
            digest = key_digest(key)
            return None if digest is None else self._current(root_fd, key, digest)

        return sidelost.told(self._root, root_fd, missing, load) if missing else {}

    def _missing_candidates(self, root_fd: int, fresh: bool = False) -> list[str] | None:
        """The keys of the candidates the index misses, in key order; None
        when there is no index to judge (not built yet: the next writer
        builds it)."""
        found = self._scan_unswept(root_fd, fresh)
        by_key = {rec.key: rec for rec in prunedfile.read_all(self._root, root_fd)}
        by_key.update((rec.key, rec) for rec in found.values())
        with readyindex.opened(self._root, root_fd) as chunks:
            if chunks is None:
                return None
            indexed = chunks.by_queue()
            queue_of = chunks.queue_of
        from ledger_cli.stores.jsonfile.schedulefile import reader

        sched = reader(self._root)
        missing = [
            rec.key
            for rec in found.values()
            if readyindex.is_candidate(rec, by_key.get)
            and readyindex.entry_of(rec, sched(rec.key)) not in indexed.get(queue_of(rec.key), ())
        ]
        return sorted(missing)  # sorted after: the missing are few, the records many

    @store_method
    def rebuild_ready_index(self, accept_lost: bool = False) -> None:
        """Repair the ready/ index from the records (`ledger doctor --fix`).

        The index is a superset of the candidates that every writer keeps
        (readyindex.py), so what a readable index can be wrong about is a
        candidate it misses. Those are found without the lock (docs/design.md §5.4: a scan
        under it held every writer off for seconds at 200,000 records), then
        added in short lock holds, each judged again under the lock from its
        record as it is then: a record that stopped being a candidate meanwhile
        is left out; one that became one meanwhile was added by its writer. An
        index that is missing or unreadable is rebuilt whole, under the lock.

        A candidate whose other entries tell a lost queue or schedule file
        (sidelost.py) is left out, those entries kept, unless `accept_lost`
        (`--fix --drop-damaged`): its entry by the files would hand the task
        out from the default queue, or early, and lose the only trace."""
        self._check_open()
        with io_errors(self._root):
            missing = self._missing_unlocked()
        if missing is not None:
            blocks = derived.in_blocks(missing, _REPAIR_KEYS, _between_blocks, last_empty=True)
            for block in blocks:
                with io_errors(self._root), self._locked(create=False) as root_fd:
                    if root_fd is None:
                        return
                    if not self._add_candidates(root_fd, block, accept_lost):
                        self._rebuild_ready(root_fd)  # the index went away meanwhile
                        return
            return
        with self._locked(create=False) as root_fd:
            if root_fd is not None:
                self._rebuild_ready(root_fd)

    def _missing_unlocked(self) -> list[str] | None:
        """`_missing_candidates` without the lock (in a `one_scan` block, the
        records `ledger doctor`'s walk read); None when there is no readable
        index: then it is judged, or rebuilt, whole under the lock."""
        return derived.read_unlocked(self, self._missing_candidates)

    def _still_missing(self, root_fd: int, keys: list[str]) -> list[str] | None:
        """Under the lock: those of `keys` that are candidates the index misses
        now; None when there is no index."""
        with readyindex.opened(self._root, root_fd) as chunks:
            if chunks is None:
                return None
            wanted: dict[str, list[tuple[str, readyindex.Entry]]] = {}
            for key, entry in self._candidate_entries(root_fd, keys):
                wanted.setdefault(chunks.queue_of(key), []).append((key, entry))
            out: list[str] = []
            for queue, pairs in wanted.items():
                held = chunks.holds(queue, [entry for _, entry in pairs])
                out += [key for key, entry in pairs if entry not in held]
            return sorted(out)

    def _candidate_entries(
        self, root_fd: int, keys: list[str]
    ) -> list[tuple[str, readyindex.Entry]]:
        """Under the lock: the index entries of those of `keys` that are
        candidates now, judged from their records and their needs' records."""

        def load(key: str) -> TaskState | None:
            digest = key_digest(key)
            return None if digest is None else self._current(root_fd, key, digest)

        sched = schedulefile.reader(self._root)
        return [
            (rec.key, entry)
            for rec in map(load, keys)
            if rec is not None
            and readyindex.is_candidate(rec, load)
            and (entry := readyindex.entry_of(rec, sched(rec.key))) is not None
        ]

    def _add_candidates(self, root_fd: int, keys: list[str], accept_lost: bool = False) -> bool:
        """Under the lock: add the index entries of those of `keys` that are
        candidates now (but those whose lost file the index tells, unless
        `accept_lost`); False when the index is not there to add to."""
        lost: dict[str, sidelost.Lost] = {}
        if not accept_lost:
            still = self._still_missing(root_fd, keys)
            lost = self._lost_sides(root_fd, still or [])
        with readyindex.opened(self._root, root_fd) as chunks:
            if chunks is None:
                return False
            pairs = self._candidate_entries(root_fd, keys)
            entries = [entry for key, entry in pairs if key not in lost]
            chunks.add(entries, sync=True)
            chunks.drop_legacy()
            return True

    def _rebuild_ready(self, root_fd: int) -> None:
        """Rebuild ready/ from the record files (not the open batch's writes), and
        deps/ first when it is not built: the promotion of the records waiting on
        a need reads it, so the candidates rebuilt rely on it being complete."""
        found = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=False)
        dfd = depsindex.open_dir(self._root, root_fd, create=False)
        try:
            built = dfd is not None and depsindex.is_built(self._root, dfd)
        finally:
            fsutil.close_all([dfd])
        if not built:
            depsindex.rebuild(self._root, root_fd, found.items())
        pruned = [
            r for r in prunedfile.read_all(self._root, root_fd) if key_digest(r.key) not in found
        ]
        schedules = schedulefile.reader(self._root)
        from ledger_cli.stores.jsonfile import readyrebuild  # rebuilds only

        readyrebuild.rebuild(self._root, root_fd, [*pruned, *found.values()], schedules)
