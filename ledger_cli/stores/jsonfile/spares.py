"""Spare files: the inodes of a batch's record files, made before it takes the lock.

Creating a file is the dearest step of writing a record, and its cost is not
the batch's own: ext4 looks for a free inode by scanning its group's bitmap,
and without a journal it skips (reading each) every inode deleted in the
last minutes: after a test suite or an `rm -rf` nearby, about 0.5 ms a file,
ten times the rest of a record's write, and it swings with what others
delete (measured with perf: find_inode_bit, recently_deleted). Under the lock
that makes a block's hold unpredictable (docs/design.md §5.4 "Short lock holds").

So after a large commit the store keeps unnamed files (O_TMPFILE) ready for
the next batch, made before that batch takes the lock: a record file is
written into one, then linked into place under a temporary name and renamed
over the record, as replace_file does. An unnamed file leaves nothing
behind: the kernel frees it when its descriptor closes, however the process
ends. Where O_TMPFILE is missing, files are created under the lock as before.
"""

from __future__ import annotations

import contextlib
import os

from ledger_cli.stores.jsonfile import fsutil, swap

MAX_SPARES = 16384
"""At most this many spare files (descriptors) are kept: more than a block of a
chunked run writes (measured: up to ~9,000 records in a 0.4 s block). A
block writing more than its spares creates the rest under the lock."""

_WANT_FDS = 4 * MAX_SPARES + 1024
"""The descriptor limit a process with spares asks for (its soft limit raised
towards the hard one; at most a quarter of it goes to spares)."""

_O_TMPFILE: int = getattr(os, "O_TMPFILE", 0)
_FLAGS = _O_TMPFILE | os.O_WRONLY | fsutil.O_CLOEXEC
_PROC_FD = "/proc/self/fd"


def unnamed_files() -> bool:
    """Whether this system makes unnamed files (O_TMPFILE) and can name them
    (through /proc/self/fd). A file system may still refuse them (EOPNOTSUPP)."""
    return bool(_O_TMPFILE) and os.path.isdir(_PROC_FD)


def unnamed_file(dir_fd: int) -> int:
    """A new unnamed file (mode 0600) in `dir_fd`; OSError where the file system has none."""
    return os.open(".", _FLAGS, fsutil.FILE_MODE, dir_fd=dir_fd)


def link_temp(fd: int, dir_fd: int, name: str) -> str:
    """Name the unnamed file `fd` in `dir_fd`, under a temporary name for
    `name` (fsutil.temp_name); that name."""
    tmp = fsutil.temp_name(name)
    source = f"{_PROC_FD}/{fd}"
    try:
        os.link(source, tmp, dst_dir_fd=dir_fd, follow_symlinks=True)
    except FileExistsError:  # a leftover under the same name: draw a random one
        tmp = f".{name}.{os.urandom(8).hex()}{fsutil.TEMP_SUFFIX}"
        os.link(source, tmp, dst_dir_fd=dir_fd, follow_symlinks=True)
    return tmp


def _fd_room() -> int:
    """Descriptors this process may still spend on spares (a quarter of its limit)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < _WANT_FDS:
            raised = _WANT_FDS if hard == resource.RLIM_INFINITY else min(hard, _WANT_FDS)
            if raised > soft:
                resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
                soft = raised
    except (ImportError, OSError, ValueError):
        return 0
    if soft == resource.RLIM_INFINITY:
        return MAX_SPARES
    return max(0, soft // 4)


class Spares:
    """Unnamed files of one store object, made outside the lock, used under it."""

    __slots__ = ("_fds", "_pid", "usable", "want")

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._pid = os.getpid()
        self.want = 0
        self.usable = unnamed_files()

    def plan(self, written: int) -> None:
        """A large commit wrote `written` record files: the next batch of a run
        (a chunked one grows by at most twice) gets as many spares ready; a small
        one (0) wants none, without a look at the descriptor limit (`resource`)."""
        if self.usable:
            self.want = min(2 * written, MAX_SPARES, _fd_room()) if written else 0

    def fill(self, root_fd: int) -> None:
        """Make spare files up to the plan (outside the lock: nobody can see them)."""
        self._forked()
        while len(self._fds) < self.want:
            try:
                fd = unnamed_file(root_fd)
            except OSError:  # no O_TMPFILE on this file system: create files as usual
                self.usable = False
                self.want = 0
                return
            self._fds.append(fd)

    def take(self) -> int | None:
        """A spare file's descriptor (the caller consumes it), or None."""
        self._forked()
        return self._fds.pop() if self._fds else None

    def close(self) -> None:
        fds, self._fds = self._fds, []
        self.want = 0
        fsutil.close_all(fds)

    def _forked(self) -> None:
        """A forked child must not write into its parent's files."""
        if self._pid != os.getpid():
            fds, self._fds = self._fds, []
            self._pid = os.getpid()
            with contextlib.suppress(OSError):
                fsutil.close_all(fds)


def replace_from(
    fd: int, dir_fd: int, name: str, data: bytes, shown: str, *, sync: bool, tmp_dir_fd: int
) -> None:
    """`fsutil.replace_file`, the bytes written into the spare file `fd`
    (consumed), which is linked under a temporary name and renamed into place."""
    tmp = None
    try:
        try:
            if fsutil.needs_fchmod():  # O_TMPFILE's mode went through the umask
                os.fchmod(fd, fsutil.FILE_MODE)
            fsutil.write_all(fd, data)
            if sync:
                os.fsync(fd)
            tmp = link_temp(fd, tmp_dir_fd, name)
        finally:
            os.close(fd)
        swap.into_place(tmp, name, src_dir_fd=tmp_dir_fd, dst_dir_fd=dir_fd, synced=sync)
    except BaseException as exc:
        fsutil.discard_temp(tmp_dir_fd, tmp, shown, exc)
