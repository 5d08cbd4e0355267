"""Reading records: one by key (record file, else pruned/), all of them
(`range`, `visible_range`), or streamed (`scan_visible`)."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import fsutil, layout, prunedfile, tally
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import RECORDS_DIR
from ledger_cli.stores.jsonfile.locking import (
    LockedDirectory,
    PendingBatch,
    io_errors,
    store_method,
)
from ledger_cli.stores.jsonfile.records import decode_record_file, key_digest, scan_records

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from ledger_cli.engine.badrows import BadRows


class RecordReader(LockedDirectory):
    _one_scan: dict[str, TaskState] | None = None
    """Every record file's record, read once for the checks of `one_scan`."""
    _in_one_scan = False
    _seen: dict[str, TaskState] | None = None
    bad_rows: BadRows | None = None
    """Set by engine/badrows.around: the listings note an undecodable record
    file there and go on (docs/design.md §5.5)."""

    def seen_files(self, seen: dict[str, TaskState]) -> None:
        """Every record file already read and checked without the lock
        (`ledger doctor`'s walk: digest -> record): the next `one_scan`'s
        first pass, itself without the lock, takes them instead of reading
        every file again. Each was read whole (a record file is replaced
        atomically), so each is a state some writer committed; a problem the
        pass finds is judged again under the lock on a fresh scan."""
        self._seen = seen

    @contextlib.contextmanager
    def one_scan(self) -> Iterator[None]:
        """Read the record files once for every check inside the block
        (`ledger doctor`'s index checks: one scan, not one each). The checks
        make their first pass over that scan without the lock, and take the
        lock, with a fresh scan (`fresh=True`), only to confirm a problem it
        found: a writer is never held off for a whole scan (docs/design.md §5.4)."""
        self._check_open()
        self._one_scan, self._in_one_scan = None, True
        try:
            yield
        finally:
            self._one_scan, self._in_one_scan = None, False

    def _scan_unswept(self, root_fd: int, fresh: bool = False) -> dict[str, TaskState]:
        """scan_records(sweep=False), once per `one_scan` block (do not mutate);
        `fresh`: a scan of its own, never the shared one (a locked confirmation)."""
        if fresh:
            return scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=False)
        if self._one_scan is not None:
            return self._one_scan
        found = self._seen if self._in_one_scan else None
        if found is None:
            found = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=False)
        if self._in_one_scan:
            self._one_scan, self._seen = found, None
        return found

    @store_method
    def range(self) -> Iterator[TaskState]:
        """Every record, pruned ones included, sorted by key (UTF-8 byte order),
        read under the lock."""
        return self._range(pruned=True)

    @store_method
    def visible_range(self) -> Iterator[TaskState]:
        """Every record but the pruned ones (`list`, `tree`): pruned/ is not read."""
        return self._range(pruned=False)

    def scan_visible(self) -> Iterator[TaskState]:
        """Every record but the pruned ones, streamed in storage order (shard by
        shard, not key order) without the lock: `list --jsonl` prints each row as
        it is read, in constant memory. A record file is replaced atomically, so
        each one read is whole; records written meanwhile may or may not appear."""
        self._check_open()
        with io_errors(self._root):
            root_fd = fsutil.open_root(self._root)
            if root_fd is None:
                return
            try:
                if not self._meta_seen and not self._initialized(root_fd):
                    return
                counted = tally.read_counts(self._root, root_fd)
                rfd = fsutil.open_subdir(
                    root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=False
                )
            finally:
                os.close(root_fd)
            if rfd is None:
                return
            seen = dict.fromkeys(tally.STATUSES, 0)
            bad = self.bad_rows
            unread = 0
            try:
                for shard in sorted(os.listdir(rfd)):
                    if not layout.SHARD.matches(shard):
                        continue
                    path = self._shown(RECORDS_DIR, shard)
                    sfd = fsutil.open_subdir(rfd, shard, path, create=False)
                    if sfd is None:
                        continue
                    try:
                        names = sorted(os.listdir(sfd))
                        prefix = path + os.sep  # self._shown(RECORDS_DIR, shard, fname)
                        for fname in names:
                            if not layout.RECORD_FILE.matches(fname):
                                continue
                            shown = prefix + fname
                            data = fsutil.read_file(sfd, fname, shown)
                            if data is None:
                                continue
                            try:
                                rec = decode_record_file(
                                    data, shown, checksummed=self._checksummed, digest=fname[:-5]
                                )
                            except StoreError as exc:
                                if bad is None:
                                    raise
                                bad.note(shown, exc)
                                unread += 1
                                continue
                            seen[rec.status] += 1
                            yield rec
                    finally:
                        os.close(sfd)
            finally:
                os.close(rfd)
            # Read to its end: checked against the tally, as `_range` is.
            if counted is not None and _differs(counted, seen, unread):
                self._confirm_scan(counted, seen)

    def _range(self, *, pruned: bool) -> Iterator[TaskState]:
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return iter(())
            found, unread = self._scan_around(root_fd, sweep=True)
            self._refuse_disagreement(root_fd, found.values(), unread)
            if pruned:
                seen = {rec.key for rec in found.values()}
                extra = [r for r in prunedfile.read_all(self._root, root_fd) if r.key not in seen]
            layout.sweep_root(self._root, root_fd)
            self._lock.sweep(root_fd)
            batch = self._batch
            if batch is not None and batch.mine():
                for digest, (rec, _) in batch.records.items():
                    found[digest] = rec
        records = list(found.values())
        if pruned:
            records += [r for r in extra if key_digest(r.key) not in found]
        return iter(sorted(records, key=lambda rec: byte_order(rec.key)))

    def _refuse_disagreement(
        self, root_fd: int, found: Iterable[TaskState], unread: int = 0
    ) -> None:
        """Raise StoreDamageError when the lock holder's records (every record
        file's) disagree with the tally's counts: a record file is lost, or the
        tally is damaged, and an answer from either would be wrong. (Under the
        lock the tally is exact; while it is not built there is nothing to
        compare.) `unread` record files were there but did not decode (a
        listing that went around them): of unknown status, they account for
        that many records short, no more."""
        counts = tally.read_counts(self._root, root_fd)
        if counts is None:
            return
        seen = _by_status(found)
        if not _differs(counts, seen, unread):
            return
        diff = ", ".join(
            f"{status} {counts[status]} (read {seen[status]})"
            for status in tally.STATUSES
            if counts[status] != seen[status]
        )
        if diff and unread:
            diff += f" and {unread} record file{'s' if unread > 1 else ''} unreadable"
        if diff:
            from ledger_cli.errors import StoreDamageError

            raise StoreDamageError(
                f"ledger: store: {self._shown(tally.TALLY_DIR, tally.COUNTS)}: the tally counts "
                f"other records than the record files hold: {diff}; a record file is lost "
                "or the tally is damaged (ledger doctor names which)"
            )

    def _scan_around(self, root_fd: int, *, sweep: bool) -> tuple[dict[str, TaskState], int]:
        """scan_records, going around the files that do not decode when a
        listing asks it to (`bad_rows`): the records, and how many it went around."""
        if self.bad_rows is None:
            scan = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=sweep)
            return scan, 0
        from ledger_cli.engine.badrows import BadRows

        here = BadRows()
        found = scan_records(
            self._root, root_fd, checksummed=self._checksummed, sweep=sweep, bad=here
        )
        for name, why in here.found.items():
            self.bad_rows.found.setdefault(name, why)
        return found, len(here)

    def _confirm_scan(self, counted: dict[str, int], seen: dict[str, int]) -> None:
        """After a scan without the lock that read `seen` records of each status
        where the tally counted `counted`: StoreDamageError when they still
        disagree under the lock. Only asked when the counts read the same after
        the scan (a writer between them explains any difference), so a busy
        store seldom pays for the locked scan."""
        with self._locked(create=False) as root_fd:
            if root_fd is None or tally.read_counts(self._root, root_fd) != counted:
                return
            found, unread = self._scan_around(root_fd, sweep=False)
            self._refuse_disagreement(root_fd, found.values(), unread)

    def _current(self, root_fd: int, key: str, digest: str) -> TaskState | None:
        """The record as this lock holder sees it (its batch's writes included)."""
        batch = self._batch
        if batch is None:
            return self._read_record(root_fd, key, digest)
        pending = batch.records.get(digest)
        if pending is not None:
            return pending[0]
        if digest in batch.cache:
            return batch.cache[digest]
        rec = self._read_record(root_fd, key, digest, batch)
        batch.cache[digest] = rec
        return rec

    def _read_record(
        self, root_fd: int, key: str, digest: str, batch: PendingBatch | None = None
    ) -> TaskState | None:
        """The key's record, from its file or else pruned/; a lock holder's
        `batch` notes what the record file held and keeps what pruned/ held."""
        rec = self._read_digest(root_fd, digest)
        if batch is not None:
            batch.files[digest] = rec
        if rec is None:
            held = batch.held_pruned if batch is not None and self._holding() else None
            return prunedfile.find(self._root, root_fd, key, digest, held)
        if rec is not None and rec.key != key:  # unreachable short of a SHA-256 collision
            raise fail(
                self._shown(RECORDS_DIR, digest[:2], digest + ".json"),
                f"holds the record of key {rec.key!r}, not of {key!r}",
            )
        return rec

    def _read_digest(self, root_fd: int, digest: str) -> TaskState | None:
        """The record stored under `digest` (checked to belong there), or None."""
        shard, fname = digest[:2], digest + ".json"
        shown = self._shown(RECORDS_DIR, shard, fname)
        if self._holding() and root_fd == self._root_fd:
            rfd = self._cached_dir(root_fd, RECORDS_DIR, RECORDS_DIR)
            if rfd is None:
                return None
            sfd = self._cached_dir(rfd, shard, f"{RECORDS_DIR}/{shard}")
            if sfd is None:
                return None
            data = fsutil.read_file(sfd, fname, shown)
        else:
            rfd = fsutil.open_subdir(root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=False)
            if rfd is None:
                return None
            try:
                sfd = fsutil.open_subdir(rfd, shard, self._shown(RECORDS_DIR, shard), create=False)
                data = fsutil.read_in(sfd, fname, shown)
            finally:
                os.close(rfd)
        if data is None:
            return None
        return decode_record_file(data, shown, checksummed=self._checksummed, digest=digest)


def _differs(counted: dict[str, int], seen: dict[str, int], unread: int) -> bool:
    """Whether a scan that read `seen` records of each status, and `unread`
    files it could not decode, disagrees with the tally's `counted`."""
    if not unread:
        return any(counted[s] != seen[s] for s in tally.STATUSES)
    short = [counted[s] - seen[s] for s in tally.STATUSES]
    return min(short) < 0 or sum(short) != unread


def _by_status(records: Iterable[TaskState]) -> dict[str, int]:
    seen = dict.fromkeys(tally.STATUSES, 0)
    for rec in records:
        seen[rec.status] += 1
    return seen
