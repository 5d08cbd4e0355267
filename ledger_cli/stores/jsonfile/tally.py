"""tally/: the counts `ledger stats` and `ledger watch` read instead of the records.

    tally/counts    `{"format":"ledger_cli.tally","version":1,"counts":{...},"sum":…}`:
                    the number of (unpruned) records of each status, and
                    "plain": the pending ones that name no needs (each of
                    them is ready, whatever else the store holds); "sum",
                    the SHA-256 of the counts in that order (absent in a
                    file an earlier release wrote)
    tally/ab        the digests (a line each, sorted) of the records of shard
                    ab that are *noted*: claimed, blocked, or pending with
                    needs — the unfinished records `stats` must judge one by
                    one (lease expiry, the Ready rule) and `watch` lists
                    beside the plain pending ones

Derived data, exact, kept as durably as the records: every write that
changes a count or a noted set goes through the journal (journal.py), whose
header carries the counts *after* the write, computed under the lock from
the records as they are on disk; applying it (or replaying it after a crash)
writes those counts and sets the membership of each written record that
changes it (a replay: of every written record) from the record itself, so a
replay repeats the same result. A block of a long walk whose records stay
noted reads and writes the counts alone, whatever the store's size. A prune
(pruning.py) removes tally/counts durably before it removes records and
writes it again after; a tally/counts found missing (a store older than the tally, a prune
or a rebuild cut short by a crash) means "rebuild from the records": the
next writer does, under the lock, and readers fall back to reading the
records meanwhile. `ledger doctor` compares the tally with the records and
`--fix` rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import derived, fsutil
from ledger_cli.stores.jsonfile.fsutil import damaged_index
from ledger_cli.stores.jsonfile.layout import DIGEST, SHARD, io_scope, listing, shown

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

TALLY_DIR = "tally"
COUNTS = "counts"
FORMAT = "ledger_cli.tally"
VERSION = 1
STATUSES = ("pending", "claimed", "completed", "failed", "blocked")
KINDS = (*STATUSES, "plain")
INDEX = derived.Index(TALLY_DIR, COUNTS)

Counts = dict[str, int]


def is_plain(rec: TaskState) -> bool:
    return rec.status == "pending" and not rec.needs


def is_noted(rec: TaskState) -> bool:
    """Claimed, blocked, or pending with needs: judged one by one by `stats`."""
    s = rec.status
    return s == "claimed" or s == "blocked" or (s == "pending" and bool(rec.needs))


def kinds_of(rec: TaskState | None) -> tuple[str, ...]:
    if rec is None:
        return ()
    return (rec.status, "plain") if is_plain(rec) else (rec.status,)


def changes(before: TaskState | None, after: TaskState | None) -> bool:
    """Whether replacing `before` by `after` changes a count or a noted set."""
    return kinds_of(before) != kinds_of(after) or (
        before is not None and after is not None and is_noted(before) != is_noted(after)
    )


def noted_moves(items: Iterable[tuple[str, TaskState | None, TaskState | None]]) -> set[str]:
    """The digests of (digest, before, after) whose noted membership changes: the
    only shard lines a write has to touch (`apply`'s `moved`)."""
    return {
        digest
        for digest, before, after in items
        if (before is not None and is_noted(before)) != (after is not None and is_noted(after))
    }


def noted_count(counts: Counts) -> int:
    """How many records the noted sets hold, as the counts say: every claimed
    and blocked record and every pending one with needs (all but the plain)."""
    return counts["claimed"] + counts["blocked"] + counts["pending"] - counts["plain"]


def zero() -> Counts:
    return dict.fromkeys(KINDS, 0)


def advance(counts: Counts, pairs: Iterable[tuple[TaskState | None, TaskState | None]]) -> Counts:
    """The counts after replacing each `before` record by its `after` (None: absent)."""
    out = dict(counts)
    for before, after in pairs:
        for kind in kinds_of(before):
            out[kind] -= 1
        for kind in kinds_of(after):
            out[kind] += 1
    return out


def count(records: Iterable[TaskState]) -> Counts:
    return advance(zero(), ((None, rec) for rec in records))


def open_dir(root: str, root_fd: int, *, create: bool, sync: bool = True) -> int | None:
    return fsutil.open_subdir(root_fd, TALLY_DIR, shown(root, TALLY_DIR), create=create, sync=sync)


def read_counts(root: str, root_fd: int) -> Counts | None:
    """The counts; None when the tally is not built (then nothing else of it is
    to be trusted). StoreError for a damaged counts file."""
    path = shown(root, TALLY_DIR, COUNTS)
    data = fsutil.read_in(open_dir(root, root_fd, create=False), COUNTS, path)
    return None if data is None else parse_counts(data, path)


def checked(obj: object) -> Counts | None:
    """A counts object as the counts file and the journal hold it; None if damaged."""
    if type(obj) is not dict or set(obj) != set(KINDS):
        return None
    if not all(type(n) is int and n >= 0 for n in obj.values()):
        return None
    return {kind: obj[kind] for kind in KINDS}


def _sum(counts: Counts) -> str:
    """The counts' checksum (the counts file's "sum"): a count edited or
    flipped into another number is damage, not a wrong figure."""
    text = json.dumps([counts[k] for k in KINDS], separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def parse_counts(data: bytes, path: str) -> Counts:
    try:
        doc = json.loads(data.decode("utf-8"))
        ok = type(doc) is dict and doc.get("format") == FORMAT and doc.get("version") == VERSION
        counts = checked(doc.get("counts")) if ok else None
        if counts is not None and "sum" in doc and doc["sum"] != _sum(counts):
            counts = None  # (a file an earlier release wrote has no sum)
    except (UnicodeDecodeError, ValueError):
        counts = None
    if counts is None:
        raise damaged_index(
            TALLY_DIR, path, "corrupt tally counts (ledger doctor --fix rebuilds them)"
        )
    return counts


def encode_counts(counts: Counts) -> bytes:
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "counts": {k: counts[k] for k in KINDS},
        "sum": _sum(counts),
    }
    return (json.dumps(doc, separators=(",", ":")) + "\n").encode("ascii")


def read_noted(root: str, root_fd: int) -> list[str]:
    """Every noted digest (the tally must be built)."""
    out: list[str] = []
    with listing(root, root_fd, TALLY_DIR) as tfd:
        if tfd is None:
            return out
        for name in sorted(os.listdir(tfd)):
            if SHARD.matches(name):
                out.extend(_read_shard(root, tfd, name))
    return out


_LINE = 65
"""A shard file's line as `_write_shard` writes it: a 64-digit digest and a newline."""
_HEX = b"0123456789abcdef"


def _as_written(data: bytes, shard: str) -> bool:
    """Whether `data` is lines of digests of `shard`, as `_write_shard` writes
    them (the pattern `(?:SS[0-9a-f]{62}\\n)*`), told in a few passes in C
    over the whole file instead of one check per line."""
    lines, rest = divmod(len(data), _LINE)
    if rest:
        return False
    first, second = shard.encode("ascii")
    return (
        data[64::_LINE] == b"\n" * lines
        and data.count(b"\n") == lines
        and data[0::_LINE] == bytes((first,)) * lines
        and data[1::_LINE] == bytes((second,)) * lines
        and not data.replace(b"\n", b"").strip(_HEX)
    )


def _read_shard(root: str, tfd: int, shard: str) -> list[str]:
    path = shown(root, TALLY_DIR, shard)
    data = fsutil.read_file(tfd, shard, path) or b""
    if _as_written(data, shard):  # the usual case
        return data.decode("ascii").split()
    digests = data.decode("ascii", "replace").split()
    for d in digests:
        if not DIGEST.matches(d) or d[:2] != shard:
            # The entry itself is not shown: damaged bytes never reach the terminal.
            raise damaged_index(
                TALLY_DIR, path, "corrupt tally entry (ledger doctor --fix rebuilds it)"
            )
    return digests


def _write_shard(
    root: str, root_fd: int, tfd: int, shard: str, digests: set[str], sync: bool
) -> None:
    path = shown(root, TALLY_DIR, shard)
    derived.put_digests(tfd, shard, digests, path, root_fd, sync=sync)


def apply(
    root: str,
    root_fd: int,
    counts: Counts,
    records: dict[str, tuple[TaskState, bytes]],
    *,
    sync: bool,
    moved: Collection[str] | None = None,
) -> None:
    """Write the counts after a write and set the noted membership of each of its
    records (durably with `sync`; else the caller's syncfs does). Idempotent.

    `moved`: the records whose membership the write changes (`noted_moves`,
    from the records on disk read under this lock hold); the shard files of
    the others are neither read nor written, so a block of a long walk whose
    records stay noted (pending with needs to blocked, and back) costs the
    counts file alone, not a read of every shard: the store's size. None
    (a journal replay: what was on disk before is gone) sets every record's."""
    tfd = open_dir(root, root_fd, create=True, sync=sync)
    assert tfd is not None
    try:
        by_shard: dict[str, dict[str, bool]] = {}
        for digest, (rec, _) in records.items():
            if moved is None or digest in moved:
                by_shard.setdefault(digest[:2], {})[digest] = is_noted(rec)
        for shard, wanted in by_shard.items():
            current = set(_read_shard(root, tfd, shard))
            new = {d for d in current if wanted.get(d, True)}
            new.update(d for d, noted in wanted.items() if noted)
            if new != current:
                _write_shard(root, root_fd, tfd, shard, new, sync)
        path = shown(root, TALLY_DIR, COUNTS)
        fsutil.replace_file(tfd, COUNTS, encode_counts(counts), path, sync=sync, tmp_dir_fd=root_fd)
        if sync:
            fsutil.fsync_fd(tfd, shown(root, TALLY_DIR))
    finally:
        os.close(tfd)


def invalidate(root: str, root_fd: int) -> None:
    """Remove tally/counts, durably: "rebuild from the records" (before a write
    that does not carry the counts, such as a prune)."""
    derived.drop(root, root_fd, INDEX)


def rebuild(root: str, root_fd: int, records: Iterable[tuple[str, TaskState]]) -> Counts:
    """Write the tally afresh from every unpruned record (digest, record),
    durably; the counts go last (their presence means "built")."""
    invalidate(root, root_fd)
    tfd = open_dir(root, root_fd, create=True)
    assert tfd is not None
    pairs = list(records)
    with io_scope(tfd, shown(root, TALLY_DIR), "cannot rebuild"):
        for name in os.listdir(tfd):
            if name != COUNTS:
                fsutil.unlink_quiet(tfd, name)
        by_shard: dict[str, set[str]] = {}
        for digest, rec in pairs:
            if is_noted(rec):
                by_shard.setdefault(digest[:2], set()).add(digest)
        for shard, digests in by_shard.items():
            _write_shard(root, root_fd, tfd, shard, digests, True)
        fsutil.fsync_fd(tfd, shown(root, TALLY_DIR))
        counts = count(rec for _, rec in pairs)
        derived.mark_built(root, root_fd, tfd, INDEX, encode_counts(counts))
    return counts


def check(root: str, root_fd: int, records: dict[str, TaskState]) -> list[str]:
    """Problems of the tally against the unpruned records by digest (`doctor`)."""
    counts = read_counts(root, root_fd)
    if counts is None:
        return []  # not built yet: the next writer builds it
    problems = []
    truth = count(records.values())
    for kind in KINDS:
        if counts[kind] != truth[kind]:
            problems.append(f"tally: {kind} count is {counts[kind]}, the records say {truth[kind]}")
    noted: set[str] = set()
    twice: set[str] = set()
    for digest in read_noted(root, root_fd):
        (twice if digest in noted else noted).add(digest)
    if twice:  # `stats` counts the lines, and refuses more than the counts imply
        first = min(twice)
        problems.append(
            f"tally: {shown(root, TALLY_DIR, first[:2])}: "
            f"{len(twice)} unfinished record(s) listed more than once"
        )
    want = {d for d, rec in records.items() if is_noted(rec)}
    if noted != want:
        problems.append(
            f"tally: {len(want - noted)} unfinished records missing, {len(noted - want)} stale"
        )
    return problems
