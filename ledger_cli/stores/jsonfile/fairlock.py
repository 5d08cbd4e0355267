"""The JSON store's inter-process lock: `filelock.FileLock` behind a FIFO queue.

Mutual exclusion comes from `filelock.FileLock` (flock(2)) on `ledger.lock`,
a file that is never deleted. filelock waits by polling: a waiter sleeps
`poll_interval` between attempts while a process that releases and
re-acquires at once (a worker loop) barges in ahead of it. With its default
50 ms interval, 8 contending processes starved waiters for seconds; a short
interval alone still leaves a p99 wait of ~200 ms and burns the CPU that the
holder needs (each filelock attempt opens the file and runs its machinery).

So waiters queue first, in arrival order (a CLH queue lock made of files):
- each acquirer creates its own node file `waiters/n-<random>` and flocks it
  (held until it releases the store lock),
- under a momentary flock on `waiters/tail` it swaps its node name into the
  tail; the previous tail is its predecessor,
- it waits until it can flock its predecessor's node, then unlinks that
  node and takes the FileLock, which is free by then. A node is a FIFO that
  its owner alone holds open for writing, so the successor sleeps in poll(2)
  on it until the owner closes it: the kernel drops the node's flock and then
  reports the hang-up, whether the owner left or died (a waiter that polled
  the flock every 0.5 ms spent a drain's CPU on flock(2) and nanosleep(2)).
  A successor checks the flock at least every RELEASE_CHECK too. A byte in
  the node (the wake-up that the previous release wrote just before closing
  it) is read away, not waited on: woken by it, a successor spun on poll(2)
  and flock(2) until the close, taking the CPU the leaver needed to close.
  A regular-file node is polled as before, every QUEUE_POLL.
A process killed at any point drops its flocks, so its successor goes on;
leftover node files are removed by their successor or by `sweep()`. The
queue only orders the waiters: the lock file's flock alone guarantees
exclusion, so a confused queue can cost fairness, never safety. Every wait
has a deadline (the store's lock timeout), after which acquisition fails
with StoreError.

At the head of the queue the lock is normally free, and importing filelock
costs about twice the interpreter's own start-up. So the head first takes
the very same kernel lock itself: `flock(LOCK_EX | LOCK_NB)` on its own
descriptor of `ledger.lock`, the call filelock makes (docs/design.md §3.2). Only when
that fails (a holder outside the queue: `fair=False`, a full disk, another
program using filelock on the file) is filelock imported, to wait. flock(2)
locks belong to open file descriptions, so a raw holder and a filelock
holder exclude each other, in one process or in two.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import stat
import time
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail

if TYPE_CHECKING:
    from typing import Any

LOCK_NAME = "ledger.lock"
QUEUE_DIR = "waiters"  # queue/ holds the keys' task queues (queuefile.py)
OLD_QUEUE_DIR = "queue"
"""Where earlier builds queued waiters: known there to doctor and refuse_foreign."""
TAIL_NAME = "tail"
NODE_PREFIX = "n-"
_NODE_LEN = len(NODE_PREFIX) + 24
QUEUE_POLL = 0.0005
"""Seconds between a queued waiter's checks of a regular-file predecessor (one flock call)."""
RELEASE_CHECK = 0.02
"""Seconds at most between a queued waiter's checks of a FIFO predecessor's flock,
which normally wakes it (poll) the moment it leaves."""
FILELOCK_POLL = 0.001
"""filelock's poll interval once at the head of the queue (normally never used)."""
_TAIL_POLL = 0.00005
_STALE_NODE_AGE = 2.0
_LEAVE_TIMEOUT = 5.0

_O_NOFOLLOW = fsutil.O_NOFOLLOW
_O_CLOEXEC = fsutil.O_CLOEXEC
_O_NONBLOCK = fsutil.O_NONBLOCK
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


def _flock_nb(fd: int, op: int) -> bool:
    try:
        fcntl.flock(fd, op | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    return True


def _make_node(name: str, qfd: int) -> int:
    """Create and open our queue node: a FIFO, or a regular file where the
    file system has no FIFOs (vfat, some FUSE), which successors poll."""
    try:
        os.mkfifo(name, fsutil.FILE_MODE, dir_fd=qfd)  # fails if it exists
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
        return os.open(name, flags, fsutil.FILE_MODE, dir_fd=qfd)
    # O_RDWR: a FIFO's open never waits for the other end.
    return os.open(name, os.O_RDWR | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=qfd)


class QueueLock:
    """One process's handle on a store directory's lock. Not re-entrant, not thread-safe
    (the store serialises its threads and counts re-entry itself)."""

    def __init__(self, root: str, timeout: float, *, fair: bool = True) -> None:
        self.root = root
        self.timeout = timeout
        self.fair = fair
        self._lock_path = os.path.join(root, LOCK_NAME)
        self._filelock: Any = None
        self._pid = os.getpid()
        self._raw_fd: int | None = None
        """Our own descriptor of the lock file while we hold its flock directly."""
        self._raw_pid = 0
        self.held_by = ""
        """How the held lock was taken: "flock" (directly) or "filelock"; "" when free."""
        self._node_fd: int | None = None
        self._node_name = ""
        self._queue_fd: int | None = None

    def _file_lock(self) -> Any:
        if self._filelock is None or self._pid != os.getpid():
            import filelock

            kwargs: dict[str, Any] = {"mode": fsutil.FILE_MODE, "thread_local": False}
            try:
                self._filelock = filelock.FileLock(
                    self._lock_path, preserve_lock_file=True, **kwargs
                )
            except TypeError:  # filelock < 4 has no preserve_lock_file (and never unlinks)
                self._filelock = filelock.FileLock(self._lock_path, **kwargs)
            self._pid = os.getpid()
        return self._filelock

    # -- acquire / release --------------------------------------------------------

    def acquire(self, root_fd: int) -> None:
        deadline = time.monotonic() + self.timeout
        fd = self._open_lock_file(root_fd)
        try:
            if self.fair:
                self._enqueue(root_fd, deadline)
        except BaseException:
            os.close(fd)
            raise
        try:
            self._take(fd, root_fd, deadline)
        except BaseException:
            self._leave_queue()
            raise

    def _take(self, fd: int, root_fd: int, deadline: float) -> None:
        """Take the lock: directly when it is free, else by waiting with filelock.
        Consumes `fd` (kept open as the holder's descriptor, or closed)."""
        try:
            while _flock_nb(fd, fcntl.LOCK_EX):
                if os.fstat(fd).st_nlink > 0:
                    self._raw_fd, self._raw_pid, self.held_by = fd, os.getpid(), "flock"
                    return
                # ledger.lock was deleted after we opened it: lock the file there now.
                os.close(fd)
                fd = -1
                fd = self._open_lock_file(root_fd)
        except BaseException as exc:
            if fd >= 0:
                os.close(fd)
            if isinstance(exc, OSError):
                raise fail(self._lock_path, "cannot lock", exc) from None
            raise
        os.close(fd)
        remaining = max(deadline - time.monotonic(), 0.0)
        import filelock  # only to wait: the lock is held outside our queue

        try:
            self._file_lock().acquire(timeout=remaining, poll_interval=FILELOCK_POLL)
        except filelock.Timeout:
            raise self._timeout_error() from None
        except OSError as exc:
            raise fail(self._lock_path, "cannot lock", exc) from None
        self.held_by = "filelock"

    def _open_lock_file(self, root_fd: int) -> int:
        """Our own descriptor of the lock file, created (0600) when missing. A symlink or
        a non-regular file planted there is refused (older filelocks follow symlinks)."""
        flags = os.O_RDWR | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
        while True:
            try:
                fd = os.open(LOCK_NAME, flags, dir_fd=root_fd)
                break
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise fsutil.open_failed(self._lock_path, exc) from None
            try:
                fd = os.open(
                    LOCK_NAME, flags | os.O_CREAT | os.O_EXCL, fsutil.FILE_MODE, dir_fd=root_fd
                )
            except FileExistsError:
                continue  # a concurrent creator won: open theirs
            except OSError as exc:
                raise fail(self._lock_path, "cannot create the lock file", exc) from None
            try:
                os.fchmod(fd, fsutil.FILE_MODE)  # O_CREAT's mode went through the umask
            except OSError as exc:
                os.close(fd)
                raise fail(self._lock_path, "cannot set up the lock file", exc) from None
            break
        fsutil.require_regular(fd, self._lock_path)
        return fd

    def release(self) -> None:
        fd, self._raw_fd = self._raw_fd, None
        held_by, self.held_by = self.held_by, ""
        try:
            if fd is not None:
                try:
                    if self._raw_pid == os.getpid():  # a forked child must not unlock its parent's
                        fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)
            elif held_by == "filelock":
                self._file_lock().release()
        finally:
            self._leave_queue()

    def _timeout_error(self) -> Exception:
        return fail(
            self._lock_path,
            f"the store is locked by another process (waited {self.timeout:g}s); "
            "retry later, or check for a stuck `ledger` process",
        )

    # -- the queue ------------------------------------------------------------------

    def _enqueue(self, root_fd: int, deadline: float) -> None:
        qfd = fsutil.open_subdir(root_fd, QUEUE_DIR, self._shown(QUEUE_DIR), create=True)
        assert qfd is not None
        self._queue_fd = qfd
        name = NODE_PREFIX + os.urandom(12).hex()
        try:
            nfd = _make_node(name, qfd)
        except OSError as exc:
            self._close_queue()
            if exc.errno in _NO_ROOM:
                # A full disk (no inode for the node): wait unqueued. Fairness is lost,
                # not exclusion (the FileLock alone excludes), and readers still read.
                return
            raise fail(self._shown(name), "cannot create lock queue node", exc) from None
        self._node_fd, self._node_name = nfd, name
        try:
            fcntl.flock(nfd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file: never contended
            pred = self._swap_tail(name, deadline)
            if pred:
                self._wait_for(pred, deadline)
        except BaseException:
            self._leave_queue()
            raise

    def _open_tail(self) -> int:
        assert self._queue_fd is not None
        shown = self._shown(TAIL_NAME)
        try:
            fd = os.open(
                TAIL_NAME,
                os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC,
                fsutil.FILE_MODE,
                dir_fd=self._queue_fd,
            )
        except OSError as exc:
            raise fsutil.open_failed(shown, exc) from None
        fsutil.require_regular(fd, shown)
        return fd

    def _lock_tail(self, tfd: int, deadline: float | None) -> None:
        # Held for a few microseconds by each peer; poll so that a stopped peer
        # cannot make us wait past the deadline.
        while not _flock_nb(tfd, fcntl.LOCK_EX):
            if deadline is not None and time.monotonic() >= deadline:
                raise self._timeout_error()
            time.sleep(_TAIL_POLL)

    def _swap_tail(self, name: str, deadline: float) -> str:
        tfd = self._open_tail()
        try:
            self._lock_tail(tfd, deadline)
            pred = os.pread(tfd, 64, 0).decode("ascii", "replace").strip()
            os.pwrite(tfd, name.encode("ascii"), 0)
            if os.fstat(tfd).st_size != _NODE_LEN:
                os.ftruncate(tfd, _NODE_LEN)
            return pred if len(pred) == _NODE_LEN and pred.startswith(NODE_PREFIX) else ""
        finally:
            os.close(tfd)  # closing drops the flock

    def _wait_for(self, pred: str, deadline: float) -> None:
        assert self._queue_fd is not None
        try:
            pfd = os.open(
                pred, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=self._queue_fd
            )
        except OSError:
            return  # gone: released (and swept) already
        try:
            woken = None
            hung_up = False
            if stat.S_ISFIFO(os.fstat(pfd).st_mode):
                import select  # only a waiter needs it: off an uncontended command's start-up

                woken = select.poll()
                woken.register(pfd, select.POLLIN)
            while not _flock_nb(pfd, fcntl.LOCK_SH):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._timeout_error()
                if woken is None or hung_up:  # hung up, yet the flock held: never spin
                    time.sleep(QUEUE_POLL)
                    continue
                # Its close wakes us (POLLHUP, the flock already dropped).
                events = woken.poll(math.ceil(min(left, RELEASE_CHECK) * 1000))
                if events and events[0][1] & select.POLLIN:
                    with contextlib.suppress(OSError):
                        os.read(pfd, 512)  # a byte written before the close: not the close
                elif events:
                    hung_up = True
        finally:
            # We are its only successor: nobody else will remove it.
            fsutil.unlink_quiet(self._queue_fd, pred)
            os.close(pfd)

    def _leave_queue(self) -> None:
        nfd, name = self._node_fd, self._node_name
        self._node_fd, self._node_name = None, ""
        try:
            if nfd is not None and self._queue_fd is not None:
                try:
                    tfd = self._open_tail()
                except Exception:
                    tfd = -1
                if tfd >= 0:
                    try:
                        self._lock_tail(tfd, time.monotonic() + _LEAVE_TIMEOUT)
                        if os.pread(tfd, 64, 0).decode("ascii", "replace").strip() == name:
                            os.pwrite(tfd, b" " * _NODE_LEN, 0)  # the queue is empty again
                            fsutil.unlink_quiet(self._queue_fd, name)
                    except Exception:
                        pass  # our node stays behind: harmless, and swept later
                    finally:
                        os.close(tfd)
        finally:
            try:
                if nfd is not None:
                    os.close(nfd)  # drops our flock, then wakes the successor (POLLHUP)
            finally:
                self._close_queue()

    def _close_queue(self) -> None:
        if self._queue_fd is not None:
            os.close(self._queue_fd)
            self._queue_fd = None

    def _shown(self, name: str) -> str:
        return os.path.join(self.root, QUEUE_DIR, name)

    # -- maintenance ----------------------------------------------------------------

    def sweep(self, root_fd: int) -> int:
        """Remove queue nodes left by killed processes; call with the store lock held."""
        qfd = fsutil.open_subdir(root_fd, QUEUE_DIR, self._shown(QUEUE_DIR), create=False)
        if qfd is None:
            return 0
        removed = 0
        try:
            now = time.time()
            for name in os.listdir(qfd):
                if not name.startswith(NODE_PREFIX) or name == self._node_name:
                    continue
                try:
                    fd = os.open(
                        name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=qfd
                    )
                except OSError:
                    continue
                try:
                    if now - os.fstat(fd).st_mtime < _STALE_NODE_AGE:
                        continue
                    if _flock_nb(fd, fcntl.LOCK_EX):  # nobody holds it: its owner is gone
                        removed += fsutil.unlink_quiet(qfd, name)
                finally:
                    os.close(fd)
        finally:
            os.close(qfd)
        return removed
