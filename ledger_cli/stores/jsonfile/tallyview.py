"""The JSON store's side of the tally (tally.py holds the files): the figures
`ledger stats` and each `watch` refresh read — the counts, the claimed
records, the ready split, the head of the unfinished table — from the tally
and the ready index instead of every record; and the check and rebuild for
`ledger doctor`. Each falls back to reading the records while the tally is
not built (a store older than it; the next writer builds it)."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.stores.jsonfile import derived, fsutil, prunedfile, readyindex, tally
from ledger_cli.stores.jsonfile.layout import shown
from ledger_cli.stores.jsonfile.locking import io_errors, store_method
from ledger_cli.stores.jsonfile.reading import RecordReader
from ledger_cli.stores.jsonfile.records import key_digest, record_path, scan_records

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

Tallied = tuple[tally.Counts, list[TaskState]]


class TallyMethods(RecordReader):
    def _rebuild_tally(self, root_fd: int) -> tally.Counts:
        found = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=False)
        return tally.rebuild(self._root, root_fd, found.items())

    @contextlib.contextmanager
    def _unlocked_root(self) -> Iterator[int | None]:
        """The root directory, read without the lock (as `list --jsonl` reads):
        every file read is replaced whole, so each is some recent state."""
        self._check_open()
        with io_errors(self._root):
            root_fd = fsutil.open_root(self._root)
            if root_fd is not None and not self._meta_seen and not self._initialized(root_fd):
                os.close(root_fd)
                root_fd = None
            try:
                yield root_fd
            finally:
                fsutil.close_all([root_fd])

    def _tallied(self, root_fd: int) -> Tallied | None:
        """The counts and the noted records (claimed, blocked, pending with
        needs); None while the tally is not built."""
        counts = tally.read_counts(self._root, root_fd)
        if counts is None:
            return None
        noted = []
        missing = []
        digests = tally.read_noted(self._root, root_fd)
        if len(digests) != tally.noted_count(counts):
            self._confirm_noted()
        for digest in digests:
            rec = self._read_digest(root_fd, digest)
            if rec is None:
                missing.append(digest)
            elif tally.is_noted(rec):
                noted.append(rec)
        if missing:
            self._confirm_lost(missing)
        return counts, noted

    def _confirm_noted(self) -> None:
        """Raise StoreDamageError when, under the lock, the noted sets hold
        another number of records than the counts say: a tally file was lost
        or cut, and figures judged from it would be a wrong answer. (Read
        without the lock, a write between the two reads differs too; that is
        no damage.)"""
        from ledger_cli.errors import StoreDamageError

        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return
            counts = tally.read_counts(self._root, root_fd)
            if counts is None:
                return
            listed, want = len(tally.read_noted(self._root, root_fd)), tally.noted_count(counts)
        if listed != want:
            raise StoreDamageError(
                f"ledger: store: {shown(self._root, tally.TALLY_DIR)}: the tally "
                f"notes {listed} unfinished records where its counts say {want} "
                "(ledger doctor --fix rebuilds it)"
            )

    def _confirm_lost(self, digests: list[str]) -> None:
        """Raise StoreDamageError when a record the tally notes is still missing
        under the lock, where no prune or write is halfway: its file is lost,
        and counts that include it would be a wrong answer. (Read without the
        lock, a record a `restore` replaced meanwhile is missing too; that is
        no damage.)"""
        from ledger_cli.errors import StoreDamageError

        with self._locked(create=False) as root_fd:
            if root_fd is None or tally.read_counts(self._root, root_fd) is None:
                return
            still = set(digests).intersection(tally.read_noted(self._root, root_fd))
            lost = sorted(d for d in still if self._read_digest(root_fd, d) is None)
        if lost:
            raise StoreDamageError(
                f"ledger: store: {record_path(self._root, lost[0])}: a record file is lost "
                "while the tally counts it (ledger doctor names its key)"
            )

    def tally_figures(self) -> tuple[dict[str, int], list[TaskState], int] | None:
        """(the unpruned records of each status, the noted records, the pending
        ones naming no needs), without the lock; None while the tally is not
        built (then `stats` reads the records)."""
        with self._unlocked_root() as root_fd:
            if root_fd is None:
                return dict.fromkeys(tally.STATUSES, 0), [], 0
            got = self._tallied(root_fd)
        if got is None:
            return None
        counts, noted = got
        return {s: counts[s] for s in tally.STATUSES}, noted, counts["plain"]

    @store_method
    def status_counts(self) -> dict[str, int] | None:
        """The number of unpruned records of each status (`stats`), from the
        tally without the lock; None while it is not built."""
        with self._unlocked_root() as root_fd:
            if root_fd is None:
                return dict.fromkeys(tally.STATUSES, 0)
            counts = tally.read_counts(self._root, root_fd)  # no record read
        return None if counts is None else {s: counts[s] for s in tally.STATUSES}

    @store_method
    def claimed_records(self) -> list[TaskState]:
        """The claimed records (`stats`' expired leases), from the tally."""
        got = self.tally_figures()
        if got is None:
            return [r for r in self.scan_visible() if r.status == "claimed"]
        return [r for r in got[1] if r.status == "claimed"]

    @store_method
    def ready_split(self, now: Instant) -> tuple[int, TaskState | None, Iterable[TaskState]]:
        """(the pending records that name no needs: each is ready; the first of
        them in the Ready order; the other candidates, for the caller to judge)
        — `ready.count_ready`. The first is the first such record the ready
        index gives; the others are the tally's noted live records."""
        got = self.tally_figures()
        if got is None:
            live = [r for r in self.scan_visible() if r.status in ("pending", "claimed")]
            return 0, None, live
        _, noted, plain = got
        first = self._first_plain() if plain else None
        return plain, first, [r for r in noted if r.status in ("pending", "claimed")]

    def _first_plain(self) -> TaskState | None:
        """The first pending record naming no needs in the ready index's order
        (stale entries skipped, not dropped: no lock is held)."""
        with self._unlocked_root() as root_fd:
            if root_fd is None:
                return None
            with readyindex.opened(self._root, root_fd) as chunks:
                if chunks is None:  # not built: the next writer builds it
                    return min(
                        (r for r in self.scan_visible() if tally.is_plain(r)),
                        key=lambda r: (r.created_at.unix_ns, byte_order(r.key)),
                        default=None,
                    )
                from ledger_cli.stores.jsonfile.schedulefile import reader

                sched = reader(self._root)
                for entry in chunks.entries():
                    key = readyindex.key_of(entry)
                    digest = key_digest(key)
                    rec = None if digest is None else self._read_digest(root_fd, digest)
                    if (
                        rec is not None
                        and tally.is_plain(rec)
                        and readyindex.entry_of(rec, sched(rec.key)) == entry
                    ):
                        return rec
                return None

    @store_method
    def blocked_by_keys(self) -> list[str]:
        """The keys the blocked records name (`watch`'s failed roots)."""
        got = self.tally_figures()
        recs = got[1] if got is not None else self.scan_visible()
        return sorted({r.blocked_by for r in recs if r.status == "blocked"})

    @store_method
    def by_status_head(self, statuses: Iterable[str], limit: int) -> list[TaskState]:
        """The first `limit` records by key of `statuses` (`watch`'s table): the
        tally's noted records, and the pending ones that name no needs found
        through the ready index's keys (only the first `limit` are read)."""
        import heapq  # watch's alone: not on every command's start-up

        wanted = frozenset(statuses)
        got = self.tally_figures()
        if got is None:
            every = [r for r in self.scan_visible() if r.status in wanted]
            return heapq.nsmallest(limit, every, key=lambda r: byte_order(r.key))
        _, noted, plain = got
        rows = [r for r in noted if r.status in wanted]
        if "pending" in wanted and plain:
            rows += self._plain_head(limit, {r.key for r in noted})
        return heapq.nsmallest(limit, rows, key=lambda r: byte_order(r.key))

    def _plain_head(self, limit: int, skip: set[str]) -> list[TaskState]:
        import heapq

        with self._unlocked_root() as root_fd:
            if root_fd is None:
                return []
            with readyindex.opened(self._root, root_fd) as chunks:
                if chunks is None:
                    every = [r for r in self.scan_visible() if tally.is_plain(r)]
                    return heapq.nsmallest(limit, every, key=lambda r: byte_order(r.key))
                keys = {bytes.fromhex(hexkey) for _, hexkey in chunks.entries()}
            out: list[TaskState] = []
            for raw in sorted(keys):
                key = raw.decode("utf-8")
                digest = key_digest(key)
                if key in skip or digest is None:
                    continue
                rec = self._read_digest(root_fd, digest)
                if rec is not None and rec.key == key and tally.is_plain(rec):
                    out.append(rec)
                    if len(out) >= limit:
                        break
            return out

    @store_method
    def check_tally_index(self) -> list[str]:
        """Problems of the tally against the records (`ledger doctor`)."""
        self._check_open()

        def problems(root_fd: int, fresh: bool = False) -> list[str]:
            found = tally.check(self._root, root_fd, self._scan_unswept(root_fd, fresh))
            return found + prunedfile.check_count(self._root, root_fd)

        # Without the lock first; under it only to confirm (derived.py).
        if derived.read_unlocked(self, problems) == []:
            return []
        with self._locked(create=False) as root_fd:
            return [] if root_fd is None else problems(root_fd, fresh=True)

    @store_method
    def rebuild_tally_index(self) -> None:
        """Rebuild the tally from the records, and the pruned keys' count from
        pruned/ (`ledger doctor --fix`)."""

        def rebuild(root_fd: int) -> None:
            self._rebuild_tally(root_fd)
            # A missing count stays missing; a shard that disagrees with the count
            # raises here (lost primary data): the count is never rewritten over it,
            # unless it is the count that is damaged (prunedcount.CountDamageError).
            from ledger_cli.stores.jsonfile.prunedcount import CountDamageError

            try:
                stale = bool(prunedfile.check_count(self._root, root_fd))
            except CountDamageError:
                stale = True
            if stale:
                prunedfile.rewrite_count(self._root, root_fd)

        self._on_root(rebuild)
