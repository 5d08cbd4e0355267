"""Durable, symlink-safe file primitives for the JSON file store (POSIX).

Every write goes through a directory file descriptor opened with
`O_DIRECTORY | O_NOFOLLOW`, so a symlink planted inside the store can never
redirect a write: names are resolved relative to a directory we opened
ourselves, temporary files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`,
and `rename` replaces a directory entry without following it.

A durable replace is: write a temporary file in the target's directory, fsync
it, rename it over the target, fsync the directory. Temporary files end in
`.tmp`; they exist only while a writer holds the store lock, so a `.tmp` file
seen under the lock was left by a crash and may be removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Callable

from ledger_cli.errors import StoreError

FILE_MODE = 0o600
DIR_MODE = 0o700
TEMP_SUFFIX = ".tmp"

O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | O_NOFOLLOW | O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC


def fail(path: str, what: str, exc: OSError | None = None) -> StoreError:
    """A StoreError naming the file: `ledger: store: PATH: WHAT[: strerror]`."""
    detail = f": {exc.strerror or exc}" if exc is not None else ""
    return StoreError(f"ledger: store: {path}: {what}{detail}")


def open_root(path: str) -> int | None:
    """Open the store directory itself (the user's path may be a symlink); None if missing."""
    try:
        return os.open(path, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    except FileNotFoundError:
        return None
    except NotADirectoryError as exc:
        raise fail(path, "not a directory", exc) from None
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


def read_file(dir_fd: int, name: str, shown: str) -> bytes | None:
    """The whole content of regular file `name`, or None when it does not exist."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise fail(shown, "is a symlink; refusing to read it") from None
        raise fail(shown, "cannot open", exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise fail(shown, "is not a regular file")
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, max(st.st_size + 1, 4096))
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
    return f".{name}.{os.getpid()}.{_TEMP_TOKEN}{_temp_counter:x}{TEMP_SUFFIX}"


_umask_allows_owner_rw: bool | None = None


def _needs_fchmod() -> bool:
    """False when the process umask provably leaves mode 0600 intact (Linux: read
    from /proc/self/status, which does not race like os.umask(os.umask(0)))."""
    global _umask_allows_owner_rw
    if _umask_allows_owner_rw is None:
        allowed = False
        try:
            with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Umask:"):
                        allowed = int(line.split()[1], 8) & 0o600 == 0
                        break
        except (OSError, ValueError, IndexError):
            allowed = False
        _umask_allows_owner_rw = allowed
    return not _umask_allows_owner_rw


def replace_file(dir_fd: int, name: str, data: bytes, shown: str, *, sync: bool) -> None:
    """Atomically replace `name` in `dir_fd` with `data` (mode 0600).

    With `sync` the new bytes are fsynced before the rename; the caller
    fsyncs the directory (once for many files) to make the rename durable.
    """
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
            if _needs_fchmod():  # O_CREAT's mode went through the umask
                os.fchmod(fd, FILE_MODE)
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        if isinstance(exc, OSError):
            raise fail(shown, "cannot write", exc) from None
        raise


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
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).syncfs
                fn.argtypes = [ctypes.c_int]
                fn.restype = ctypes.c_int
                _syncfs = fn
            except (OSError, AttributeError, ImportError):
                _syncfs = None
    return _syncfs is not None


def sync_filesystem(fd: int, shown: str) -> None:
    """syncfs(2): make every write to the filesystem holding `fd` durable.

    Call only after sync_filesystem_available() returned True.
    """
    fn = _syncfs
    assert fn is not None
    if fn(fd) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise fail(shown, "syncfs failed", OSError(err, os.strerror(err)))
