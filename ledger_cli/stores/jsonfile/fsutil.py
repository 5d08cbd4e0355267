"""Durable, symlink-safe file primitives for the JSON file store (POSIX).

Every write goes through a directory file descriptor opened with
`O_DIRECTORY | O_NOFOLLOW`, so a symlink planted inside the store can never
redirect a write: names are resolved relative to a directory we opened
ourselves, temporary files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`,
and `rename` replaces a directory entry without following it.

A durable replace: write a temporary file, fsync it, rename it over the target,
fsync the target's directory (an unsynced file goes in by swap.py). Every
temporary file is made in the store's root directory (rename(2) moves it into
its shard), so a lock holder finds a crash's leftovers with one listing.
They end in `.tmp` and exist only while a writer holds the store lock (or its
thread unlinks an old file, swap.py): one seen under the lock may go.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from typing import TYPE_CHECKING

from ledger_cli.errors import StoreDamageError, StoreError
from ledger_cli.stores.jsonfile import swap

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import NoReturn

FILE_MODE = 0o600
DIR_MODE = 0o700
TEMP_SUFFIX = ".tmp"

O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
"""Opening a FIFO planted where a file should be would block until a writer came;
with O_NONBLOCK it returns at once (the type check refuses it; files ignore it)."""
APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
"""Opening an append-only index file (live/ shard indexes, deps/ need files)."""
_DIR_FLAGS = os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
READ_FLAGS = os.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC


def fail(path: str, what: str, exc: OSError | None = None) -> StoreError:
    """A StoreError naming the file: `ledger: store: PATH: WHAT[: strerror]`."""
    detail = f": {exc.strerror or exc}" if exc is not None else ""
    return StoreError(f"ledger: store: {path}: {what}{detail}")


class IndexDamage(StoreDamageError):
    """A derived index file (ready/, deps/, tally/) whose content is damaged —
    not an I/O error: the records hold the truth, so a journal replay rebuilds
    the index (journal.py) rather than fail on it. `index` names it."""

    def __init__(self, message: str, index: str) -> None:
        super().__init__(message)
        self.index = index


def damaged_index(index: str, path: str, what: str) -> IndexDamage:
    """An IndexDamage naming the file: `ledger: store: PATH: WHAT`."""
    return IndexDamage(f"ledger: store: {path}: {what}", index)


def open_root(path: str) -> int | None:
    """Open the store directory itself (the user's path may be a symlink); None if missing."""
    try:
        return os.open(path, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    except FileNotFoundError:
        return None
    except NotADirectoryError as exc:
        from ledger_cli.stores.otherkind import other_kind  # an error path only

        raise other_kind(path, "json") or fail(path, "not a directory", exc) from None
    except OSError as exc:
        raise fail(path, "cannot open the store directory", exc) from None


def open_subdir(
    parent_fd: int, name: str, shown: str, *, create: bool, sync: bool = True
) -> int | None:
    """Open directory `name` inside `parent_fd` without following a symlink.

    With `create`, a missing directory is made (mode 0700 whatever the umask)
    and, with `sync`, the parent is fsynced so the new entry is durable (pass
    False when a syncfs follows). None when missing and not `create`.
    """
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            return None
    except OSError as exc:
        raise _refusal(shown, exc) from None
    try:
        os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
    except FileExistsError:
        pass  # a concurrent creator (e.g. another process initialising)
    except OSError as exc:
        raise fail(shown, "cannot create directory", exc) from None
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        raise _refusal(shown, exc) from None
    try:
        if needs_fchmod():  # mkdir's mode went through the umask
            os.fchmod(fd, DIR_MODE)
        if sync:
            os.fsync(parent_fd)
    except OSError as exc:
        os.close(fd)
        raise fail(shown, "cannot set up directory", exc) from None
    return fd


def _refusal(shown: str, exc: OSError) -> StoreError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return fail(shown, "is a symlink or not a directory; refusing to use it")
    return fail(shown, "cannot open", exc)


def open_failed(shown: str, exc: OSError) -> StoreError:
    """The StoreError for a failed open: a symlink (O_NOFOLLOW's ELOOP) is named so."""
    if exc.errno == errno.ELOOP:
        return fail(shown, "is a symlink; refusing to follow it")
    return fail(shown, "cannot open", exc)


def require_regular(fd: int, shown: str) -> os.stat_result:
    """fstat `fd`; StoreError (and `fd` closed) unless it is a regular file."""
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise fail(shown, "cannot stat", exc) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise fail(shown, "is not a regular file (a FIFO, socket or device?); refusing to use it")
    return st


def open_regular(dir_fd: int, name: str, flags: int, shown: str) -> int | None:
    """Open regular file `name` (created with FILE_MODE when `flags` has
    O_CREAT), or None when it does not exist; a StoreError naming `shown`
    for any other failure, a symlink or anything but a regular file."""
    opened = _open_regular_stat(dir_fd, name, flags, shown)
    return None if opened is None else opened[0]


def _open_regular_stat(
    dir_fd: int, name: str, flags: int, shown: str
) -> tuple[int, os.stat_result] | None:
    """`open_regular`, with the file's fstat."""
    try:
        fd = os.open(name, flags, FILE_MODE, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise open_failed(shown, exc) from None
    return fd, require_regular(fd, shown)  # closes fd when it refuses


def append_lines(fd: int, lines: Iterable[str], shown: str, *, sync: bool) -> None:
    """Append `lines` (ASCII) to the file open on `fd`, each after a newline
    (which ends a line a crash may have torn), fsynced when `sync`; closes `fd`."""
    try:
        write_all(fd, "".join("\n" + line for line in lines).encode("ascii") + b"\n")
        if sync:
            os.fsync(fd)
    except OSError as exc:
        raise fail(shown, "cannot append", exc) from None
    finally:
        os.close(fd)


def read_in(dir_fd: int | None, name: str, shown: str) -> bytes | None:
    """`read_file` in a directory opened for this one read (`dir_fd`, closed
    here); None when the directory (None) or the file is missing."""
    if dir_fd is None:
        return None
    try:
        return read_file(dir_fd, name, shown)
    finally:
        os.close(dir_fd)


def read_file(dir_fd: int, name: str, shown: str) -> bytes | None:
    """The whole content of regular file `name`, or None when it does not exist."""
    opened = _open_regular_stat(dir_fd, name, READ_FLAGS, shown)
    if opened is None:
        return None
    fd, size = opened[0], opened[1].st_size
    try:
        # A read of a regular file returns less than asked only at its end,
        # so one read of a byte more than its size reads it whole.
        want = max(size + 1, 4096)
        chunk = os.read(fd, want)
        chunks = [chunk]
        while len(chunk) == want:  # it grew since the fstat
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise fail(shown, "cannot read", exc) from None
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_temp_counter = 0
_TEMP_TOKEN = os.urandom(4).hex()


def temp_name(name: str) -> str:
    """A fresh temporary name beside `name`: pid, a random token drawn once per
    process image, and a counter (cheaper than fresh randomness per file)."""
    global _temp_counter
    _temp_counter += 1
    return f".{name}.{_pid}.{_TEMP_TOKEN}{_temp_counter:x}{TEMP_SUFFIX}"


def _forked() -> None:
    global _pid
    _pid = os.getpid()


_pid = os.getpid()
"""This process's id, kept current across fork(2) (getpid is a system call)."""
os.register_at_fork(after_in_child=_forked)


_umask_keeps_owner: bool | None = None


def needs_fchmod() -> bool:
    """False when the process umask provably leaves modes 0600 and 0700 intact
    (Linux: read from /proc/self/status, which does not race like
    os.umask(os.umask(0)))."""
    global _umask_keeps_owner
    if _umask_keeps_owner is None:
        allowed = False
        try:
            with open("/proc/self/status", "rb") as fh:  # bytes: no codec to import
                for line in fh:
                    if line.startswith(b"Umask:"):
                        allowed = int(line.split()[1], 8) & 0o700 == 0
                        break
        except (OSError, ValueError, IndexError):
            allowed = False
        _umask_keeps_owner = allowed
    return not _umask_keeps_owner


def replace_file(
    dir_fd: int,
    name: str,
    data: bytes,
    shown: str,
    *,
    sync: bool,
    tmp_dir_fd: int | None = None,
    what: str = "cannot write",
) -> None:
    """Atomically replace `name` in `dir_fd` with `data` (mode 0600).

    The temporary file is made in `tmp_dir_fd` (default: `dir_fd`; the same file
    system) and put in place (swap.py). With `sync` the new bytes are fsynced
    first; the caller fsyncs `dir_fd` (once for many files) for the new name.
    `what`: the error when putting it in place fails."""
    tdir = dir_fd if tmp_dir_fd is None else tmp_dir_fd
    tmp = write_temp(tdir, name, data, shown, sync=sync)
    try:
        swap.into_place(tmp, name, src_dir_fd=tdir, dst_dir_fd=dir_fd, synced=sync)
    except BaseException as exc:
        discard_temp(tdir, tmp, shown, exc, what)


def write_temp(dir_fd: int, name: str, data: bytes, shown: str, *, sync: bool) -> str:
    """A new temporary file in `dir_fd` holding `data` (mode 0600, fsynced
    with `sync`), named for `name`; its name. Removed again if writing fails."""
    tmp = temp_name(name)
    try:
        try:
            fd = os.open(tmp, _CREATE_FLAGS, FILE_MODE, dir_fd=dir_fd)
        except FileExistsError:  # a leftover under the same name: draw a random one
            tmp = f".{name}.{os.urandom(8).hex()}{TEMP_SUFFIX}"
            fd = os.open(tmp, _CREATE_FLAGS, FILE_MODE, dir_fd=dir_fd)
    except OSError as exc:
        raise fail(shown, "cannot create a temporary file", exc) from None
    try:
        try:
            if needs_fchmod():  # O_CREAT's mode went through the umask
                os.fchmod(fd, FILE_MODE)
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as exc:
        discard_temp(dir_fd, tmp, shown, exc)
    return tmp


def discard_temp(
    dir_fd: int, tmp: str | None, shown: str, exc: BaseException, what: str = "cannot write"
) -> NoReturn:
    """After `exc` failed a write through the temporary file `tmp` (None: none
    was made yet): remove it, and raise `exc` (an OSError as the StoreError
    `shown: what`)."""
    if tmp is not None:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
    if isinstance(exc, OSError):
        raise fail(shown, what, exc) from None
    raise exc


def close_all(fds: Iterable[int | None]) -> None:
    """Close every descriptor, even when closing one fails (Linux frees a descriptor
    whatever close(2) reports); then raise the first failure."""
    error: OSError | None = None
    for fd in fds:
        if fd is None:
            continue
        try:
            os.close(fd)
        except OSError as exc:
            error = error or exc
    if error is not None:
        raise error


def fsync_fd(fd: int, shown: str) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        raise fail(shown, "fsync failed", exc) from None


def unlink_quiet(dir_fd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


_syncfs: Callable[[int], int] | None = None
_syncfs_probed = False


def sync_filesystem_available() -> bool:
    """Whether syncfs(2) can be called (Linux with a C library that has it)."""
    global _syncfs, _syncfs_probed
    if not _syncfs_probed:
        _syncfs_probed = True
        if sys.platform.startswith("linux"):
            import ctypes  # a rare path: only journalled writes need it (CONTRIBUTING, start-up)

            try:
                fn = ctypes.CDLL(None, use_errno=True).syncfs
            except (OSError, AttributeError):
                _syncfs = None
            else:
                fn.argtypes = [ctypes.c_int]
                fn.restype = ctypes.c_int
                _syncfs = fn
    return _syncfs is not None


def _errno() -> int:
    import ctypes

    return ctypes.get_errno()


def sync_filesystem(fd: int, shown: str) -> None:
    """syncfs(2): make every write to the filesystem holding `fd` durable.

    Call only after sync_filesystem_available() returned True.
    """
    fn = _syncfs
    assert fn is not None
    if fn(fd) != 0:
        err = _errno()
        raise fail(shown, "syncfs failed", OSError(err, os.strerror(err)))
