"""ready/: the index that makes `claim --next` an index lookup (docs/design.md §6.1).

A derived structure, a superset of the truth (an entry is added durably
before the record that needs it is written; a stale entry is harmless, it is
dropped when found):

    ready/manifest        the ordered candidate index: a header line, then one
                          line per chunk, `<id> <ns> <keyhex>`, the smallest
                          entry the chunk may hold (chunk i holds the entries
                          from its bound up to the next chunk's bound)
    ready/c<id>           a chunk: a first line, the number of entries (so an
                          emptied or cut chunk is told from one with no
                          entries), then sorted lines `<order> <key hex>` (at most
                          CHUNK_MAX), `<order>` being (1000 - priority) * RANK
                          plus the due time in ns, the later of CreatedAt and
                          not-before (`entry_of`, docs/design.md §8.2), one per
                          *candidate*: a pending or claimed record whose direct
                          needs are all completed

A record that waits on a need becomes a candidate when the need is written as
completed: the write reads the need's file in deps/ (depsindex.py, the
store's one reverse-needs index, complete: built first when it is not) and
adds the records it lists that are live and whose needs are now all met,
before the need's record goes to disk (apply.py). A `ready/needs/` directory
(the reverse-needs index of older releases) is ignored, and removed by a
rebuild.

The next ready record is the first candidate in the Ready order (priority,
then due, then key) that passes the full Ready rule: reading it costs one
manifest and one chunk, whatever the number of ready, waiting, finished or
pruned records. A chunk
split writes the new chunk, then the manifest, then the shrunk old chunk
(each durable), so every entry stays reachable at every crash point. A
missing manifest (a store older than the index, or a rebuild a crash cut
short) means "rebuild from the records": the next holder of the lock does.
"""

from __future__ import annotations

import bisect
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import damaged_index
from ledger_cli.stores.jsonfile.layout import LIVE_STATUSES, shown

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    Load = Callable[[str], "TaskState | None"]

DEFAULT_QUEUE = "default"
"""engine/queues.py's DEFAULT (not imported: this module is on the hot path)."""
READY_DIR = "ready"
LEGACY_NEEDS_DIR = "needs"
"""ready/needs/: the waiter files of older releases; no longer read or written."""
MANIFEST = "manifest"
MANIFEST_HEADER = "ledger_cli.ready 4"
"""Version 4: partitioned by queue (ready/q/, below). Version 3: each chunk
starts with its number of entries. Version 2: entries sort in the Ready order
of docs/design.md §8.2 (`entry_of`). An older manifest (version 1: CreatedAt only; 2:
chunks without a count; 3: every queue in one partition) means "rebuild", as
a missing one does."""
OLDER_HEADERS = ("ledger_cli.ready 1", "ledger_cli.ready 2", "ledger_cli.ready 3")
QUEUES_DIR = "q"
"""ready/q/<queue name's UTF-8 in hex>/: the partition of a queue other than
`default` (issue 32), a manifest and chunks of the same format as ready/'s own,
which holds `default`'s. `claim --next --queue X` walks X's partition only, and
a queue at its limit is not walked at all; a claim from every queue merges the
partitions' heads, each in the Ready order, so the order across queues is the
same as one index's. A partition is made (chunk, then manifest, each durable)
by the first write that adds one of its entries; one without a manifest (a
crash cut its making short) holds nothing yet. An entry whose key is no longer
in the partition's queue is stale, dropped when met (a rebase that changed the
queue added the entry to its new queue's partition first)."""
RANK = 10**22
"""The weight of the priority in an entry's sort number (above any due instant)."""
DUE_OFFSET = 10**21
"""Added to the due instant's unix ns: every instant Go can hold sorts positive."""
CHUNK_MAX = 512

Entry = tuple[int, str]
"""(sort number, the key's UTF-8 bytes in hex): sorts as the Ready order. The sort
number is `(1000 - priority) * RANK + DUE_OFFSET + due` with `due` the later of
CreatedAt and not-before in unix ns (docs/design.md §8.2): without schedules, CreatedAt
order, as before."""
Schedule = tuple[Instant, int]
"""A record by key, or None."""


def entry_of(rec: TaskState, value: Schedule | None = None) -> Entry | None:
    """The index entry of a record with its schedule (not-before, priority), None
    for a key no file can name (a lone surrogate)."""
    try:
        raw = rec.key.encode("utf-8")
    except UnicodeEncodeError:
        return None
    due = rec.created_at.unix_ns
    priority = 0
    if value is not None:
        priority = value[1]
        if value[0].unix_ns > due:
            due = value[0].unix_ns
    return ((1000 - priority) * RANK + DUE_OFFSET + due, raw.hex())


def due_ns(entry: Entry) -> int:
    return entry[0] % RANK - DUE_OFFSET


def next_level(entry: Entry) -> Entry:
    """The last entry sorting before every entry of the next priority level."""
    return ((entry[0] // RANK + 1) * RANK - 1, "")


def key_of(entry: Entry) -> str:
    return bytes.fromhex(entry[1]).decode("utf-8")


def is_candidate(rec: TaskState, load: Load) -> bool:
    """Pending or claimed, and every direct need completed (the index's rule)."""
    if rec.status not in LIVE_STATUSES:
        return False
    for need in rec.needs or ():
        dep = load(need)
        if dep is None or dep.status != "completed":
            return False
    return True


_HEX_BYTES = b"0123456789abcdef"


def _corrupt_chunk(path: str) -> Exception:
    return damaged_index(
        READY_DIR, path, "corrupt ready index chunk (ledger doctor --fix rebuilds the index)"
    )


class Chunks:
    """The manifest and its chunks, read and written under the store lock."""

    def __init__(
        self,
        root: str,
        root_fd: int,
        rfd: int,
        next_id: int,
        ids: list[int],
        bounds: list[Entry],
        sub: tuple[str, ...] = (),
    ) -> None:
        self._sub = sub
        """The partition's directory below ready/ (none: `default`'s, ready/ itself)."""
        self._root = root
        self._root_fd = root_fd
        self._rfd = rfd
        self.next_id = next_id
        self.ids = ids
        self.bounds = bounds

    def _path(self, *parts: str) -> str:
        return shown(self._root, READY_DIR, *self._sub, *parts)

    # -- reading ------------------------------------------------------------------

    def chunk(self, pos: int) -> list[Entry]:
        """The entries chunk `pos` holds within its range, sorted."""
        name = f"c{self.ids[pos]}"
        path = self._path(name)
        data = fsutil.read_file(self._rfd, name, path)
        # Every chunk the manifest lists is written before the manifest names it
        # (rebuild, split) and unlinked only after (remove): a missing or damaged
        # chunk is damage, reported rather than read as "nothing is ready".
        if data is None:
            raise damaged_index(
                READY_DIR,
                path,
                "missing ready index chunk (ledger doctor --fix rebuilds the index)",
            )
        # The first line counts the entries: an emptied chunk, or one cut at a
        # line's end, is damage too, never "no entries".
        count, newline, data = data.partition(b"\n")
        if (
            not newline
            or not count.isdigit()
            or len(count) > 9  # int() of any length is costly (and refused past 4,300 digits)
            or data.replace(b"\n", b"").replace(b" ", b"").strip(_HEX_BYTES)
            or (data and not data.endswith(b"\n"))
            or data.count(b"\n") != int(count)
        ):
            raise _corrupt_chunk(path)
        entries: list[Entry] = []
        append = entries.append
        # Per write this is the index's cost, CHUNK_MAX lines at most: kept lean.
        for line in data.decode("ascii").split("\n")[:-1]:
            ns, sep, hexkey = line.partition(" ")
            if not sep or not ns or not hexkey or " " in hexkey or len(hexkey) % 2:
                raise _corrupt_chunk(path)
            append((int(ns), hexkey))
        entries.sort()  # written sorted and unique (replaced whole): linear
        low = self.bounds[pos] if pos > 0 else None
        high = self.bounds[pos + 1] if pos + 1 < len(self.ids) else None
        if low is not None and entries and entries[0] < low:
            entries = [e for e in entries if e >= low]
        if high is not None and entries and entries[-1] >= high:
            entries = [e for e in entries if e < high]
        return entries

    def entries(self) -> Iterator[Entry]:
        for pos in range(len(self.ids)):
            yield from self.chunk(pos)

    def locate(self, entry: Entry) -> int:
        return max(0, bisect.bisect_right(self.bounds, entry, lo=1) - 1)

    # -- writing ------------------------------------------------------------------

    def _write_chunk(self, cid: int, entries: list[Entry], sync: bool) -> None:
        name = f"c{cid}"
        lines = [f"{len(entries)}\n", *(f"{ns} {hexkey}\n" for ns, hexkey in entries)]
        data = "".join(lines).encode("ascii")
        fsutil.replace_file(
            self._rfd, name, data, self._path(name), sync=sync, tmp_dir_fd=self._root_fd
        )

    def _write_manifest(self, sync: bool) -> None:
        lines = [f"{MANIFEST_HEADER} {self.next_id}\n"]
        lines += [
            f"{cid} {ns} {hexkey or '-'}\n"
            for cid, (ns, hexkey) in zip(self.ids, self.bounds, strict=True)
        ]
        fsutil.replace_file(
            self._rfd,
            MANIFEST,
            "".join(lines).encode("ascii"),
            self._path(MANIFEST),
            sync=sync,
            tmp_dir_fd=self._root_fd,
        )
        if sync:
            fsutil.fsync_fd(self._rfd, self._path())

    def add(self, entries: Iterable[Entry], *, sync: bool) -> None:
        """Insert entries (durably with `sync`; else the caller's syncfs does)."""
        by_pos: dict[int, set[Entry]] = {}
        for entry in entries:
            by_pos.setdefault(self.locate(entry), set()).add(entry)
        changed = False
        # Highest position first: a split inserts chunks after `pos` only.
        for pos in sorted(by_pos, reverse=True):
            current = self.chunk(pos)
            merged = sorted(set(current) | by_pos[pos])
            if len(merged) == len(current):
                continue
            changed = True
            if len(merged) <= CHUNK_MAX:
                self._write_chunk(self.ids[pos], merged, sync)
                continue
            # Split: new chunks first (durable), then the manifest, then the old one shrunk.
            half = CHUNK_MAX // 2
            pieces = [merged[i : i + half] for i in range(0, len(merged), half)]
            new_ids = list(range(self.next_id, self.next_id + len(pieces) - 1))
            for cid, piece in zip(new_ids, pieces[1:], strict=True):
                self._write_chunk(cid, piece, True)
            fsutil.fsync_fd(self._rfd, self._path())
            self.next_id += len(new_ids)
            self.ids[pos + 1 : pos + 1] = new_ids
            self.bounds[pos + 1 : pos + 1] = [piece[0] for piece in pieces[1:]]
            self._write_manifest(True)
            self._write_chunk(self.ids[pos], pieces[0], True)
        if changed and sync:
            fsutil.fsync_fd(self._rfd, self._path())

    def remove(self, entries: Iterable[Entry]) -> None:
        """Drop entries (not made durable: a stale entry is harmless)."""
        by_pos: dict[int, set[Entry]] = {}
        for entry in entries:
            by_pos.setdefault(self.locate(entry), set()).add(entry)
        emptied: list[int] = []
        for pos, drop in by_pos.items():
            current = self.chunk(pos)
            kept = [e for e in current if e not in drop]
            if len(kept) != len(current):
                self._write_chunk(self.ids[pos], kept, False)
            if not kept and len(self.ids) > 1:
                emptied.append(pos)
        if emptied:
            dropped = [self.ids[pos] for pos in emptied]
            for pos in sorted(emptied, reverse=True):
                if len(self.ids) > 1:
                    del self.ids[pos]
                    del self.bounds[pos]
            self._write_manifest(False)
            for cid in dropped:
                if cid not in self.ids:
                    fsutil.unlink_quiet(self._rfd, f"c{cid}")


def open_dir(root: str, root_fd: int, *, create: bool, sync: bool = True) -> int | None:
    return fsutil.open_subdir(root_fd, READY_DIR, shown(root, READY_DIR), create=create, sync=sync)


def load_chunks(root: str, root_fd: int, rfd: int) -> Partitioned | None:
    """The candidate index, or None when it has to be rebuilt (no manifest)."""
    default = _load_part(root, root_fd, rfd, ())
    return None if default is None else Partitioned(root, root_fd, rfd, default)


def _load_part(root: str, root_fd: int, rfd: int, sub: tuple[str, ...]) -> Chunks | None:
    """One partition's manifest (`sub`: its directory below ready/), None when
    it has none (or, for ready/'s own, an older release's)."""
    path = shown(root, READY_DIR, *sub, MANIFEST)
    data = fsutil.read_file(rfd, MANIFEST, path)
    if data is None:
        return None
    lines = data.decode("ascii", "replace").splitlines()
    head = lines[0].split() if lines else []
    if " ".join(head[:2]) in OLDER_HEADERS and not sub:
        return None  # an older release's order: rebuilt by the next holder of the lock
    if len(head) != 3 or " ".join(head[:2]) != MANIFEST_HEADER or not head[2].isdigit():
        raise damaged_index(
            READY_DIR, path, "corrupt ready index manifest header (ledger doctor --fix rebuilds it)"
        )
    ids: list[int] = []
    bounds: list[Entry] = []
    for line in lines[1:]:
        parts = line.split()
        try:
            cid, ns, hexkey = int(parts[0]), int(parts[1]), parts[2].strip("-")
            bytes.fromhex(hexkey)
        except (IndexError, ValueError):
            # The line itself is not shown: damaged bytes never reach the terminal.
            raise damaged_index(
                READY_DIR,
                path,
                f"corrupt ready index line {len(ids) + 2} (ledger doctor --fix rebuilds it)",
            ) from None
        ids.append(cid)
        bounds.append((ns, hexkey))
    if not ids:
        raise damaged_index(
            READY_DIR,
            path,
            "corrupt ready index manifest: no chunk (ledger doctor --fix rebuilds it)",
        )
    return Chunks(root, root_fd, rfd, int(head[2]), ids, bounds, sub)


def part_dir(queue: str) -> str:
    """The directory below ready/q/ of a queue's partition."""
    return queue.encode("utf-8", "surrogatepass").hex()


def _queue_named(name: str) -> str | None:
    """The queue a directory below ready/q/ is for; None for a name no
    partition has (a temporary file, say)."""
    if not name or len(name) % 2 or name.strip("0123456789abcdef"):
        return None
    try:
        return bytes.fromhex(name).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


class Partitioned:
    """The whole index: `default`'s partition in ready/ itself and each other
    queue's in ready/q/<hex>/ (QUEUES_DIR). A partition other than `default`'s
    is opened for one use at a time: no descriptor outlives a method."""

    def __init__(self, root: str, root_fd: int, rfd: int, default: Chunks) -> None:
        self._root, self._root_fd, self._rfd = root, root_fd, rfd
        self.default = default
        self._reader: Callable[[str], str] | None = None

    def queue_of(self, key: str) -> str:
        """`key`'s queue, as its queue file says (read once per key and use)."""
        if self._reader is None:
            from ledger_cli.stores.jsonfile.queueread import reader

            self._reader = reader(self._root)
        return self._reader(key)

    def names(self) -> list[str]:
        """The queues that have a partition besides `default`, sorted."""
        qfd = fsutil.open_subdir(
            self._rfd, QUEUES_DIR, shown(self._root, READY_DIR, QUEUES_DIR), create=False
        )
        if qfd is None:
            return []
        try:
            listed = os.listdir(qfd)
        finally:
            os.close(qfd)
        return sorted(q for q in map(_queue_named, listed) if q is not None and q != DEFAULT_QUEUE)

    @contextmanager
    def part(self, queue: str, *, create: bool = False) -> Iterator[Chunks | None]:
        """The partition of `queue` (None: it has none yet); with `create`, a
        missing one is made, durably, empty."""
        if queue == DEFAULT_QUEUE:
            yield self.default
            return
        sub = (QUEUES_DIR, part_dir(queue))
        qfd = fsutil.open_subdir(
            self._rfd, QUEUES_DIR, shown(self._root, READY_DIR, QUEUES_DIR), create=create
        )
        pfd = None
        try:
            if qfd is not None:
                pfd = fsutil.open_subdir(
                    qfd, sub[1], shown(self._root, READY_DIR, *sub), create=create
                )
            chunks = None if pfd is None else _load_part(self._root, self._root_fd, pfd, sub)
            if chunks is None and create:
                assert pfd is not None
                chunks = _write_part(self._root, self._root_fd, pfd, sub, [])
            yield chunks
        finally:
            fsutil.close_all([pfd, qfd])

    def _by_queue(self, entries: Iterable[Entry]) -> dict[str, list[Entry]]:
        out: dict[str, list[Entry]] = {}
        for entry in entries:
            out.setdefault(self.queue_of(key_of(entry)), []).append(entry)
        return out

    def add(self, entries: Iterable[Entry], *, sync: bool) -> None:
        """Insert entries, each in its key's queue's partition (`Chunks.add`)."""
        for queue, group in self._by_queue(entries).items():
            with self.part(queue, create=True) as chunks:
                assert chunks is not None
                chunks.add(group, sync=sync)

    def remove(self, entries: Iterable[Entry]) -> None:
        """Drop entries from their key's queue's partition (`Chunks.remove`)."""
        for queue, group in self._by_queue(entries).items():
            with self.part(queue) as chunks:
                if chunks is not None:
                    chunks.remove(group)

    def by_queue(self) -> dict[str, set[Entry]]:
        """Every partition's entries (`ledger doctor`)."""
        out: dict[str, set[Entry]] = {DEFAULT_QUEUE: set(self.default.entries())}
        for queue in self.names():
            with self.part(queue) as chunks:
                if chunks is not None:
                    out[queue] = set(chunks.entries())
        return out

    def holds(self, queue: str, entries: Iterable[Entry]) -> set[Entry]:
        """Those of `entries` that `queue`'s partition holds."""
        wanted = set(entries)
        with self.part(queue) as chunks:
            if chunks is None:
                return set()
            got: set[Entry] = set()
            for pos in {chunks.locate(e) for e in wanted}:
                got |= wanted.intersection(chunks.chunk(pos))
            return got

    def entries(self) -> Iterator[Entry]:
        """Every entry in the Ready order, across the partitions."""
        import heapq

        rest: list[list[Entry]] = []
        for queue in self.names():
            with self.part(queue) as chunks:
                if chunks is not None:
                    rest.append(list(chunks.entries()))
        if not rest:
            yield from self.default.entries()
            return
        yield from heapq.merge(self.default.entries(), *rest)


def head(
    chunks: Chunks, after: Entry | None, now_ns: int | None, limit: int
) -> tuple[list[Entry], Entry | None]:
    """Up to `limit` entries of one partition past `after` (from one chunk),
    cut before the first not due at `now_ns`, and the last entry looked at
    (None: the partition ends there). An entry not due yet means none of the
    rest of its priority level is (docs/design.md §8.1): the last is then that level's
    end."""
    pos = 0 if after is None else chunks.locate(after)
    while pos < len(chunks.ids):
        entries = [e for e in chunks.chunk(pos) if after is None or e > after]
        if entries:
            break
        pos += 1
    else:
        return [], None
    entries = entries[:limit]
    if now_ns is not None:
        for i, entry in enumerate(entries):
            if due_ns(entry) > now_ns:
                return entries[:i], next_level(entry)
    return entries, entries[-1]


def merged_page(
    parts: dict[str, Chunks], after: Entry | None, now_ns: int | None, limit: int
) -> tuple[list[tuple[str, Entry]], Entry | None]:
    """The next entries past `after` across `parts` (queue -> partition), in the
    Ready order with their queue, and the entry up to which every partition
    was looked at (None: they all end there). Each partition gives its head;
    the page stops at the lowest of their last entries, so nothing a partition
    did not show is skipped: the order is that of one index over them all."""
    heads = {queue: head(chunks, after, now_ns, limit) for queue, chunks in parts.items()}
    lasts = [last for _, last in heads.values() if last is not None]
    bound = min(lasts) if lasts else None
    page = sorted(
        (entry, queue)
        for queue, (entries, _) in heads.items()
        for entry in entries
        if bound is None or entry <= bound
    )
    return [(queue, entry) for entry, queue in page], bound


def _write_part(
    root: str, root_fd: int, pfd: int, sub: tuple[str, ...], entries: list[Entry]
) -> Chunks:
    """Write one partition afresh (its sorted `entries`), durably, its manifest last."""
    path = shown(root, READY_DIR, *sub)
    fsutil.unlink_quiet(pfd, MANIFEST)
    fsutil.fsync_fd(pfd, path)
    for name in os.listdir(pfd):
        if name != MANIFEST and name != QUEUES_DIR:
            fsutil.unlink_quiet(pfd, name)
    half = CHUNK_MAX // 2
    pieces = [entries[i : i + half] for i in range(0, len(entries), half)] or [[]]
    chunks = Chunks(root, root_fd, pfd, 0, [], [], sub)
    for cid, piece in enumerate(pieces):
        chunks._write_chunk(cid, piece, True)
        chunks.ids.append(cid)
        chunks.bounds.append(piece[0] if piece else (0, ""))
    chunks.next_id = len(pieces)
    fsutil.fsync_fd(pfd, path)
    chunks._write_manifest(True)
    return chunks


# -- rebuilding ------------------------------------------------------------------------------


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
        fsutil.unlink_quiet(rfd, MANIFEST)
        fsutil.fsync_fd(rfd, shown(root, READY_DIR))
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
                _write_part(root, root_fd, pfd, sub, sorted(by_queue[queue]))
            finally:
                fsutil.close_all([pfd, qfd])
        _write_part(root, root_fd, rfd, (), sorted(by_queue[DEFAULT_QUEUE]))
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


def drop_legacy(rfd: int) -> None:
    """Remove ready/needs/, the waiter files of older releases, if there."""
    # Never read: what cannot be removed (a symlink, say) is harmless.
    import shutil  # rebuilds only: it imports zlib, bz2 and lzma

    shutil.rmtree(LEGACY_NEEDS_DIR, ignore_errors=True, dir_fd=rfd)
