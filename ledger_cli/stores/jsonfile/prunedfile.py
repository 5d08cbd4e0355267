"""pruned/: the records `ledger prune` pruned (docs/design.md §6.4), many keys per file.

A pruned record keeps only Key, Status, Sequence, Owner, Fence, Rev,
CreatedBy/At and UpdatedBy/At, so it is one compact JSON array a line,

    ["<key>","<status>",<sequence>,"<owner>",<fence>,<rev>,"<created by>",
     "<created at>","<updated by>","<updated at>"]

in `pruned/<ab>.jsonl` (ab: the shard of the key's digest, as for records),
and its record file is removed: a pruned key costs a line (about 120 bytes
plus the key), not a 4 KiB file block. Lines are appended (durably) before
the record files go, so a crash in between leaves the record in both places,
and the record file wins; the last line of a key wins over earlier ones. A
torn last line (a crash in an append) is ignored and cut by the next append.
A restore appends the lines of the pruned records it restores, with no
record file ever (pruning.py `restore_pruned`).
`pruned/count` holds the number of pruned keys (for `stats`) and what each
shard file holds (prunedcount.py): removed before a prune appends, written
after its record files went, and counted from the files while it is
missing. A shard that disagrees with it is damage on every read that checks
it, so a lost shard never reads as "no pruned key here" (an admit of a
pruned key would then run it again).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from typing import TYPE_CHECKING, TypeVar

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import PRUNED_COUNT as COUNT_NAME
from ledger_cli.stores.jsonfile.layout import PRUNED_DIR, shown

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from ledger_cli.stores.jsonfile.prunedcount import Count, Held, Shard

# prunedcount.py is imported by the functions that read a pruned/ directory,
# only where a store has one: a hot command on a store that never pruned
# does not load it (docs/design.md §5.1).
T = TypeVar("T")
_TRIES = 5  # reads of a shard that disagree with a count rewritten meanwhile
_APPEND = os.O_RDWR | os.O_CREAT | fsutil.O_NOFOLLOW | fsutil.O_NONBLOCK | fsutil.O_CLOEXEC


def encode(rec: TaskState) -> bytes:
    fields = [
        rec.key,
        rec.status,
        rec.sequence,
        rec.owner,
        rec.fence,
        rec.rev,
        rec.created_by,
        str(rec.created_at),
        rec.updated_by,
        str(rec.updated_at),
    ]
    return (json.dumps(fields, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def decode(line: bytes, path: str) -> TaskState:
    try:
        key, status, seq, owner, fence, rev, cby, cat, uby, uat = json.loads(line.decode("utf-8"))
        rec = TaskState(
            key=str(key),
            status=str(status),
            sequence=int(seq),
            owner=str(owner),
            fence=int(fence),
            rev=int(rev),
            created_by=str(cby),
            created_at=Instant.parse(str(cat)),
            updated_by=str(uby),
            updated_at=Instant.parse(str(uat)),
        )
        rec.validate()
    except Exception:  # any damage: refuse, naming the file
        # The line itself is not shown: damaged bytes never reach the terminal.
        raise fail(path, "corrupt pruned record line") from None
    return rec


def _dir(root: str, root_fd: int, create: bool) -> int | None:
    return fsutil.open_subdir(root_fd, PRUNED_DIR, shown(root, PRUNED_DIR), create=create)


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    lines.pop()  # b"" after a final newline; else a line torn by a crash: ignored
    return lines


def find(
    root: str, root_fd: int, key: str, digest: str, held: Callable[[], Held] | None = None
) -> TaskState | None:
    """The pruned record of `key` (the last line naming it), or None. A holder
    of the store lock passes `held`, where what it read of pruned/ is kept."""
    shard = digest[:2]
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return None
    from ledger_cli.stores.jsonfile import prunedcount

    path = shown(root, PRUNED_DIR, shard + ".jsonl")

    def read() -> bytes | None:
        return fsutil.read_file(pfd, shard + ".jsonl", path)

    try:
        if held is not None:
            data: bytes | None = held().shard(root, pfd, shard, path, read)
        else:
            check = prunedcount.check
            data, _ = _agreeing(root, pfd, read, lambda got, sh: check(path, shard, got, sh))
    finally:
        os.close(pfd)
    if not data:
        return None
    head = b"[" + json.dumps(key, ensure_ascii=False).encode("utf-8") + b","
    at = data.rfind(head)
    while at >= 0:
        if at == 0 or data[at - 1 : at] == b"\n":
            end = data.find(b"\n", at)
            if end < 0:
                return None  # a torn last line
            rec = decode(data[at:end], path)
            if rec.key == key:
                return rec
        at = data.rfind(head, 0, at)
    return None


def _agreeing(
    root: str, pfd: int, read: Callable[[], T], check: Callable[[T, dict[str, Shard]], None]
) -> tuple[T, Count]:
    """`read()`, checked against pruned/count's shards (when it lists them),
    and the count it was checked against.
    A prune or restore rewrites the count around its lines, so a reader
    without the store lock may see a count and lines of two moments: a
    disagreement is damage only when the count reads the same again."""
    from ledger_cli.stores.jsonfile import prunedcount

    tries = 0
    while True:
        before = prunedcount.read(root, pfd)
        got = read()
        if before.shards is None:
            return got, before
        try:
            check(got, before.shards)
        except StoreDamageError:
            tries += 1
            if tries >= _TRIES or prunedcount.read(root, pfd) == before:
                raise
            continue
        return got, before


def read_all(root: str, root_fd: int) -> Iterator[TaskState]:
    """Every pruned record (a key's last line), in no particular order; every
    shard file checked against pruned/count. Under the store lock (or in a
    first pass that takes an error to the locked one: derived.read_unlocked)."""
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return
    from ledger_cli.stores.jsonfile import prunedcount

    try:
        shards = prunedcount.read(root, pfd).shards
        names = prunedcount.names(pfd)
        for shard in sorted({*names, *(shards or ())}):
            name = shard + ".jsonl"
            path = shown(root, PRUNED_DIR, name)
            data = fsutil.read_file(pfd, name, path)
            if shards is not None:
                prunedcount.check(path, shard, data, shards)
            found: dict[str, TaskState] = {}
            for line in _lines(data or b""):
                rec = decode(line, path)
                found[rec.key] = rec
            yield from found.values()
    finally:
        os.close(pfd)


def append(
    root: str,
    root_fd: int,
    records: Iterable[tuple[str, TaskState]],
    shards: dict[str, Shard] | None,
) -> dict[str, Shard]:
    """Append the pruned records (digest, record) to their shard files,
    durably. What every shard holds afterwards: `shards` (pruned/count's,
    checked by `before_append`) advanced by the lines appended, or, when
    unknown, read from the shard files."""
    from ledger_cli.stores.jsonfile import prunedcount

    by_shard: dict[str, list[bytes]] = {}
    for digest, rec in records:
        by_shard.setdefault(digest[:2], []).append(encode(rec))
    after = dict(shards) if shards is not None else None
    pfd = _dir(root, root_fd, True)
    assert pfd is not None
    try:
        for shard, lines in by_shard.items():
            name = shard + ".jsonl"
            path = shown(root, PRUNED_DIR, name)
            fd = fsutil.open_regular(pfd, name, _APPEND, path)
            assert fd is not None  # O_CREAT
            kept: bytes | None = None
            blob = b"".join(lines)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":  # cut a torn last line
                    data = os.pread(fd, size, 0)
                    size = data.rfind(b"\n") + 1
                    os.ftruncate(fd, size)
                    kept = data[:size]
                os.lseek(fd, size, os.SEEK_SET)
                fsutil.write_all(fd, blob)
            except OSError as exc:
                raise fail(path, "cannot append", exc) from None
            finally:
                os.close(fd)
            if after is not None:
                was = prunedcount.of_data(kept) if kept is not None else after.get(shard)
                after[shard] = prunedcount.then(was or prunedcount.EMPTY, blob)
        if fsutil.sync_filesystem_available():
            fsutil.sync_filesystem(root_fd, root)
        else:
            _sync_each(root, pfd, by_shard)
        return after if after is not None else prunedcount.held(root, pfd)
    finally:
        os.close(pfd)


def before_append(
    root: str, root_fd: int, digests: Iterable[str]
) -> tuple[int, dict[str, Shard] | None]:
    """Under the store lock, before a prune or restore appends to the shards
    of `digests`: the number of pruned keys and what pruned/count says of the
    shards. Each shard's size is checked first (StoreDamageError naming it,
    nothing written), and a shard to append to that ends in a torn line is
    read whole and checked: the append cuts that line, and must not cut
    damage away."""
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return 0, None
    from ledger_cli.stores.jsonfile import prunedcount

    try:
        stored = _sized(root, pfd)
        for shard in sorted({digest[:2] for digest in digests} & set(stored.shards or ())):
            name = shard + ".jsonl"
            path = shown(root, PRUNED_DIR, name)
            data = fsutil.read_file(pfd, name, path) if prunedcount.torn(pfd, name) else None
            if data is not None:
                prunedcount.check(path, shard, data, stored.shards or {})
    finally:
        os.close(pfd)
    keys = stored.keys if stored.keys is not None else recount(root, root_fd)
    return keys, stored.shards


def _sync_each(root: str, pfd: int, shards: Iterable[str]) -> None:
    for shard in shards:
        name = shard + ".jsonl"
        fd = os.open(name, os.O_RDONLY | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC, dir_fd=pfd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsutil.fsync_fd(pfd, shown(root, PRUNED_DIR))


def _sized(root: str, pfd: int) -> Count:
    """pruned/count, each shard file's size checked against it (an fstat a
    shard, nothing read)."""
    from ledger_cli.stores.jsonfile import prunedcount

    def sizes() -> dict[str, int]:
        found: dict[str, int] = {}
        for shard in prunedcount.names(pfd):
            with contextlib.suppress(FileNotFoundError):
                found[shard] = os.stat(shard + ".jsonl", dir_fd=pfd, follow_symlinks=False).st_size
        return found

    def check(got: dict[str, int], shards: dict[str, Shard]) -> None:
        for shard in sorted({*got, *shards}):
            name = shard + ".jsonl"
            path = shown(root, PRUNED_DIR, name)
            read = functools.partial(fsutil.read_file, pfd, name, path)
            prunedcount.check_size(path, shard, got.get(shard), shards, read)

    return _agreeing(root, pfd, sizes, check)[1]


def count(root: str, root_fd: int) -> int:
    """The number of pruned keys: `pruned/count` (each shard's size checked
    against it), or counted from the files when it is missing (a prune cut
    short between its lines and its count) or damaged."""
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return 0
    try:
        stored = _sized(root, pfd).keys
    finally:
        os.close(pfd)
    return stored if stored is not None else recount(root, root_fd)


def recount(root: str, root_fd: int) -> int:
    """The pruned keys counted from pruned/: those whose record file is gone
    (a key with both is not pruned yet: its record file wins)."""
    from ledger_cli.stores.jsonfile.records import key_digest, record_path

    n = 0
    for rec in read_all(root, root_fd):
        digest = key_digest(rec.key)
        if digest is not None and not os.path.exists(record_path(root, digest)):
            n += 1
    return n


def check_count(root: str, root_fd: int) -> list[str]:
    """`pruned/count` against the pruned keys (`ledger doctor`). A shard that
    disagrees with it is lost primary data: StoreDamageError naming it (from
    read_all), never a count to rewrite. A missing count is no problem (it is
    counted from the files)."""
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return []
    from ledger_cli.stores.jsonfile import prunedcount

    try:
        stored = prunedcount.read(root, pfd)
    finally:
        os.close(pfd)
    truth = recount(root, root_fd)
    if not stored.present or stored.keys == truth:
        return []
    return [
        f"tally: {shown(root, PRUNED_DIR, COUNT_NAME)} does not count the {truth} pruned keys "
        "(ledger doctor --fix rewrites it)"
    ]


def rewrite_count(root: str, root_fd: int) -> None:
    """`pruned/count` written from the shard files (`ledger doctor --fix`, when
    `check_count` found only the count wrong, or the count is damaged:
    prunedcount.CountDamageError). Removed first, so that it is not checked
    against; a crash leaves it missing: counted from the files."""
    forget_count(root, root_fd)
    total = recount(root, root_fd)
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return
    from ledger_cli.stores.jsonfile import prunedcount

    try:
        shards = prunedcount.held(root, pfd)
    finally:
        os.close(pfd)
    write_count(root, root_fd, total, shards)


def forget_count(root: str, root_fd: int) -> None:
    """Remove `pruned/count`, durably, before a prune appends its lines: a
    crash before `write_count` leaves it to be counted from the files."""
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return
    try:
        if fsutil.unlink_quiet(pfd, COUNT_NAME):
            fsutil.fsync_fd(pfd, shown(root, PRUNED_DIR))
    finally:
        os.close(pfd)


def write_count(root: str, root_fd: int, total: int, shards: dict[str, Shard]) -> None:
    from ledger_cli.stores.jsonfile import prunedcount

    pfd = _dir(root, root_fd, True)
    assert pfd is not None
    try:
        path = shown(root, PRUNED_DIR, COUNT_NAME)
        data = prunedcount.encode(total, shards)
        fsutil.replace_file(pfd, COUNT_NAME, data, path, sync=True, tmp_dir_fd=root_fd)
    finally:
        os.close(pfd)
