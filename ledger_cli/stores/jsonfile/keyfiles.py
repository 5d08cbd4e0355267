"""One small JSON file per key beside the records: a key's schedule
(schedulefile.py) and its queue (queuefile.py).

`DIR/<key digest>.json` holds the key itself and the value, so a digest
collision or a file moved in from another key reads as no value, and a
`"sum"` member last: the SHA-256 of the file's JSON without it, so a flipped
byte that still parses (2027 read as 2037, another queue) is damage, not a
silent change of when or where the task runs (a file written before the sum
was added is read without one). A key without a file has the default value.

A write goes with the batch that makes it, as its records do (a write outside
a batch is a batch of one): staged in the batch (`PendingBatch.put_side`,
read back by the same batch), carried by its commit (a wal.log frame or
journal.json: journal.py) and written by its apply (`apply_sides`) before
its records and their ready-index entries, unsynced where the commit's log
or journal covers them, each replaced atomically (temporary file, rename).
A crash after the commit point writes them again on the replay; one before
it leaves neither them nor the records. Reads take no lock: a rename
replaces a file whole.
"""

from __future__ import annotations

import json
import os
from hashlib import sha256
from typing import TYPE_CHECKING, Generic, TypeVar

from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

V = TypeVar("V")
D = TypeVar("D")

SideOp = tuple[str, str, "bytes | None"]
"""A side file a batch writes: (its directory, the key, the file's bytes or
None, its removal)."""
SIDE_DIRS = ("queue", "schedule")
"""The directories of side files a batch writes: queueread.QUEUE_DIR,
schedulefile.SCHEDULE_DIR."""


def unreadable(path: str, what: str, remedy: str) -> StoreDamageError:
    """A side file (a key's schedule or queue, paused.json, limits.json) this
    release cannot read, named with what the user can do, never its bytes:
    `ledger: store: PATH: is not a WHAT file this release can read; REMEDY`."""
    return StoreDamageError(
        f"ledger: store: {path}: is not a {what} file this release can read; {remedy}"
    )


class KeyFiles(Generic[V]):
    """The files of one kind under `root/dirname` (the directory names the kind
    in errors: a "schedule" file). `decode(obj)` turns a parsed file into
    (key, value), raising ValueError, TypeError or KeyError on a file of
    another shape; `remedy` says what the user can do about a damaged one."""

    def __init__(
        self,
        root: str,
        dirname: str,
        decode: Callable[[dict[str, object]], tuple[str, V]],
        remedy: str,
    ) -> None:
        self.root = root
        self.dirname = dirname
        self._decode = decode
        self.remedy = remedy

    def decode(self, data: bytes, shown: str) -> tuple[str, V]:
        try:
            obj = json.loads(data)
            if type(obj) is not dict:
                raise TypeError(self.dirname)
            if "sum" in obj and obj.pop("sum") != _sum(obj):
                raise ValueError(self.dirname)
            key, value = self._decode(obj)
            if type(key) is not str:
                raise TypeError(self.dirname)
            return key, value
        except (ValueError, TypeError, KeyError):
            raise unreadable(shown, self.dirname, self.remedy) from None

    def _dir(self, create: bool) -> int | None:
        root_fd = fsutil.open_root(self.root)
        if root_fd is None:
            return None
        try:
            shown = os.path.join(self.root, self.dirname)
            return fsutil.open_subdir(root_fd, self.dirname, shown, create=create)
        finally:
            os.close(root_fd)

    def read(self, key: str) -> V | None:
        """The key's value; None without a file (or when its file names another key)."""
        digest = key_digest(key)
        if digest is None:
            return None
        name = digest + ".json"
        shown = os.path.join(self.root, self.dirname, name)
        data = fsutil.read_in(self._dir(create=False), name, shown)
        if data is None:
            return None
        stored, value = self.decode(data, shown)
        return value if stored == key else None

    def exists(self, key: str) -> bool:
        """Whether `key` has a file (of any content)."""
        digest = key_digest(key)
        return digest is not None and os.path.lexists(
            os.path.join(self.root, self.dirname, digest + ".json")
        )

    def encode(self, key: str, body: dict[str, object] | None) -> bytes | None:
        """The bytes of `key`'s file holding `body` (which names the key; None:
        no file). StoreError for a key no file can name."""
        if key_digest(key) is None:
            from ledger_cli.errors import StoreError

            raise StoreError("ledger: store: this key cannot be stored")
        if body is None:
            return None
        return json.dumps({**body, "sum": _sum(body)}, ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )

    def all(self) -> dict[str, V]:
        """Every key's value, by key (a listing: for rebuilds and reports)."""
        fd = self._dir(create=False)
        if fd is None:
            return {}
        found: dict[str, V] = {}
        try:
            for name in sorted(os.listdir(fd)):
                if not name.endswith(".json") or name.startswith("."):
                    continue
                shown = os.path.join(self.root, self.dirname, name)
                data = fsutil.read_file(fd, name, shown)
                if data is not None:
                    key, value = self.decode(data, shown)
                    found[key] = value
        finally:
            os.close(fd)
        return found

    def any(self) -> bool:
        fd = self._dir(create=False)
        if fd is None:
            return False
        try:
            with os.scandir(fd) as entries:
                return any(e.name.endswith(".json") and not e.name.startswith(".") for e in entries)
        finally:
            os.close(fd)

    def reader(self, default: D) -> Callable[[str], V | D]:
        """A key's value (`default` without a file) for one operation: nothing
        read at all when the directory is absent, else one small file per key
        asked, never a listing, each read once (cached)."""
        if not os.path.isdir(os.path.join(self.root, self.dirname)):
            return lambda key: default
        cache: dict[str, V | D] = {}

        def read(key: str) -> V | D:
            if key not in cache:
                got = self._read_path(key)
                cache[key] = default if got is None else got
            return cache[key]

        return read

    def _read_path(self, key: str) -> V | None:
        """read() by the file's path: one open, where read() opens the root and
        the directory too (the ready index asks this for every entry it makes)."""
        digest = key_digest(key)
        if digest is None:
            return None
        path = os.path.join(self.root, self.dirname, digest + ".json")
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise fail(path, "cannot read", exc) from None
        stored, value = self.decode(data, path)
        return value if stored == key else None


def _sum(body: dict[str, object]) -> str:
    """The checksum of a side file's members (the "sum" member left out)."""
    text = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return sha256(text).hexdigest()


def apply_sides(root: str, root_fd: int, ops: Iterable[SideOp], *, sync: bool) -> None:
    """Write a committed batch's side files (each replaced whole, or removed),
    in its order; with `sync` each file and its directory are fsynced, else
    the commit's log or journal covers them. Repeating them (a replay) is
    harmless (`side_fsyncs`: the fsyncs it makes at most)."""
    dirs: dict[str, int | None] = {}
    try:
        for dirname, key, data in ops:
            digest = key_digest(key)
            if digest is None:
                continue  # never staged (KeyFiles.encode refuses it)
            where = os.path.join(root, dirname)
            if dirname not in dirs or (dirs[dirname] is None and data is not None):
                fsutil.close_all([dirs.get(dirname)])
                dirs[dirname] = fsutil.open_subdir(
                    root_fd, dirname, where, create=data is not None, sync=sync
                )
            fd = dirs[dirname]
            if fd is None:
                continue  # a removal where there is no directory: no file
            name = digest + ".json"
            if data is None:
                fsutil.unlink_quiet(fd, name)
            else:
                path = os.path.join(where, name)
                fsutil.replace_file(fd, name, data, path, sync=sync, tmp_dir_fd=root_fd)
        if sync:
            for dirname, fd in dirs.items():
                if fd is not None:
                    fsutil.fsync_fd(fd, os.path.join(root, dirname))
    finally:
        fsutil.close_all(dirs.values())


def side_fsyncs(ops: Iterable[SideOp]) -> int:
    """At most the fsyncs `apply_sides` makes with `sync`: a file a write, a directory each."""
    ops = list(ops)
    return sum(1 for op in ops if op[2] is not None) + len({op[0] for op in ops})
