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
`pruned/count` holds the number of pruned keys (for `stats`): removed before
a prune appends, written after its record files went, and counted from the
files while it is missing.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import SHARD, shown

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

PRUNED_DIR = "pruned"
COUNT_NAME = "count"
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


def find(root: str, root_fd: int, key: str, digest: str) -> TaskState | None:
    """The pruned record of `key` (the last line naming it), or None."""
    name = digest[:2] + ".jsonl"
    path = shown(root, PRUNED_DIR, name)
    data = fsutil.read_in(_dir(root, root_fd, False), name, path)
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


def read_all(root: str, root_fd: int) -> Iterator[TaskState]:
    """Every pruned record (a key's last line), in no particular order."""
    pfd = _dir(root, root_fd, False)
    if pfd is None:
        return
    try:
        for name in sorted(os.listdir(pfd)):
            if not (name.endswith(".jsonl") and SHARD.matches(name[:-6])):
                continue
            path = shown(root, PRUNED_DIR, name)
            data = fsutil.read_file(pfd, name, path) or b""
            found: dict[str, TaskState] = {}
            for line in _lines(data):
                rec = decode(line, path)
                found[rec.key] = rec
            yield from found.values()
    finally:
        os.close(pfd)


def append(root: str, root_fd: int, records: Iterable[tuple[str, TaskState]]) -> None:
    """Append the pruned records (digest, record) to their shard files, durably."""
    by_shard: dict[str, list[bytes]] = {}
    for digest, rec in records:
        by_shard.setdefault(digest[:2], []).append(encode(rec))
    pfd = _dir(root, root_fd, True)
    assert pfd is not None
    try:
        for shard, lines in by_shard.items():
            name = shard + ".jsonl"
            path = shown(root, PRUNED_DIR, name)
            fd = fsutil.open_regular(pfd, name, _APPEND, path)
            assert fd is not None  # O_CREAT
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":  # cut a torn last line
                    data = os.pread(fd, size, 0)
                    size = data.rfind(b"\n") + 1
                    os.ftruncate(fd, size)
                os.lseek(fd, size, os.SEEK_SET)
                fsutil.write_all(fd, b"".join(lines))
            except OSError as exc:
                raise fail(path, "cannot append", exc) from None
            finally:
                os.close(fd)
        if fsutil.sync_filesystem_available():
            fsutil.sync_filesystem(root_fd, root)
        else:
            _sync_each(root, pfd, by_shard)
    finally:
        os.close(pfd)


def _sync_each(root: str, pfd: int, shards: Iterable[str]) -> None:
    for shard in shards:
        name = shard + ".jsonl"
        fd = os.open(name, os.O_RDONLY | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC, dir_fd=pfd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsutil.fsync_fd(pfd, shown(root, PRUNED_DIR))


def _stored_count(root: str, root_fd: int) -> tuple[bool, int | None]:
    """Whether `pruned/count` is there, and the number it holds (None when it
    holds none)."""
    data = fsutil.read_in(
        _dir(root, root_fd, False), COUNT_NAME, shown(root, PRUNED_DIR, COUNT_NAME)
    )
    if data is None:
        return False, None
    return True, int(data) if data.endswith(b"\n") and data[:-1].isdigit() else None


def count(root: str, root_fd: int) -> int:
    """The number of pruned keys: `pruned/count`, or counted from the files
    when it is missing (a prune cut short between its lines and its count)
    or damaged."""
    stored = _stored_count(root, root_fd)[1]
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
    """`pruned/count` against the pruned keys (`ledger doctor`); a missing
    count is no problem (it is counted from the files)."""
    present, stored = _stored_count(root, root_fd)
    if not present:
        return []
    truth = recount(root, root_fd)
    if stored == truth:
        return []
    return [
        f"tally: {shown(root, PRUNED_DIR, COUNT_NAME)} does not count the {truth} pruned keys "
        "(ledger doctor --fix rewrites it)"
    ]


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


def write_count(root: str, root_fd: int, total: int) -> None:
    pfd = _dir(root, root_fd, True)
    assert pfd is not None
    try:
        path = shown(root, PRUNED_DIR, COUNT_NAME)
        data = f"{total}\n".encode("ascii")
        fsutil.replace_file(pfd, COUNT_NAME, data, path, sync=True, tmp_dir_fd=root_fd)
    finally:
        os.close(pfd)
