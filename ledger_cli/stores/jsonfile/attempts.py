"""Attempts on the JSON store (docs/design.md §7.1): files of their own, beside the
records (attemptfiles.py: the files, their format and directories).

One file per attempt, the metadata and the kept output together, replaced as
one: a reader never sees an end without its output, or output without the
count that goes with it.

Inside a batch (the caller's unit, in the thread that opened it) a start or
a save is one more write of the batch: it goes in the batch's journal with
the records and is made durable by the same commit (`ledger run` starts its
first attempt in the claim's unit and saves the end in the completion's).
A crash leaves both or neither (journal.py).

Outside a batch every write is the store's durable replace
(docs/reliability.md): a temporary file in the key's directory, fsynced,
renamed over the attempt file, the directory fsynced. A crash at any
instant leaves each attempt file old or new, never torn, and at most a stray
`.tmp` beside it (`doctor` notes it, `--fix` removes it).

Locking: starting an attempt (choosing `n`, removing the attempts beyond the
newest 16) and removing attempts happen under the store lock, a short hold.
A save outside a batch (the runner's flush, about once a second) writes and
fsyncs its temporary file *outside* the lock, and takes the lock only for
the rename and the directory fsync, after checking that the attempt was not
removed meanwhile: a command's output never keeps other writers waiting on
its disk writes. Readers take no lock at all.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.attempts import Attempt, expired, new_part, next_n
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import attemptfiles as files
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.attemptfiles import SUFFIX, attempt_number
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from ledger_cli.stores.jsonfile.locking import PendingBatch
    from ledger_cli.stores.jsonfile.store import JsonFileStore

__all__ = ["JsonAttempts", "attempt_number"]


class JsonAttempts:
    folds_into_batch = True
    """A start or a save inside the caller's batch commits with it (one
    journal, one sync): `ledger run` starts its first attempt in the claim's
    unit, and notes the pid (`note_pid`) once the command outlives a poll."""

    def __init__(self, store: JsonFileStore) -> None:
        self._store = store
        self._root = store.path

    def _shown(self, *parts: str) -> str:
        return files.shown(self._root, *parts)

    def _digest(self, key: str) -> str:
        digest = key_digest(key)
        if digest is None:
            raise StoreError(
                f"ledger: store: key {key!r} is not valid Unicode; no attempt can be recorded"
            )
        return digest

    def _key_dir(self, key: str, *, create: bool, root_fd: int | None = None) -> int | None:
        """The key's attempt directory (fd), None when missing and not `create`.
        A lookup under the lock keeps `attempts/` and its shard open for the
        rest of the hold (the store's directory cache)."""
        digest = self._digest(key)
        store = self._store
        if create and store._holding():
            store._drop_dirs()  # the cache may call missing a directory this makes
        if create or root_fd is None or root_fd != store._root_fd or not store._holding():
            return files.key_dir(self._root, digest, create=create, root_fd=root_fd)
        top_name, shard = files.ATTEMPTS_DIR, digest[:2]
        top = store._cached_dir(root_fd, top_name, top_name)
        sfd = None if top is None else store._cached_dir(top, shard, f"{top_name}/{shard}")
        if sfd is None:
            return None
        return fsutil.open_subdir(sfd, digest, self._shown(shard, digest), create=False)

    @contextlib.contextmanager
    def _reading(self, key: str) -> Iterator[tuple[int, str] | None]:
        """The key's attempt directory and its shown path for the block, read
        without the lock; None when the key has none (or no file can name it)."""
        digest = key_digest(key)
        dir_fd = None if digest is None else self._key_dir(key, create=False)
        if dir_fd is None or digest is None:
            yield None
            return
        try:
            yield dir_fd, self._shown(digest[:2], digest)
        finally:
            os.close(dir_fd)

    def _my_batch(self) -> PendingBatch | None:
        """The open batch of this thread, which this write joins; else None."""
        batch = self._store._batch
        return batch if batch is not None and batch.mine() else None

    # -- AttemptLog --------------------------------------------------------------

    @store_method
    def start_attempt(self, att: Attempt) -> int:
        digest = self._digest(att.key)
        shown = self._shown(digest[:2], digest)
        with self._store._locked(create=True) as root_fd:
            assert root_fd is not None
            batch = self._my_batch()
            if batch is not None:
                return self._start_in(batch, root_fd, att, digest, shown)
            self._store.checkpoint(root_fd)  # a write around wal.log (wal.py)
            dir_fd = self._key_dir(att.key, create=True, root_fd=root_fd)
            assert dir_fd is not None
            try:
                kept = files.names(dir_fd, shown, every=True)
                n = next_n(kept)
                stored = att.copy()
                stored.n = n
                name = f"{n}{SUFFIX}"
                tmp = fsutil.write_temp(dir_fd, name, files.encode(stored, b""), shown, sync=True)
                try:
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    for old in expired(kept, n):
                        files.remove(dir_fd, old)
                    os.fsync(dir_fd)
                except OSError as exc:
                    fsutil.unlink_quiet(dir_fd, tmp)
                    raise fail(shown, "cannot record the attempt", exc) from None
            finally:
                os.close(dir_fd)
        return n

    def _start_in(
        self, batch: PendingBatch, root_fd: int, att: Attempt, digest: str, shown: str
    ) -> int:
        """A start as a write of `batch` (the store lock is held to its commit)."""
        kept = set(self._on_disk(root_fd, att.key, shown))
        for d, n, data in batch.attempts:
            if d == digest:
                (kept.add if data is not None else kept.discard)(n)
        found = sorted(kept)
        n = next_n(found)
        stored = att.copy()
        stored.n = n
        batch.add_attempt((digest, n, files.encode(stored, b"")))
        for old in expired(found, n):
            batch.add_attempt((digest, old, None))
        return n

    def _on_disk(self, root_fd: int, key: str, shown: str) -> list[int]:
        dir_fd = self._key_dir(key, create=False, root_fd=root_fd)
        if dir_fd is None:
            return []
        try:
            return files.names(dir_fd, shown, every=True)
        finally:
            os.close(dir_fd)

    @store_method
    def save_attempt(self, att: Attempt, output: bytes | None) -> None:
        digest = self._digest(att.key)
        shown = self._shown(digest[:2], digest)
        if self._my_batch() is not None:
            self._save_in(att, output, digest, shown)
            return
        dir_fd = self._key_dir(att.key, create=False)
        if dir_fd is None:
            return  # removed meanwhile (prune)
        name = f"{att.n}{SUFFIX}"
        try:
            if output is None:
                output = files.read_output(dir_fd, name, shown, 0)
                if output is None:
                    return
            # The slow part (the bytes, their fsync) before the lock is taken.
            tmp = fsutil.write_temp(dir_fd, name, files.encode(att, output), shown, sync=True)
            try:
                with self._store._locked(create=False):
                    if not files.exists(dir_fd, name):
                        return  # removed meanwhile (prune, 16 newer attempts)
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    tmp = ""
                    os.fsync(dir_fd)
            except OSError as exc:
                raise fail(shown, "cannot record the attempt", exc) from None
            finally:
                if tmp:
                    fsutil.unlink_quiet(dir_fd, tmp)
        finally:
            os.close(dir_fd)

    def _save_in(self, att: Attempt, output: bytes | None, digest: str, shown: str) -> None:
        """A save as a write of this thread's batch: the attempt as the batch
        left it (its own start or save), else as on disk."""
        with self._store._locked(create=False) as root_fd:
            batch = self._my_batch()
            if root_fd is None or batch is None:
                return
            current: bytes | None = None
            for d, n, data in reversed(batch.attempts):
                if d == digest and n == att.n:
                    if data is None:
                        return  # removed in this batch
                    current = data
                    break
            if current is not None:
                if output is None:
                    output = current.partition(b"\n")[2]
            else:
                dir_fd = self._key_dir(att.key, create=False, root_fd=root_fd)
                if dir_fd is None:
                    return  # removed meanwhile (prune)
                try:
                    on_disk = files.read_output(dir_fd, f"{att.n}{SUFFIX}", shown, 0)
                finally:
                    os.close(dir_fd)
                if on_disk is None:
                    return  # removed meanwhile (prune, 16 newer attempts)
                if output is None:
                    output = on_disk
            batch.add_attempt((digest, att.n, files.encode(att, output)))

    @store_method
    def drop_attempt(self, key: str, n: int) -> None:
        """Remove attempt n of `key`: one started with a claim whose command
        never ran (it could not be started, or a signal came first)."""
        if key_digest(key) is None:
            return
        digest = self._digest(key)
        with self._store._locked(create=False) as root_fd:
            if root_fd is None:
                return
            batch = self._my_batch()
            if batch is not None:
                batch.add_attempt((digest, n, None))
                return
            self._store.checkpoint(root_fd)  # a write around wal.log (wal.py)
            dir_fd = self._key_dir(key, create=False, root_fd=root_fd)
            if dir_fd is None:
                return
            try:
                files.remove(dir_fd, n)
                fsutil.fsync_fd(dir_fd, self._shown(digest[:2], digest))
            finally:
                os.close(dir_fd)

    @store_method
    def note_pid(self, att: Attempt) -> None:
        """The running command's pid, for an attempt started without it (in
        the claim's commit): a note beside the attempt, no fsync, no lock
        (attemptfiles.py)."""
        if not att.pid:
            return
        with self._reading(att.key) as got:
            if got is not None:
                files.write_pid(got[0], att.n, att.pid, got[1])

    @store_method
    def list_attempts(self, key: str) -> list[Attempt]:
        with self._reading(key) as got:
            if got is None:
                return []
            dir_fd, shown = got
            found = []
            for n in files.names(dir_fd, shown):
                att = files.header(dir_fd, n, shown)
                if att is not None:
                    found.append(att)
            return found

    @store_method
    def read_output(self, key: str, n: int, start: int = 0) -> bytes:
        with self._reading(key) as got:
            if got is None or n not in files.names(*got):
                return b""
            return files.read_output(got[0], f"{n}{SUFFIX}", got[1], start) or b""

    @store_method
    def read_new(self, key: str, n: int, seen: int) -> tuple[Attempt | None, bytes]:
        """The header and the new bytes from one open file: consistent."""
        name = f"{n}{SUFFIX}"
        with self._reading(key) as got:
            if got is None or n not in files.names(*got):
                return None, b""
            dir_fd, shown = got
            opened = files.open_attempt(dir_fd, name, shown)
            if opened is None:
                return None, b""
            fd, obj = opened
            try:
                att = files.decode(dir_fd, n, obj, shown)
                os.lseek(fd, new_part(att, seen), os.SEEK_CUR)
                return att, files.read_rest(fd, f"{shown}/{name}")
            finally:
                os.close(fd)

    @store_method
    def remove_attempts(self, keys: Iterable[str]) -> int:
        """Remove every attempt of `keys` in one lock hold, made durable by one
        sync at its end (syncfs where durability.py prefers it, else an fsync
        of each directory touched): the caller gives a block of keys at a time
        (`ledger prune`, `doctor --fix`: cli/blockwrites.py sizes the blocks,
        docs/design.md §5.4). A crash before the sync leaves some of the
        files: attempts of keys that are pruned or have no record, which
        nothing reads as more than garbage (a re-run of `prune` and
        `doctor --fix` remove them)."""
        removed = 0
        with self._store._locked(create=False) as root_fd:
            if root_fd is None:
                return 0
            self._store.checkpoint(root_fd)  # a write around wal.log (wal.py)
            top = fsutil.open_subdir(root_fd, files.ATTEMPTS_DIR, self._shown(), create=False)
            if top is None:
                return 0
            touched: dict[str, int] = {}  # shard name -> fd, kept open for the sync
            kept: list[tuple[int, str]] = []  # key directories not emptied (fd, shown)
            try:
                for key in dict.fromkeys(keys):
                    digest = key_digest(key)
                    if digest is not None:
                        removed += self._remove_key(top, digest, touched, kept)
                self._sync_removal(root_fd, touched, kept)
            finally:
                for fd in [*touched.values(), *(fd for fd, _ in kept), top]:
                    os.close(fd)
        return removed

    def _remove_key(
        self, top: int, digest: str, touched: dict[str, int], kept: list[tuple[int, str]]
    ) -> int:
        """Unlink the files of one key's attempt directory and the directory
        itself, with no sync (`_sync_removal` makes the block durable)."""
        shard_name = digest[:2]
        shard = touched.get(shard_name)
        if shard is None:
            shard = fsutil.open_subdir(top, shard_name, self._shown(shard_name), create=False)
            if shard is None:
                return 0
            touched[shard_name] = shard
        shown = self._shown(shard_name, digest)
        dir_fd = fsutil.open_subdir(shard, digest, shown, create=False)
        if dir_fd is None:
            return 0
        removed = 0
        try:
            for name in os.listdir(dir_fd):
                if fsutil.unlink_quiet(dir_fd, name) and attempt_number(name) is not None:
                    removed += 1
        except OSError as exc:
            os.close(dir_fd)
            raise fail(shown, "cannot remove attempts", exc) from None
        try:
            os.rmdir(digest, dir_fd=shard)
        except OSError:
            kept.append((dir_fd, shown))  # not empty (a concurrent start): its files stay valid
        else:
            os.close(dir_fd)
        return removed

    def _sync_removal(
        self, root_fd: int, touched: dict[str, int], kept: list[tuple[int, str]]
    ) -> None:
        """One sync for a block's removals: syncfs(2) where durability.py
        prefers it, else an fsync of each shard touched and each key
        directory left (not two fsyncs a key)."""
        from ledger_cli.stores.jsonfile import durability

        if not touched:
            return
        if durability.use_syncfs(len(touched) + len(kept)):
            fsutil.sync_filesystem(root_fd, self._root)
            return
        for fd, shown in kept:
            fsutil.fsync_fd(fd, shown)
        for name, fd in touched.items():
            fsutil.fsync_fd(fd, self._shown(name))

    @store_method
    def attempt_keys(self) -> list[str]:
        return sorted(self.scan()[0])

    @store_method
    def scan(self) -> tuple[set[str], list[str]]:
        """(every key with an attempt, the stray temporary files' paths)."""
        return files.scan(self._root)
