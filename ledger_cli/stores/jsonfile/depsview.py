"""The JSON store's side of the dependents index: the `dependents(keys)` hook of
the engine's dependents walk, the check and rebuild for `ledger doctor`
(depsindex.py holds the files)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import depsindex, derived
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.reading import RecordReader
from ledger_cli.stores.jsonfile.records import scan_records

if TYPE_CHECKING:
    from collections.abc import Iterable

READS_PER_HOLD = 1024
"""Files (deps/ lists and records) `dependents` reads per lock hold outside a
batch (~0.2 s)."""


def _need(key: str) -> str:
    return depsindex.need_digest(key)


class _Listing:
    """One key's deps/ file as `_dependents_in_holds` works through it."""

    __slots__ = ("keep", "key", "left", "listed", "untidy", "whole")

    def __init__(self, key: str, listed: set[str], untidy: bool) -> None:
        self.key = key
        self.listed = listed
        self.untidy = untidy
        self.left = sorted(listed, reverse=True)
        self.keep: set[str] = set()
        self.whole = True  # listed and read in one lock hold


class DepsMethods(RecordReader):
    @store_method
    def dependents(self, keys: Iterable[str]) -> list[TaskState]:
        """The records naming any of `keys` in their needs, whatever their status,
        sorted by key (engine `dependents_walk`): each key's file under deps/ and
        the records it lists, so the cost follows the dependents, not the store.
        Inside the caller's batch, in its lock hold (its records scanned: a
        batch's own size); outside one, in lock holds of READS_PER_HOLD record
        reads at most (docs/design.md §5.4: 200,000 dependents read in one hold held the
        lock 36 s), each record read after every write before the call. A
        stale or untidy file met is rewritten (when read in one hold)."""
        self._check_open()
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        batch = self._batch
        if batch is None or not batch.mine():
            return self._dependents_in_holds(wanted)
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return []
            pending = batch.records
            found: dict[str, TaskState] = {}
            dfd = self._deps_dir(root_fd)
            try:
                for key in wanted:
                    need = depsindex.need_digest(key)
                    listed, untidy = depsindex.listed(self._root, dfd, need)
                    keep: set[str] = set()
                    for digest in listed:
                        rec = self._read_digest(root_fd, digest)  # as on disk
                        if rec is not None and key in (rec.needs or ()):
                            keep.add(digest)
                            if digest not in pending:
                                found[digest] = rec
                    if untidy or keep != listed:
                        depsindex.rewrite(self._root, root_fd, dfd, need, keep)
            finally:
                os.close(dfd)
            if pending:
                named = set(wanted)
                for digest, (rec, _) in pending.items():
                    if not named.isdisjoint(rec.needs or ()):
                        found[digest] = rec
        return sorted(found.values(), key=lambda rec: byte_order(rec.key))

    def _dependents_in_holds(self, wanted: list[str]) -> list[TaskState]:
        """`dependents` outside a batch: the lock is released after every
        READS_PER_HOLD record reads. A key's file whose digests took more than
        one hold is not rewritten (a writer may have listed more meanwhile)."""
        found: dict[str, TaskState] = {}
        at = 0
        cur: _Listing | None = None
        while cur is not None or at < len(wanted):
            with self._locked(create=False) as root_fd:
                if root_fd is None:
                    return []
                dfd = self._deps_dir(root_fd)
                try:
                    budget = READS_PER_HOLD
                    if cur is not None:
                        cur.whole = False
                    while budget > 0 and (cur is not None or at < len(wanted)):
                        if cur is None:
                            key = wanted[at]
                            at += 1
                            budget -= 1  # a file read too (most keys have none)
                            cur = _Listing(key, *depsindex.listed(self._root, dfd, _need(key)))
                        while cur.left and budget > 0:
                            digest = cur.left.pop()
                            budget -= 1
                            rec = self._read_digest(root_fd, digest)
                            if rec is not None and cur.key in (rec.needs or ()):
                                cur.keep.add(digest)
                                found[digest] = rec
                        if not cur.left:
                            if cur.whole and (cur.untidy or cur.keep != cur.listed):
                                depsindex.rewrite(
                                    self._root, root_fd, dfd, _need(cur.key), cur.keep
                                )
                            cur = None
                finally:
                    os.close(dfd)
        return sorted(found.values(), key=lambda rec: byte_order(rec.key))

    def _deps_dir(self, root_fd: int) -> int:
        """deps/, built from the records first if it is not (under the lock)."""
        return depsindex.open_built(self._root, root_fd, lambda: self._rebuild_deps(root_fd))

    def _rebuild_deps(self, root_fd: int) -> None:
        """Rebuild deps/ from the record files (not the open batch's writes)."""
        found = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=False)
        depsindex.rebuild(self._root, root_fd, found.items())

    @store_method
    def check_deps_index(self) -> list[str]:
        """Problems of the deps/ index against the records (`ledger doctor`): a
        record missing from the dependents of a need it names, a damaged file.
        Stale lines are no problem (the index is a superset by design)."""
        self._check_open()
        # Without the lock first; under it only to confirm (derived.py).
        if derived.read_unlocked(self, self._deps_problems) == []:
            return []
        with self._locked(create=False) as root_fd:
            return [] if root_fd is None else self._deps_problems(root_fd, fresh=True)

    def _deps_problems(self, root_fd: int, fresh: bool = False) -> list[str]:
        dfd = depsindex.open_dir(self._root, root_fd, create=False)
        if dfd is None:
            return []  # not built yet (an older store): the next writer builds it
        try:
            try:
                if not depsindex.is_built(self._root, dfd):
                    return []
            except StoreError as exc:
                return [str(exc)]
            found = self._scan_unswept(root_fd, fresh)
            listed: dict[str, set[str] | None] = {}
            problems: list[str] = []
            needing = [(digest, rec) for digest, rec in found.items() if rec.needs]
            for digest, rec in sorted(needing, key=lambda item: byte_order(item[1].key)):
                for need in rec.needs or ():
                    nd = depsindex.need_digest(need)
                    if nd not in listed:
                        try:
                            listed[nd] = depsindex.listed(self._root, dfd, nd)[0]
                        except StoreError as exc:  # damaged: named once
                            problems.append(str(exc))
                            listed[nd] = None
                    names = listed[nd]
                    if names is not None and digest not in names:
                        problems.append(
                            f"dependents index: {rec.key!r} is missing from the "
                            f"dependents of {need!r}"
                        )
            return problems
        finally:
            os.close(dfd)

    @store_method
    def rebuild_deps_index(self) -> None:
        """Rebuild the deps/ index from the records (`ledger doctor --fix`)."""
        self._on_root(self._rebuild_deps)
