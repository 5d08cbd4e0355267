"""`ledger run`'s output capture (docs/design.md §7.1): tee the command's stdout and
stderr to the runner's own, keep the last `--keep-output` bytes, and flush
them to the store while the command runs.

- The command writes into two pipes. One pump thread reads both (poll), and
  writes each chunk at once, unchanged, to the runner's stdout or stderr
  (both to its stderr under `--json`: AttemptRecorder's `out_fd`) (so
  cron mail, pipes and `2>&1` see what they saw before, buffered no more than
  by a pipe), then appends it to one tail: interleaved in the order the
  chunks arrived, bytes as bytes. The tail holds the chunks as read (no copy
  per chunk) and drops whole ones from the front once the rest holds the kept
  size; a read is at most 1 MiB: memory is bounded by the kept size plus one
  read, whatever is printed.
- A reader gone from the runner's stdout or stderr (a broken pipe:
  `ledger run … -- yes | head`) is the command's to see, as without `run` in
  between: the read end of each pipe copied there is closed, so the
  command's next write to it gets SIGPIPE (EPIPE when it ignores it). Any
  other failure to write there (a full disk) stops the copy, not the capture.
- A flusher thread (started with the first output) joins the tail (under a
  short in-memory lock) about every half second, when anything new arrived,
  and saves it into the attempt with `AttemptLog.save_attempt`: one short
  write, no store lock held while the command runs, and the pump never
  waits for the store (a slow store delays only what others see). A failed
  save is one warning line on stderr (the first of a run of failures) and
  is tried again at the next tick.
- `finish()` (after the command exited) drains the pipes to their end (a
  daemon the command left behind holding them is not waited for beyond a
  moment); the caller then saves the end and the whole tail, in the
  completion's unit (cli/commands/run/attempts.py).
"""

from __future__ import annotations

import os
import select
import stat
import threading
from typing import TYPE_CHECKING

from ledger_cli.cli import output

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.attempts import Attempt, AttemptLog

DEFAULT_KEEP = 1 << 20
MAX_KEEP = 64 << 20
FLUSH_EVERY = 0.5
"""Seconds between flushes while the command writes (at most 1 s: docs/design.md §7.1)."""
READ_SIZE = 1 << 20
DRAIN_GRACE = 1.0
"""After the command exited, how long its pipes may stay open (a daemon it left)."""
PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031


class Tail:
    """The last `keep` bytes of everything appended, and how many there were.

    Chunks are kept as they were read (no copy per chunk): whole chunks are
    dropped from the front once the rest still holds `keep` bytes, so memory
    is at most `keep` plus one chunk; the bytes are joined only for a flush."""

    def __init__(self, keep: int) -> None:
        import collections

        self.keep = keep
        self.chunks: collections.deque[bytes] = collections.deque()
        self.held = 0
        self.total = 0
        self.lock = threading.Lock()
        self.version = 0

    def append(self, chunk: bytes) -> None:
        with self.lock:
            self.total += len(chunk)
            self.version += 1
            self.chunks.append(chunk)
            self.held += len(chunk)
            chunks, keep = self.chunks, self.keep
            while self.held - len(chunks[0]) >= keep:
                self.held -= len(chunks.popleft())

    def snapshot(self) -> tuple[int, bytes, int]:
        """(version, kept bytes, total written)."""
        with self.lock:
            data = b"".join(self.chunks)
            version, total = self.version, self.total
        return version, data[len(data) - self.keep :] if len(data) > self.keep else data, total


class Capture:
    """One attempt's capture: `popen_kwargs()` for the child, then `start()`,
    and `finish()` once the child has exited."""

    def __init__(
        self,
        keep: int,
        log: AttemptLog,
        att: Attempt,
        out_fd: int = 1,
        err_fd: int = 2,
    ) -> None:
        self.tail = Tail(keep)
        self.log = log
        self.att = att
        self.dest: dict[int, int] = {}  # read end -> destination fd
        self.out_fd, self.err_fd = out_fd, err_fd
        self._child_fds: list[int] = []
        self._read_fds: list[int] = []
        self._stop = threading.Event()
        self._drained = threading.Event()
        self._saved_version = 0
        self._failing = False
        self.recording = False
        """Set once the attempt exists in the store (its `n` is known)."""
        self.save_lock = threading.Lock()
        """Held across each save; once `closed` (the final save began), no flush
        saves any more: a late flush never overwrites the attempt's end."""
        self.closed = False
        self._flusher_started = False
        self.warn: Callable[[str], None] = output.diag
        self._fds = {fd for fd in (out_fd, err_fd) if _is_stream_fd(fd)}
        """The destinations written to by descriptor (sys.stdout/stderr use them)."""
        for dest in (out_fd, err_fd):
            r, w = os.pipe()
            try:
                import fcntl

                fcntl.fcntl(w, _F_SETPIPE_SZ, PIPE_SIZE)
            except OSError:
                pass  # the default size is fine
            self.dest[r] = dest
            self._read_fds.append(r)
            self._child_fds.append(w)

    def popen_kwargs(self) -> dict[str, int]:
        return {"stdout": self._child_fds[0], "stderr": self._child_fds[1]}

    def start(self) -> None:
        """After Popen: close the child's ends here, start the threads."""
        for fd in self._child_fds:
            os.close(fd)
        self._child_fds = []
        # The flusher starts with the first output; `finish` waits for what
        # it read through `_drained`.
        from ledger_cli.cli.commands.run.threads import spawn

        spawn(self._pump_loop)

    def abandon(self) -> None:
        """The command could not be started: close everything."""
        for fd in self._child_fds + self._read_fds:
            os.close(fd)
        self._child_fds = self._read_fds = []

    # -- the pump ----------------------------------------------------------------

    def _pump_loop(self) -> None:
        poller = select.poll()
        open_fds = set(self._read_fds)
        for fd in open_fds:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        broken: set[int] = set()
        try:
            while open_fds:
                for fd, _ev in poller.poll(200):
                    if fd not in open_fds:
                        continue  # closed by a broken pipe earlier in this round
                    dest = self.dest[fd]
                    while True:  # a full read: more is likely waiting (no poll between)
                        try:
                            chunk = os.read(fd, READ_SIZE)
                        except OSError:
                            chunk = b""
                        if not chunk:
                            poller.unregister(fd)
                            open_fds.discard(fd)
                            break
                        if dest not in broken:
                            try:
                                self._emit(dest, chunk)
                            except (BrokenPipeError, output.ReaderGone):
                                # Our reader is gone (`ledger run … | head`): so is the
                                # command's, as without `run` in between (SIGPIPE, EPIPE).
                                for gone in self._close_to(dest):
                                    poller.unregister(gone)
                                    open_fds.discard(gone)
                            except (OSError, ValueError):
                                broken.add(dest)  # our own stdout fails: keep capturing
                        self.tail.append(chunk)
                        if not self._flusher_started:
                            self._flusher_started = True  # output came: flush while it runs
                            threading.Thread(
                                target=self._flush_loop, name="ledger-flush", daemon=True
                            ).start()
                        if len(chunk) < READ_SIZE or fd not in open_fds:
                            break
                if self._stop.is_set() and open_fds:
                    break  # the grace after the command's exit is over
        finally:
            for fd in self._read_fds:
                os.close(fd)
            self._read_fds = []
            self._drained.set()

    def _close_to(self, dest: int) -> list[int]:
        """Close the read end of every pipe copied to `dest` (a broken pipe):
        the command's next write to it fails, EPIPE or SIGPIPE. The fds closed."""
        gone = [fd for fd in self._read_fds if self.dest[fd] == dest]
        for fd in gone:
            self._read_fds.remove(fd)
            os.close(fd)
        return gone

    def _emit(self, dest: int, chunk: bytes) -> None:
        """Write to the runner's own stdout (1) or stderr (2): its descriptor,
        or, when it has none (an embedding that swapped sys.stdout), the stream."""
        if dest in self._fds:
            _write_all(dest, chunk)
            return
        import sys

        stream = sys.stdout if dest == self.out_fd else sys.stderr
        stream.flush()
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            buffer.write(chunk)
            buffer.flush()
        else:
            stream.write(chunk.decode("utf-8", "replace"))
            stream.flush()

    # -- the flusher ---------------------------------------------------------------

    def _flush_loop(self) -> None:
        while not self._drained.wait(FLUSH_EVERY):
            self.flush()

    def flush(self) -> None:
        """Save the tail when anything new arrived (a warning when it fails)."""
        version, kept, total = self.tail.snapshot()
        if version == self._saved_version or not self.recording:
            return
        att = self.att.copy()
        att.output_bytes, att.kept_bytes = total, len(kept)
        try:
            with self.save_lock:
                if self.closed:
                    return
                self.log.save_attempt(att, kept)
        except Exception as exc:
            if not self._failing:
                self.warn(
                    output.within(
                        f"recording the output of {self.att.key}", f"{exc} (the command goes on)"
                    )
                )
            self._failing = True
            return
        self._failing = False
        self._saved_version = version

    def finish(self) -> bytes:
        """After the command exited: read its pipes to the end (a moment at
        most), stop the pump; the kept bytes, with `att` counted. (The flusher
        stops by itself; a save of its still in flight is not waited for here.)"""
        if not self._drained.wait(DRAIN_GRACE):
            self._stop.set()
            self._drained.wait()
        _version, kept, total = self.tail.snapshot()
        self.att.output_bytes, self.att.kept_bytes = total, len(kept)
        return kept


def _is_stream_fd(fd: int) -> bool:
    import sys

    stream = sys.stdout if fd == 1 else sys.stderr if fd == 2 else None
    if stream is None:
        return True
    try:
        return bool(stream.fileno() == fd)
    except (AttributeError, OSError, ValueError):
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1000,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1000**2,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1000**3,
    "gib": 1 << 30,
}


def parse_size(text: str, what: str = "--keep-output") -> int:
    """`1MiB`, `512KiB`, `64MiB`, `1M`, `4096`, `0`: bytes, 0..MAX_KEEP."""
    from ledger_cli.cli.inputs import InputError

    raw = text.strip()
    digits = raw
    unit = ""
    for i, c in enumerate(raw):
        if not c.isdigit():
            digits, unit = raw[:i], raw[i:].strip().lower()
            break
    if not digits.isascii() or not digits.isdigit() or unit not in _UNITS:
        raise InputError(
            f"ledger: {what} {text!r} is not a size (e.g. 0, 4096, 512KiB, 1MiB, 64MiB)"
        )
    size = int(digits) * _UNITS[unit]
    if size > MAX_KEEP:
        raise InputError(f"ledger: {what} {text!r} is more than the most, 64MiB")
    return size


def readers_gone() -> bool:
    """Whether the reader of our stdout or stderr, a pipe, is gone: the write
    end of a pipe whose read end is closed polls POLLERR. Only a pipe counts,
    as only a broken pipe passes on to the command (a terminal that hung up
    polls POLLERR too, and its EIO only stops the copy: see the module's note)."""
    poller = select.poll()
    for fd in (1, 2):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                poller.register(fd, select.POLLOUT)
        except OSError:  # closed: nothing reads it, nothing to stop for
            continue
    return any(events & select.POLLERR for _, events in poller.poll(0))
