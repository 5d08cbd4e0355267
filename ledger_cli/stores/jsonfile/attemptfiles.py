"""The attempt files of the JSON store (docs/design.md §7.1): their format, their
directories, and the writes a batch's journal carries (attempts.py has the
AttemptLog over them).

    attempts/<first two hex digits>/<key digest>/<n>.att
    attempts/<first two hex digits>/<key digest>/<n>.pid

`<n>.att`: a first line that is a JSON object (the docs/design.md §7.1
fields, the key and a format tag, the `"size"` of the output after it; no
newline inside) with a `"sum"` member last, the SHA-256 of the line without
it (as a record file's, records.py: a flipped byte that still parses, an
exit status of 4 read as 0, is damage, not a changed outcome), then the
kept output, raw bytes as the command wrote them;
replaced whole, never torn. A header written before the sum was added (it
ends with its `"kept_bytes"` member) is read without one.

`<n>.pid`: the command's pid, written (not fsynced) once the command
outlives the runner's first poll when the start itself went with the
claim's commit, before the pid was known (a shorter command's end carries
its pid). A reader takes it only while the header has no pid and no end. After
a power cut it may be missing or empty: it is then ignored (the command died
with the machine); any later save of the attempt carries the pid itself.

A batch's attempt writes (`Op`: a start, a save, a removal beyond the newest
16) go in its journal beside the records and are applied with them
(`apply_ops`), so one commit makes both durable.
"""

from __future__ import annotations

import json
import os
import re
from hashlib import sha256
from typing import TYPE_CHECKING

from ledger_cli.engine.attempts import KEEP_ATTEMPTS, Attempt
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import fsutil, layout
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Iterable

ATTEMPTS_DIR = "attempts"
FORMAT = "ledger_cli.attempt"
SUFFIX = ".att"
PID_SUFFIX = ".pid"

Op = tuple[str, int, "bytes | None"]
"""A batch's attempt write: (key digest, n, the whole file; None: remove it)."""


_SUM_HEAD = b',"sum":"'
_SUM_LEN = len(_SUM_HEAD) + 64 + 2  # the hex digits, then `"}`
_UNSUMMED = re.compile(rb',"kept_bytes":\d+\}\Z')
"""How every header written before the sum ends (to_obj's last member)."""


def encode(att: Attempt, output: bytes) -> bytes:
    head = {"format": FORMAT, "key": att.key, **att.to_obj(), "size": len(output)}
    body = json.dumps(head, ensure_ascii=True, separators=(",", ":")).encode()
    summed = b"".join((body[:-1], _SUM_HEAD, sha256(body).hexdigest().encode(), b'"}'))
    return summed + b"\n" + output


def attempt_number(name: str) -> int | None:
    """n of an attempt file name (`12.att`), else None."""
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    return int(stem) if stem.isdigit() and stem[0] != "0" else None


def shown(root: str, *parts: str) -> str:
    return layout.shown(root, ATTEMPTS_DIR, *parts)


def key_dir(
    root: str,
    digest: str,
    *,
    create: bool,
    root_fd: int | None = None,
    sync: bool = True,
    kept: dict[str, int] | None = None,
) -> int | None:
    """The key's attempt directory (fd), None when missing and not `create`
    (with `sync`, each directory made is durable before this returns).
    `kept`: `attempts/` and shard fds open already, by name, where those
    opened now are kept too (the caller closes them), else closed."""
    opened = root_fd is None
    if root_fd is None:
        root_fd = fsutil.open_root(root)
        if root_fd is None:
            return None
    dirs: dict[str, int] = {} if kept is None else kept
    try:
        parent = root_fd
        for name, path in ((ATTEMPTS_DIR, shown(root)), (digest[:2], shown(root, digest[:2]))):
            key = name if parent == root_fd else f"{ATTEMPTS_DIR}/{name}"
            fd = dirs.get(key)
            if fd is None:
                fd = fsutil.open_subdir(parent, name, path, create=create, sync=sync)
                if fd is None:
                    return None
                dirs[key] = fd
            parent = fd
        return fsutil.open_subdir(
            parent, digest, shown(root, digest[:2], digest), create=create, sync=sync
        )
    finally:
        if kept is None:
            fsutil.close_all(dirs.values())
        if opened:
            os.close(root_fd)


def names(dir_fd: int, where: str, *, every: bool = False) -> list[int]:
    """The attempt numbers in a key's directory: the newest 16 (a crash
    between a start's rename and its removal of the oldest can leave one
    more, which readers skip and the next start removes), or `every` one."""
    try:
        listed = os.listdir(dir_fd)
    except OSError as exc:
        raise fail(where, "cannot list", exc) from None
    found = sorted(n for n in map(attempt_number, listed) if n is not None)
    if every or not found:
        return found
    return newest(found)


def newest(found: list[int]) -> list[int]:
    """Of sorted attempt numbers, the ones readers show (the newest 16)."""
    return [n for n in found if n > found[-1] - KEEP_ATTEMPTS] if found else found


def open_attempt(dir_fd: int, name: str, where: str) -> tuple[int, dict[str, object]] | None:
    """(fd positioned after the header, header), or None when missing."""
    path = f"{where}/{name}"
    fd = fsutil.open_regular(dir_fd, name, fsutil.READ_FLAGS, path)
    if fd is None:
        return None
    try:
        head = b""
        while b"\n" not in head:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise fail(path, "is not an attempt file (no header line)")
            head += chunk
        line = head.partition(b"\n")[0]
        obj = parse_head(line, path)
        _check_whole(obj, where, path, os.fstat(fd).st_size - len(line) - 1)
        os.lseek(fd, len(line) + 1, os.SEEK_SET)
        return fd, obj
    except BaseException:
        os.close(fd)
        raise


def parse_head(line: bytes, path: str) -> dict[str, object]:
    """The header line's object, its sum verified (none: an older file, read
    as before); StoreError naming `path` on damage."""
    tail = len(line) - _SUM_LEN
    summed: bool | None = None  # None: no sum member where it is written
    if tail > 0 and line[tail : tail + len(_SUM_HEAD)] == _SUM_HEAD and line.endswith(b'"}'):
        body = line[:tail] + b"}"
        summed = sha256(body).hexdigest().encode() == line[tail + len(_SUM_HEAD) : -2]
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise fail(path, f"is not an attempt file ({exc})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise fail(path, "is not an attempt file (unknown format)")
    if summed is False:
        raise fail(path, "corrupt attempt: checksum mismatch (the file was damaged or edited)")
    if summed is None and ("sum" in obj or not _UNSUMMED.search(line)):
        raise fail(
            path, "corrupt attempt: no checksum where the store writes it (damaged or edited)"
        )
    obj.pop("sum", None)
    return obj


def _check_whole(obj: dict[str, object], where: str, path: str, output: int) -> None:
    """An attempt file in its key's directory (`where` ends with the key's
    digest: a file moved or copied from another key's is damage, not that
    key's run), holding the output its header's `size` counts: every write
    replaces the file whole, a running attempt's too, so any other length
    (bytes appended after the output, or cut from it) is damage. A header
    written before `size` was added has none to check."""
    key = obj.get("key")
    if isinstance(key, str) and key_digest(key) != where.rpartition("/")[2]:
        raise fail(path, f"holds key {key!r}, which belongs elsewhere")
    size = obj.pop("size", None)
    if size is not None and size != output:
        raise fail(
            path,
            f"corrupt attempt: {output:,} bytes of output where its header counts {size} "
            "(the file was damaged or edited)",
        )


def decode(dir_fd: int, n: int, obj: dict[str, object], where: str) -> Attempt:
    """The attempt of a header, with the pid of `<n>.pid` while it has none
    (pid 0: a start written with the claim, before the command ran)."""
    try:
        att = Attempt.from_obj(str(obj["key"]), obj)
    except (KeyError, TypeError, ValueError) as exc:
        raise fail(f"{where}/{n}{SUFFIX}", f"is not an attempt file ({exc})") from None
    if not att.pid and att.ended is None:
        att.pid = read_pid(dir_fd, n) or 0
    return att


def read_rest(fd: int, path: str) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError as exc:
        raise fail(path, "cannot read", exc) from None
    return b"".join(chunks)


def read_output(dir_fd: int, name: str, where: str, start: int) -> bytes | None:
    opened = open_attempt(dir_fd, name, where)
    if opened is None:
        return None
    fd = opened[0]
    try:
        if start:
            os.lseek(fd, start, os.SEEK_CUR)
        return read_rest(fd, f"{where}/{name}")
    finally:
        os.close(fd)


def header(dir_fd: int, n: int, where: str) -> Attempt | None:
    opened = open_attempt(dir_fd, f"{n}{SUFFIX}", where)
    if opened is None:
        return None
    fd, obj = opened
    os.close(fd)
    return decode(dir_fd, n, obj, where)


def exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def read_pid(dir_fd: int, n: int) -> int | None:
    """The pid noted in `<n>.pid`; None when missing or not whole (a power cut)."""
    try:
        fd = os.open(f"{n}{PID_SUFFIX}", fsutil.READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        data = os.read(fd, 32)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = data.strip()
    return int(text) if text.isdigit() and len(text) < 12 else None


def write_pid(dir_fd: int, n: int, pid: int, where: str) -> None:
    """Note the running command's pid beside attempt n: renamed into place
    (whole for every reader), not fsynced (see the module's note)."""
    data = b"%d\n" % pid
    fsutil.replace_file(
        dir_fd, f"{n}{PID_SUFFIX}", data, where, sync=False, what="cannot note the pid"
    )


def remove(dir_fd: int, n: int) -> None:
    """Remove attempt n (and its pid note); missing is fine."""
    fsutil.unlink_quiet(dir_fd, f"{n}{SUFFIX}")
    fsutil.unlink_quiet(dir_fd, f"{n}{PID_SUFFIX}")


def _progress(att: dict[str, object]) -> tuple[bool, int]:
    out = att.get("output_bytes")
    return att.get("ended") is not None, out if type(out) is int else 0


def _behind(dir_fd: int, name: str, where: str, mine: dict[str, object]) -> bool:
    """Whether the header `mine` is behind the attempt file on disk (which
    has its end, or more output): a journal brought back by a power cut (its
    removal was not durable yet) never undoes a later save of the attempt."""
    try:
        opened = open_attempt(dir_fd, name, where)
    except Exception:
        return False  # unreadable: rewritten
    if opened is None:
        return False
    os.close(opened[0])
    return _progress(opened[1]) > _progress(mine)


def op_fsyncs(ops: Iterable[Op]) -> int:
    """The fsyncs `apply_ops` makes with `sync`: a file and a directory a write."""
    return 2 * sum(1 for op in ops if op[2] is not None)


def apply_ops(root: str, root_fd: int, ops: list[Op], *, sync: bool, fresh: bool = False) -> None:
    """Apply a batch's attempt writes in order (each file replaced whole);
    with `sync`, each file and directory is fsynced, else the caller's
    syncfs(2) makes them durable. Repeating them (a journal replay) is
    harmless: a removal of a missing file is nothing, and a write behind the
    file on disk is skipped. `fresh`: the ops of the batch committing now,
    made under this lock hold, so none is behind a file on disk."""
    dirs: dict[str, int] = {}
    parents: dict[str, int] = {}
    try:
        for digest, n, data in ops:
            dir_fd = dirs.get(digest)
            where = shown(root, digest[:2], digest)
            if dir_fd is None:
                got = key_dir(
                    root,
                    digest,
                    create=data is not None,
                    root_fd=root_fd,
                    sync=sync,
                    kept=parents,
                )
                if got is None:
                    continue  # a removal in a directory that is gone
                dirs[digest] = dir_fd = got
            if data is None:
                remove(dir_fd, n)
                continue
            name = f"{n}{SUFFIX}"
            mine = parse_head(data.partition(b"\n")[0], where)
            if not fresh and _behind(dir_fd, name, where, mine):
                continue
            what = "cannot record the attempt"
            fsutil.replace_file(dir_fd, name, data, where, sync=sync, what=what)
            if mine.get("pid") is not None:
                fsutil.unlink_quiet(dir_fd, f"{n}{PID_SUFFIX}")  # the header has it now
        if sync:
            for digest, dir_fd in dirs.items():
                fsutil.fsync_fd(dir_fd, shown(root, digest[:2], digest))
    finally:
        fsutil.close_all([*dirs.values(), *parents.values()])


def scan(root: str) -> tuple[set[str], list[str]]:
    """(every key with an attempt, the stray temporary files' paths): no lock.
    A key is known by an attempt file that reads (those that do not are
    `ledger doctor`'s: attemptdamage.py)."""
    keys: set[str] = set()
    strays: list[str] = []
    root_fd = fsutil.open_root(root)
    if root_fd is None:
        return keys, strays
    try:
        top = fsutil.open_subdir(root_fd, ATTEMPTS_DIR, shown(root), create=False)
    finally:
        os.close(root_fd)
    if top is None:
        return keys, strays
    try:
        for shard_name in sorted(os.listdir(top)):
            shard = fsutil.open_subdir(top, shard_name, shown(root, shard_name), create=False)
            if shard is None:
                continue
            try:
                for digest in sorted(os.listdir(shard)):
                    where = shown(root, shard_name, digest)
                    d = fsutil.open_subdir(shard, digest, where, create=False)
                    if d is None:
                        continue
                    try:
                        for name in sorted(os.listdir(d)):
                            if name.endswith(fsutil.TEMP_SUFFIX):
                                strays.append(f"{where}/{name}")
                        for n in names(d, where):
                            try:
                                att = header(d, n, where)
                            except StoreError:
                                continue  # damaged: doctor names it (attemptdamage.py)
                            if att is not None:
                                keys.add(att.key)
                                break
                    finally:
                        os.close(d)
            finally:
                os.close(shard)
    finally:
        os.close(top)
    return keys, strays
