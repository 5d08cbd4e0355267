"""Rebuilding ready/ (readyindex.py) from the records: every partition
written afresh, ready/'s own manifest last, listing the others."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import derived, fsutil
from ledger_cli.stores.jsonfile.layout import shown
from ledger_cli.stores.jsonfile.readyindex import (
    DEFAULT_QUEUE,
    INDEX,
    LEGACY_NEEDS_DIR,
    MANIFEST,
    QUEUES_DIR,
    READY_DIR,
    Entry,
    Schedule,
    drop_legacy,
    entry_of,
    is_candidate,
    open_dir,
    part_dir,
    write_part,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ledger_cli.engine.record import TaskState


def rebuild(
    root: str,
    root_fd: int,
    records: Iterable[TaskState],
    sched: Callable[[str], Schedule | None],
) -> None:
    """Write the whole index afresh from `records` (every record of the store),
    ordered by each key's schedule as `sched` reads it (schedulefile.reader), durably.

    The manifest goes last: a crash in between leaves no manifest, which means
    "rebuild" to the next holder of the lock.
    """
    by_key = {rec.key: rec for rec in records}

    def load(key: str) -> TaskState | None:
        return by_key.get(key)

    rfd = open_dir(root, root_fd, create=True)
    assert rfd is not None
    try:
        derived.unbuild(root, rfd, INDEX)
        _clear(root, rfd)
        from ledger_cli.stores.jsonfile.queueread import reader

        queue_of = reader(root)
        by_queue: dict[str, list[Entry]] = {DEFAULT_QUEUE: []}
        for rec in by_key.values():
            entry = entry_of(rec, sched(rec.key))
            if entry is not None and is_candidate(rec, load):
                by_queue.setdefault(queue_of(rec.key), []).append(entry)
        # The other queues' partitions first: ready/'s manifest, written last,
        # says the whole index is there.
        for queue in sorted(by_queue):
            if queue == DEFAULT_QUEUE:
                continue
            sub = (QUEUES_DIR, part_dir(queue))
            qfd = fsutil.open_subdir(
                rfd, QUEUES_DIR, shown(root, READY_DIR, QUEUES_DIR), create=True
            )
            assert qfd is not None
            pfd = None
            try:
                pfd = fsutil.open_subdir(qfd, sub[1], shown(root, READY_DIR, *sub), create=True)
                assert pfd is not None
                write_part(root, root_fd, pfd, sub, sorted(by_queue[queue]))
            finally:
                fsutil.close_all([pfd, qfd])
        # ready/'s manifest lists the partitions: one it lists that is gone is damage.
        listed = [part_dir(q) for q in sorted(by_queue) if q != DEFAULT_QUEUE]
        write_part(root, root_fd, rfd, (), sorted(by_queue[DEFAULT_QUEUE]), listed)
    finally:
        os.close(rfd)


def _clear(root: str, rfd: int) -> None:
    """Remove every chunk and partition, and the waiter files of older releases
    (the manifest is gone already)."""
    for name in os.listdir(rfd):
        if name == LEGACY_NEEDS_DIR:
            drop_legacy(rfd)
        elif name == QUEUES_DIR:
            import shutil

            # What cannot be removed is rewritten whole by the partition's rebuild.
            shutil.rmtree(QUEUES_DIR, ignore_errors=True, dir_fd=rfd)
        elif name != MANIFEST:
            fsutil.unlink_quiet(rfd, name)
