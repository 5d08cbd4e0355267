"""Applying writes: record files, their live/ entries and history lines, made durable.

A write outside `batch()` is durable before it returns: the new bytes go to a
temporary file that is fsynced and renamed over the record, then the
directory is fsynced. Large batches are made durable with one syncfs(2)
instead (the journal covers a crash before it).
"""

from __future__ import annotations

from ledger_cli.engine.record import TaskState
from ledger_cli.stores import _fsutil
from ledger_cli.stores.jsonfile import historyfile, liveindex
from ledger_cli.stores.jsonfile.layout import LIVE_DIR, LIVE_STATUSES, RECORDS_DIR, shown

SYNC_EACH_MAX = 16
"""Batches writing more files than this are made durable with one syncfs(2)."""


def write_records(
    root: str,
    root_fd: int,
    records: dict[str, tuple[TaskState, bytes]],
    history: list[bytes],
    history_at: int | None,
) -> None:
    """Write records, their live/ markers and history lines; durable on return.

    Markers of records that become pending/claimed are created (and made
    durable) before the records are written, markers of the others removed
    after: the markers are always a superset of the live records.
    `history_at`: the size history.jsonl must have before the lines go in
    (a journal replay cuts what a crashed apply appended); None = the end.
    """
    use_syncfs = len(records) + (1 if history else 0) > SYNC_EACH_MAX
    if use_syncfs and not _fsutil.sync_filesystem_available():
        use_syncfs = False
    rfd = lfd = None
    shard_fds: dict[str, int] = {}
    try:
        if records:
            sync = not use_syncfs
            rfd = _fsutil.open_subdir(
                root_fd, RECORDS_DIR, shown(root, RECORDS_DIR), create=True, sync=sync
            )
            lfd = _fsutil.open_subdir(
                root_fd, LIVE_DIR, shown(root, LIVE_DIR), create=True, sync=sync
            )
            assert rfd is not None and lfd is not None
            if use_syncfs:
                # Many records: one index file per shard rather than a marker
                # each (the syncfs below makes them durable with the records;
                # the journal covers a crash in between).
                liveindex.index_batch(root, root_fd, lfd, records)
            else:
                created = False
                for digest, (rec, _) in records.items():
                    if rec.status in LIVE_STATUSES:
                        created |= liveindex.mark_live(root, lfd, digest)
                if created:
                    _fsutil.fsync_fd(lfd, shown(root, LIVE_DIR))
            for digest in records:
                shard = digest[:2]
                if shard not in shard_fds:
                    sfd = _fsutil.open_subdir(
                        rfd, shard, shown(root, RECORDS_DIR, shard), create=True, sync=sync
                    )
                    assert sfd is not None
                    shard_fds[shard] = sfd
            for digest, (_, data) in records.items():
                fname = digest + ".json"
                _fsutil.replace_file(
                    shard_fds[digest[:2]],
                    fname,
                    data,
                    shown(root, RECORDS_DIR, digest[:2], fname),
                    sync=sync,
                    tmp_dir_fd=root_fd,
                )
        if history:
            historyfile.append_lines(root, root_fd, history, history_at, sync=not use_syncfs)
        if use_syncfs:
            _fsutil.sync_filesystem(root_fd, root)
        else:
            for shard, sfd in shard_fds.items():
                _fsutil.fsync_fd(sfd, shown(root, RECORDS_DIR, shard))
        if lfd is not None:
            for digest, (rec, _) in records.items():
                if rec.status not in LIVE_STATUSES:
                    _fsutil.unlink_quiet(lfd, digest)  # a leftover is harmless
    finally:
        _fsutil.close_all([*shard_fds.values(), rfd, lfd])
