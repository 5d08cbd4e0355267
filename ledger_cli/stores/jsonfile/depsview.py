"""The JSON store's side of the dependents index: the `dependents(keys)` hook of
the engine's dependents walk, the check and rebuild for `ledger doctor`
(depsindex.py holds the files)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import depsindex
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.reading import RecordReader
from ledger_cli.stores.jsonfile.records import scan_records


class DepsMethods(RecordReader):
    @store_method
    def dependents(self, keys: Iterable[str]) -> list[TaskState]:
        """The records naming any of `keys` in their needs, whatever their status,
        sorted by key (engine `dependents_walk`): each key's file under deps/ and
        the records it lists, read in one lock hold, so the cost follows the
        dependents, not the store. The caller's open batch is seen (its records
        scanned: a batch's own size). A stale or untidy file met is rewritten."""
        self._check_open()
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return []
            batch = self._batch
            pending = batch.records if batch is not None and batch.mine() else {}
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
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return []
            dfd = depsindex.open_dir(self._root, root_fd, create=False)
            if dfd is None:
                return []  # not built yet (an older store): the next writer builds it
            try:
                try:
                    if not depsindex.is_built(self._root, dfd):
                        return []
                except StoreError as exc:
                    return [str(exc)]
                found = self._scan_unswept(root_fd)
                listed: dict[str, set[str] | None] = {}
                problems: list[str] = []
                for digest, rec in sorted(found.items(), key=lambda item: byte_order(item[1].key)):
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
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is not None:
                self._rebuild_deps(root_fd)
