"""The JSON store's side of live/ for `ledger doctor` (liveindex.py holds the
files): the check that live/ names every pending and claimed record, and the
repair that puts back the markers it misses. Both as derived.py says: a scan
without the lock first (docs/design.md §5.4), then only what it found judged
again under the lock, a block of records per hold. Imported by the store's
`check_live_index` and `rebuild_live_index` (repairs.py) on their call:
doctor's path only, not every command's start-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import derived, liveindex
from ledger_cli.stores.jsonfile.layout import LIVE_STATUSES
from ledger_cli.stores.jsonfile.locking import io_errors

if TYPE_CHECKING:
    from ledger_cli.stores.jsonfile.reading import RecordReader

_REPAIR_KEYS = 2_000
"""Records the check confirms, or the repair marks, per lock hold: a record
read and a marker each."""

SHOWN = 20
"""The records the check names one by one; the rest are counted."""


def _between_blocks() -> None:
    """The pause between two blocks (derived.pause; tests stand in for it)."""
    derived.pause()


def check(store: RecordReader) -> list[str]:
    """Problems of live/ against the records (`ledger doctor`): a pending or
    claimed record it does not name, which every scan of it would miss
    (those scans exit 9: liveindex.refuse_short). A shard file that does
    not read is a StoreError naming it."""
    with io_errors(store._root):
        unlisted = derived.read_unlocked(store, lambda root_fd: _unlisted(store, root_fd))
    missing: list[tuple[str, str]] = []
    if unlisted is None:  # no answer without the lock: all under it
        with io_errors(store._root), store._locked(create=False) as root_fd:
            if root_fd is None:
                return []
            missing = _still_unlisted(store, root_fd, _unlisted(store, root_fd, fresh=True))
    else:
        for block in derived.in_blocks(unlisted, _REPAIR_KEYS, _between_blocks):
            with io_errors(store._root), store._locked(create=False) as root_fd:
                if root_fd is None:
                    return []
                missing += _still_unlisted(store, root_fd, block)
    missing.sort()
    problems = [
        f"live index: {status} record {key!r} is missing from live/"
        for key, status in missing[:SHOWN]
    ]
    if len(missing) > SHOWN:
        problems.append(
            f"live index: {len(missing) - SHOWN:,} more pending or claimed records "
            "are missing from live/"
        )
    return problems


def rebuild(store: RecordReader) -> None:
    """Repair live/ from the records (`ledger doctor --fix`): a shard file
    that does not read is rewritten with the entries it still holds, then
    each live record it misses gets its marker back, in short lock holds,
    each record judged again under the lock (one that finished meanwhile
    needs none; one made live meanwhile got its marker from its writer).
    live/ is a superset that no scan shrinks on a lost record, so nothing
    is taken out of it here."""
    with io_errors(store._root), store._locked(create=False) as root_fd:
        if root_fd is None:
            return
        liveindex.salvage(store._root, root_fd)
    with io_errors(store._root):
        unlisted = derived.read_unlocked(store, lambda root_fd: _unlisted(store, root_fd))
    if unlisted is None:
        with io_errors(store._root), store._locked(create=False) as root_fd:
            if root_fd is not None:
                _mark(store, root_fd, _unlisted(store, root_fd, fresh=True))
        return
    for block in derived.in_blocks(unlisted, _REPAIR_KEYS, _between_blocks):
        with io_errors(store._root), store._locked(create=False) as root_fd:
            if root_fd is None:
                return
            _mark(store, root_fd, block)


def _unlisted(store: RecordReader, root_fd: int, fresh: bool = False) -> list[str]:
    """The digests of the pending and claimed records live/ does not name,
    sorted (in a `one_scan` block, the records doctor's walk read)."""
    found = store._scan_unswept(root_fd, fresh)
    named = liveindex.listed(store._root, root_fd)
    live = (d for d, rec in found.items() if rec.status in LIVE_STATUSES)
    return sorted(d for d in live if d not in named)


def _live(store: RecordReader, root_fd: int, digests: list[str]) -> list[tuple[str, str, str]]:
    """Under the lock: (digest, key, status) of those of `digests` whose
    record is pending or claimed now."""
    out = []
    for digest in digests:
        rec = store._read_digest(root_fd, digest)
        if rec is not None and rec.status in LIVE_STATUSES:
            out.append((digest, rec.key, rec.status))
    return out


def _still_unlisted(store: RecordReader, root_fd: int, digests: list[str]) -> list[tuple[str, str]]:
    """Under the lock: (key, status) of those of `digests` whose record is
    live and that live/ does not name now."""
    named = liveindex.listed(store._root, root_fd)
    return [(key, status) for d, key, status in _live(store, root_fd, digests) if d not in named]


def _mark(store: RecordReader, root_fd: int, digests: list[str]) -> None:
    """Under the lock: the markers of those of `digests` whose record is live now."""
    liveindex.add_markers(store._root, root_fd, [d for d, _, _ in _live(store, root_fd, digests)])
