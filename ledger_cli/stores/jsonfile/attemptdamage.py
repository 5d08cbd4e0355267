"""A damaged attempt file (attemptfiles.py): named by `ledger doctor`, and
moved into damaged/ by `doctor --fix --drop-damaged` (docs/design.md §7.1).

An attempt file is the only copy of its run's metadata and kept output: no
`--fix` rebuilds it. While it does not read, `state KEY` and `output KEY`
exit 9 naming it. Accepting the loss moves it into `damaged/` (renamed, its
bytes kept, never rewritten), with its pid note removed, under the store
lock after a checkpoint of wal.log (a write around the log: wal.py); the
key's other attempts read again (`state`, `output`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import attemptfiles as files
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import DAMAGED_DIR, DIGEST, free_name, shown

if TYPE_CHECKING:
    from collections.abc import Callable


def _damaged_in(root: str, root_fd: int, digest: str) -> list[tuple[int, str]]:
    """The attempts of the key of `digest` (those readers show) that do not
    read: (number, the error's line) each."""
    where = files.shown(root, digest[:2], digest)
    dir_fd = files.key_dir(root, digest, create=False, root_fd=root_fd)
    if dir_fd is None:
        return []
    bad = []
    try:
        for n in files.names(dir_fd, where):
            try:
                files.header(dir_fd, n, where)
            except StoreError as exc:
                bad.append((n, str(exc)))
    finally:
        os.close(dir_fd)
    return bad


def damaged(root: str) -> list[tuple[str, str]]:
    """Every attempt file that does not read (no lock: an attempt file is
    replaced whole): (its key's digest, the error's line) each."""
    found: list[tuple[str, str]] = []
    root_fd = fsutil.open_root(root)
    if root_fd is None:
        return found
    try:
        top = os.path.join(root, files.ATTEMPTS_DIR)
        shards = sorted(os.listdir(top)) if os.path.isdir(top) else []
        for shard in shards:
            if not os.path.isdir(os.path.join(top, shard)):
                continue
            for digest in sorted(os.listdir(os.path.join(top, shard))):
                if DIGEST.matches(digest) and digest[:2] == shard:
                    found.extend((digest, line) for _, line in _damaged_in(root, root_fd, digest))
    except OSError as exc:
        raise fail(files.shown(root), "cannot list", exc) from None
    finally:
        os.close(root_fd)
    return found


def move_aside(
    root: str, root_fd: int, digest: str, before: Callable[[], None]
) -> list[tuple[str, str]]:
    """`doctor --fix --drop-damaged`, under the store lock: each attempt of
    the key of `digest` that does not read, moved into damaged/ (`before`
    the first move: the checkpoint of wal.log); (where it was, where it went) each."""
    bad = _damaged_in(root, root_fd, digest)
    if not bad:
        return []
    before()
    moved: list[tuple[str, str]] = []
    where = files.shown(root, digest[:2], digest)
    dir_fd = files.key_dir(root, digest, create=False, root_fd=root_fd)
    dfd = fsutil.open_subdir(root_fd, DAMAGED_DIR, shown(root, DAMAGED_DIR), create=True)
    assert dir_fd is not None and dfd is not None
    try:
        for n, _ in bad:
            name = f"{n}{files.SUFFIX}"
            target = free_name(dfd, f"attempt-{digest}-{name}")
            try:
                os.rename(name, target, src_dir_fd=dir_fd, dst_dir_fd=dfd)
            except OSError as exc:
                raise fail(f"{where}/{name}", "cannot move aside", exc) from None
            files.remove(dir_fd, n)  # its pid note
            moved.append((f"{where}/{name}", shown(root, DAMAGED_DIR, target)))
        fsutil.fsync_fd(dfd, shown(root, DAMAGED_DIR))
        fsutil.fsync_fd(dir_fd, where)
    finally:
        os.close(dir_fd)
        os.close(dfd)
    return moved
