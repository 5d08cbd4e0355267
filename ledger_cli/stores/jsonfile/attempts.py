"""Attempts on the JSON store (SPEC §7.1): files of their own, beside the records.

    attempts/<first two hex digits>/<key digest>/<n>.att

One file per attempt. Its first line is a JSON object (the §7.1 fields, the
key and a format tag; no newline inside), then the kept output, raw bytes as
the command wrote them. The metadata and the output are therefore one file,
replaced as one: a reader never sees an end without its output, or output
without the count that goes with it.

Every write is the store's durable replace (docs/reliability.md): a temporary
file in the key's directory, fsynced, renamed over the attempt file, the
directory fsynced. A crash at any instant leaves each attempt file old or
new, never torn, and at most a stray `.tmp` beside it (`doctor` notes it,
`--fix` removes it).

Locking: starting an attempt (choosing `n`, removing the attempts beyond the
newest 16) and removing attempts happen under the store lock, a short hold.
A save (the runner's flush, about once a second) writes and fsyncs its
temporary file *outside* the lock, and takes the lock only for the rename and
the directory fsync, after checking that the attempt was not removed
meanwhile: a command's output never keeps other writers waiting on its disk
writes. Readers take no lock at all.
"""

from __future__ import annotations

import json
import os

from ledger_cli.engine.attempts import KEEP_ATTEMPTS, Attempt, expired, new_part, next_n
from ledger_cli.errors import StoreError
from ledger_cli.stores import _fsutil
from ledger_cli.stores._fsutil import fail
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.records import key_digest

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ledger_cli.stores.jsonfile.store import JsonFileStore

ATTEMPTS_DIR = "attempts"
FORMAT = "ledger_cli.attempt"
SUFFIX = ".att"
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _fsutil.O_NOFOLLOW | _fsutil.O_CLOEXEC
_READ = os.O_RDONLY | _fsutil.O_NOFOLLOW | _fsutil.O_NONBLOCK | _fsutil.O_CLOEXEC


def encode(att: Attempt, output: bytes) -> bytes:
    head = {"format": FORMAT, "key": att.key, **att.to_obj()}
    return json.dumps(head, ensure_ascii=True, separators=(",", ":")).encode() + b"\n" + output


def attempt_number(name: str) -> int | None:
    """n of an attempt file name (`12.att`), else None."""
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    return int(stem) if stem.isdigit() and stem[0] != "0" else None


class JsonAttempts:
    def __init__(self, store: JsonFileStore) -> None:
        self._store = store
        self._root = store.path

    def _shown(self, *parts: str) -> str:
        return os.path.join(self._root, ATTEMPTS_DIR, *parts)

    def _digest(self, key: str) -> str:
        digest = key_digest(key)
        if digest is None:
            raise StoreError(
                f"ledger: store: key {key!r} is not valid Unicode; no attempt can be recorded"
            )
        return digest

    # -- directories -------------------------------------------------------------

    def _key_dir(self, key: str, *, create: bool, root_fd: int | None = None) -> int | None:
        """The key's attempt directory (fd), None when missing and not `create`."""
        digest = self._digest(key)
        opened = root_fd is None
        if root_fd is None:
            root_fd = _fsutil.open_root(self._root)
            if root_fd is None:
                return None
        fds: list[int | None] = []
        try:
            top = _fsutil.open_subdir(root_fd, ATTEMPTS_DIR, self._shown(), create=create)
            fds.append(top)
            if top is None:
                return None
            shard = _fsutil.open_subdir(top, digest[:2], self._shown(digest[:2]), create=create)
            fds.append(shard)
            if shard is None:
                return None
            return _fsutil.open_subdir(
                shard, digest, self._shown(digest[:2], digest), create=create
            )
        finally:
            if opened:
                fds.append(root_fd)
            _fsutil.close_all(fds)

    def _names(self, dir_fd: int, shown: str, *, every: bool = False) -> list[int]:
        """The attempt numbers in a key's directory: the newest 16 (a crash
        between a start's rename and its removal of the oldest can leave one
        more, which readers skip and the next start removes), or `every` one."""
        try:
            names = os.listdir(dir_fd)
        except OSError as exc:
            raise fail(shown, "cannot list", exc) from None
        found = sorted(n for n in map(attempt_number, names) if n is not None)
        if every or not found:
            return found
        return [n for n in found if n > found[-1] - KEEP_ATTEMPTS]

    def _write_temp(self, dir_fd: int, name: str, data: bytes, shown: str) -> str:
        tmp = f".{name}.{os.urandom(6).hex()}{_fsutil.TEMP_SUFFIX}"
        try:
            fd = os.open(tmp, _CREATE, _fsutil.FILE_MODE, dir_fd=dir_fd)
        except OSError as exc:
            raise fail(shown, "cannot create a temporary file", exc) from None
        try:
            try:
                os.fchmod(fd, _fsutil.FILE_MODE)
                _fsutil.write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException as exc:
            _fsutil.unlink_quiet(dir_fd, tmp)
            if isinstance(exc, OSError):
                raise fail(shown, "cannot write", exc) from None
            raise
        return tmp

    # -- AttemptLog --------------------------------------------------------------

    @store_method
    def start_attempt(self, att: Attempt) -> int:
        digest = self._digest(att.key)
        shown = self._shown(digest[:2], digest)
        with self._store._locked(create=True) as root_fd:
            assert root_fd is not None
            dir_fd = self._key_dir(att.key, create=True, root_fd=root_fd)
            assert dir_fd is not None
            try:
                kept = self._names(dir_fd, shown, every=True)
                n = next_n(kept)
                stored = att.copy()
                stored.n = n
                name = f"{n}{SUFFIX}"
                tmp = self._write_temp(dir_fd, name, encode(stored, b""), shown)
                try:
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    for old in expired(kept, n):
                        _fsutil.unlink_quiet(dir_fd, f"{old}{SUFFIX}")
                    os.fsync(dir_fd)
                except OSError as exc:
                    _fsutil.unlink_quiet(dir_fd, tmp)
                    raise fail(shown, "cannot record the attempt", exc) from None
            finally:
                os.close(dir_fd)
        return n

    @store_method
    def save_attempt(self, att: Attempt, output: bytes | None) -> None:
        digest = self._digest(att.key)
        shown = self._shown(digest[:2], digest)
        dir_fd = self._key_dir(att.key, create=False)
        if dir_fd is None:
            return  # removed meanwhile (prune)
        name = f"{att.n}{SUFFIX}"
        try:
            if output is None:
                output = self._read_output(dir_fd, name, shown, 0)
                if output is None:
                    return
            # The slow part (the bytes, their fsync) before the lock is taken.
            tmp = self._write_temp(dir_fd, name, encode(att, output), shown)
            try:
                with self._store._locked(create=False):
                    if not _exists(dir_fd, name):
                        return  # removed meanwhile (prune, 16 newer attempts)
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    tmp = ""
                    os.fsync(dir_fd)
            except OSError as exc:
                raise fail(shown, "cannot record the attempt", exc) from None
            finally:
                if tmp:
                    _fsutil.unlink_quiet(dir_fd, tmp)
        finally:
            os.close(dir_fd)

    def _open(self, dir_fd: int, name: str, shown: str) -> tuple[int, dict[str, object]] | None:
        """(fd positioned after the header, header), or None when missing."""
        try:
            fd = os.open(name, _READ, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _fsutil.open_failed(f"{shown}/{name}", exc) from None
        try:
            _fsutil.require_regular(fd, f"{shown}/{name}")
            head = b""
            while b"\n" not in head:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise fail(f"{shown}/{name}", "is not an attempt file (no header line)")
                head += chunk
            line, _, _rest = head.partition(b"\n")
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise fail(f"{shown}/{name}", f"is not an attempt file ({exc})") from None
            if not isinstance(obj, dict) or obj.get("format") != FORMAT:
                raise fail(f"{shown}/{name}", "is not an attempt file (unknown format)")
            os.lseek(fd, len(line) + 1, os.SEEK_SET)
            return fd, obj
        except BaseException:
            os.close(fd)
            raise

    def _read_output(self, dir_fd: int, name: str, shown: str, start: int) -> bytes | None:
        opened = self._open(dir_fd, name, shown)
        if opened is None:
            return None
        fd, _head = opened
        try:
            if start:
                os.lseek(fd, start, os.SEEK_CUR)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError as exc:
            raise fail(f"{shown}/{name}", "cannot read", exc) from None
        finally:
            os.close(fd)

    def _header(self, dir_fd: int, name: str, shown: str) -> Attempt | None:
        opened = self._open(dir_fd, name, shown)
        if opened is None:
            return None
        fd, obj = opened
        os.close(fd)
        try:
            return Attempt.from_obj(str(obj["key"]), obj)
        except (KeyError, TypeError, ValueError) as exc:
            raise fail(f"{shown}/{name}", f"is not an attempt file ({exc})") from None

    @store_method
    def list_attempts(self, key: str) -> list[Attempt]:
        if key_digest(key) is None:
            return []
        digest = self._digest(key)
        shown = self._shown(digest[:2], digest)
        dir_fd = self._key_dir(key, create=False)
        if dir_fd is None:
            return []
        try:
            found = []
            for n in self._names(dir_fd, shown):
                att = self._header(dir_fd, f"{n}{SUFFIX}", shown)
                if att is not None:
                    found.append(att)
            return found
        finally:
            os.close(dir_fd)

    @store_method
    def read_output(self, key: str, n: int, start: int = 0) -> bytes:
        if key_digest(key) is None:
            return b""
        digest = self._digest(key)
        shown = self._shown(digest[:2], digest)
        dir_fd = self._key_dir(key, create=False)
        if dir_fd is None:
            return b""
        try:
            if n not in self._names(dir_fd, shown):
                return b""
            return self._read_output(dir_fd, f"{n}{SUFFIX}", shown, start) or b""
        finally:
            os.close(dir_fd)

    @store_method
    def read_new(self, key: str, n: int, seen: int) -> tuple[Attempt | None, bytes]:
        """The header and the new bytes from one open file: consistent."""
        if key_digest(key) is None:
            return None, b""
        digest = self._digest(key)
        shown = self._shown(digest[:2], digest)
        dir_fd = self._key_dir(key, create=False)
        if dir_fd is None:
            return None, b""
        name = f"{n}{SUFFIX}"
        try:
            if n not in self._names(dir_fd, shown):
                return None, b""
            opened = self._open(dir_fd, name, shown)
        finally:
            os.close(dir_fd)
        if opened is None:
            return None, b""
        fd, obj = opened
        try:
            try:
                att = Attempt.from_obj(str(obj["key"]), obj)
            except (KeyError, TypeError, ValueError) as exc:
                raise fail(f"{shown}/{name}", f"is not an attempt file ({exc})") from None
            os.lseek(fd, new_part(att, seen), os.SEEK_CUR)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return att, b"".join(chunks)
        except OSError as exc:
            raise fail(f"{shown}/{name}", "cannot read", exc) from None
        finally:
            os.close(fd)

    @store_method
    def remove_attempts(self, keys: Iterable[str]) -> int:
        removed = 0
        with self._store._locked(create=False) as root_fd:
            if root_fd is None:
                return 0
            for key in keys:
                if key_digest(key) is not None:
                    removed += self._remove_key(root_fd, key)
        return removed

    def _remove_key(self, root_fd: int, key: str) -> int:
        digest = self._digest(key)
        dir_fd = self._key_dir(key, create=False, root_fd=root_fd)
        if dir_fd is None:
            return 0
        shown = self._shown(digest[:2], digest)
        removed = 0
        try:
            for name in os.listdir(dir_fd):
                if _fsutil.unlink_quiet(dir_fd, name) and attempt_number(name) is not None:
                    removed += 1
            os.fsync(dir_fd)
        except OSError as exc:
            raise fail(shown, "cannot remove attempts", exc) from None
        finally:
            os.close(dir_fd)
        top = _fsutil.open_subdir(root_fd, ATTEMPTS_DIR, self._shown(), create=False)
        if top is None:
            return removed
        try:
            shard = _fsutil.open_subdir(top, digest[:2], self._shown(digest[:2]), create=False)
            if shard is not None:
                try:
                    os.rmdir(digest, dir_fd=shard)
                    os.fsync(shard)
                except OSError:
                    pass  # not empty (a concurrent start): its files stay valid
                finally:
                    os.close(shard)
        finally:
            os.close(top)
        return removed

    @store_method
    def attempt_keys(self) -> list[str]:
        return sorted(self.scan()[0])

    @store_method
    def scan(self) -> tuple[set[str], list[str]]:
        """(every key with an attempt, the stray temporary files' paths)."""
        keys: set[str] = set()
        strays: list[str] = []
        root_fd = _fsutil.open_root(self._root)
        if root_fd is None:
            return keys, strays
        try:
            top = _fsutil.open_subdir(root_fd, ATTEMPTS_DIR, self._shown(), create=False)
        finally:
            os.close(root_fd)
        if top is None:
            return keys, strays
        try:
            for shard_name in sorted(os.listdir(top)):
                shard = _fsutil.open_subdir(top, shard_name, self._shown(shard_name), create=False)
                if shard is None:
                    continue
                try:
                    for digest in sorted(os.listdir(shard)):
                        shown = self._shown(shard_name, digest)
                        d = _fsutil.open_subdir(shard, digest, shown, create=False)
                        if d is None:
                            continue
                        try:
                            for name in sorted(os.listdir(d)):
                                if name.endswith(_fsutil.TEMP_SUFFIX):
                                    strays.append(f"{shown}/{name}")
                            for n in self._names(d, shown):
                                att = self._header(d, f"{n}{SUFFIX}", shown)
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

    @store_method
    def remove_strays(self, paths: Iterable[str]) -> int:
        """Remove stray temporary files found by `scan` (under the lock)."""
        removed = 0
        with self._store._locked(create=False):
            for path in paths:
                try:
                    os.unlink(path)
                    removed += 1
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise fail(path, "cannot remove", exc) from None
        return removed


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
