"""Shared machinery of the fault tests (tests/faults/).

- `invoke(store, *argv)`: the real `ledger` entry point (`app.run`: the fast
  path and the Typer app) in this process, inside typer's CliRunner
  isolation, against a real JSON store directory. About 10 ms a command, so
  a test can sweep hundreds of fault points.
- `OsFaults`: an interposer on the `os` functions the store's write path goes
  through (`open`, `write`, `fsync`, `replace`, `close`). It counts calls,
  fails the k-th call of one of them (once, or from then on), shortens
  writes, and SIGKILLs the process at the n-th occurrence of a named step of
  the write path. The store looks these functions up on `os` at call time,
  so nothing in `ledger_cli` needs a hook for it.
- `logical_state`, `files`, `temps`: what a store holds, for before/after
  comparisons.
"""

from __future__ import annotations

import collections
import dataclasses
import errno
import json
import os
import re
import signal
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ledger_cli.cli import app
from ledger_cli.engine.wire.encode import record_to_json
from ledger_cli.stores.jsonfile import JsonFileStore, fsutil, swap

T0 = "2026-01-02T03:04:05Z"
ROOT = Path(__file__).resolve().parent.parent
CLEAN_ENV: dict[str, str | None] = {
    name: None
    for name in (
        "LEDGER_STORE",
        "LEDGER_ACTOR",
        "LEDGER_NOW",
        "LEDGER_DEBUG",
        "LEDGER_ALLOW_NETWORK_FS",
        "NO_COLOR",
    )
}


@dataclasses.dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    def one_line_error(self) -> str:
        """The single stderr line of a refused command (asserts the shape)."""
        assert "Traceback" not in self.stderr, self.stderr
        lines = self.stderr.splitlines()
        assert len(lines) == 1, f"want one stderr line, got {self.stderr!r}"
        return lines[0]


def invoke(
    store: str | Path,
    *argv: str,
    input: bytes | str | None = None,
    now: str | None = T0,
    actor: str = "tester",
    env: Mapping[str, str | None] | None = None,
) -> Outcome:
    """Run `ledger --store STORE --actor ACTOR [--now NOW] ARGV…` in this process;
    return once its retired files are unlinked too (swap.py), as the command's
    own process exits after them: its calls all happen inside the caller's
    OsFaults."""
    args = ["--store", str(store), "--actor", actor]
    if now is not None:
        args += ["--now", now]
    args += list(argv)
    full_env = dict(CLEAN_ENV)
    full_env.update(env or {})
    with CliRunner().isolation(input=input, env=full_env) as (out, err, _):
        try:
            code = app.run(args)
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            swap.wait_retired()
        sys.stdout.flush()
        sys.stderr.flush()
        return Outcome(
            code,
            out.getvalue().decode("utf-8", "replace"),
            err.getvalue().decode("utf-8", "replace"),
        )


# -- what a store holds -------------------------------------------------------------

LOCK_INFRA = ("ledger.lock", "queue")


def files(root: str | Path) -> dict[str, bytes]:
    """Every regular file under the store (relative path -> bytes), except the lock
    file and the lock queue, which every command touches. This process's own
    retired files are unlinked first (swap.py: a thread unlinks them)."""
    swap.wait_retired()
    root = Path(root)
    out: dict[str, bytes] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] in LOCK_INFRA:
            continue
        if p.is_file() and not p.is_symlink():
            out[str(rel)] = p.read_bytes()
    return out


def temps(root: str | Path) -> list[str]:
    """Temporary files left anywhere in the store (after this process's own
    retired files are unlinked: swap.py)."""
    swap.wait_retired()
    root = Path(root)
    if not root.exists():
        return []
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(fsutil.TEMP_SUFFIX)
    )


State = tuple[tuple[str, ...], tuple[str, ...]]


def logical_state(root: str | Path) -> State:
    """(every record as wire JSON, every history line) as a fresh process sees them:
    opening replays a journal a failure left, range() validates every record.
    A record's queue and schedule (its side files) follow the records, one
    `{"Key":…,"Queue":…}` or `{"Key":…,"Schedule":[not-before, priority]}` each;
    a side file of a key without a record is no task's, and left out."""
    if not Path(root).exists():
        return ((), ())
    store = JsonFileStore(root)
    records = tuple(record_to_json(r) for r in store.range())
    keys = {r.key for r in store.range()}
    sides = [
        json.dumps({"Key": key, "Queue": queue}, separators=(",", ":"))
        for key, queue in sorted(store.queues().items())
        if key in keys
    ]
    sides += [
        json.dumps({"Key": key, "Schedule": [str(nb), prio]}, separators=(",", ":"))
        for key, (nb, prio) in sorted(store.schedules().items())
        if key in keys
    ]
    history = tuple(e.to_json() for e in store.read_history())
    return (*records, *sides), history


def unblocked_note(state: State) -> State:
    """A retry's un-block says who un-blocked (`by retry of KEY`); doctor's repair does not."""
    records, history = state
    return records, tuple(re.sub(r" by retry of [^\"]*", "", line) for line in history)


def between_blocks(
    root: Path, before: State, after: State, seen: Callable[[State], State] = lambda s: s
) -> bool:
    """Whether the store holds a command cut between its blocks: some of its
    blocks landed (more than `before`), `doctor` reports the rest as escaped or
    orphaned blocks, `claim --next` hands out no dependent of a failure, and
    `doctor --fix` then leaves exactly `after` (the whole command). `seen`
    leaves out what the test itself wrote since (a probe record).

    A command that commits in blocks (docs/design.md §5.4: a failed completion's blocking
    walk, a retry's un-blocking, a cancel) may be cut between two of them;
    this is what such a cut must leave."""
    if seen(logical_state(root)) == before:
        return False
    report = invoke(root, "doctor")
    if "escaped block" not in report.stdout and "orphaned block" not in report.stdout:
        return False
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.invariants import failure_roots
    from ledger_cli.engine.ready import ready_iter

    store = JsonFileStore(root)
    behind_a_failure = failure_roots(store.range())
    handed = [
        r.key for r in ready_iter(store, store.load, Instant.parse(T0)) if r.key in behind_a_failure
    ]
    assert handed == [], f"claim --next would hand out {handed}"
    fixed = invoke(root, "doctor", "--fix")
    assert fixed.code == 0, fixed.stdout
    return unblocked_note(seen(logical_state(root))) == unblocked_note(after)


# -- the os interposer ----------------------------------------------------------------

FUNCS = ("open", "write", "fsync", "replace", "close")
"""The calls every write makes (a spare file's os.link is interposed too, but
only a run of large batches makes it: see tests/storage/test_jsonfile_bulk.py)."""

STEPS = (
    "temp-created", "mid-write", "file-fsynced", "linked", "renamed", "dir-fsynced", "syncfs",
)  # fmt: skip
"""Named points of the write path, in the order a durable replace passes them:
a temporary file was created; a write is half done; a regular file (a temporary
file, or the history) was fsynced; a spare file (spares.py) was linked under its
temporary name; a rename landed; a directory was fsynced (what makes a rename
durable); a syncfs(2) returned (large batches)."""


class OsFaults:
    """Interpose on os.open/write/fsync/replace/close/link, fsutil.sync_filesystem
    and swap.unsynced (an unsynced file put in place: counted as a "replace").

    - `fail=(name, k)`: the k-th call of os.<name> raises OSError(`err`) — only
      that call, or with `persistent` that call and every later one. A failing
      close closes the descriptor first (as Linux does) and then reports it.
    - `short=n`: every os.write writes at most n bytes (a short write).
    - `kill_at=(step, n)`: SIGKILL this process at the n-th occurrence of
      `step` (one of STEPS); "mid-write" writes half of the buffer first.
    `counts` and `steps` count calls and step occurrences seen so far.
    `fsync_retried` lists files fsynced again after an fsync of theirs failed.
    """

    def __init__(
        self,
        fail: tuple[str, int] | None = None,
        *,
        persistent: bool = False,
        err: int = errno.EIO,
        short: int | None = None,
        kill_at: tuple[str, int] | None = None,
    ) -> None:
        self.fail = fail
        self.persistent = persistent
        self.err = err
        self.short = short
        self.kill_at = kill_at
        self.counts: collections.Counter[str] = collections.Counter()
        self.steps: collections.Counter[str] = collections.Counter()
        self.injected = 0
        self.failed_fsync: set[tuple[int, int]] = set()
        self.fsync_retried: list[tuple[int, int]] = []
        self._real: dict[str, Any] = {}

    # -- helpers ---------------------------------------------------------------

    def _should_fail(self, name: str) -> bool:
        self.counts[name] += 1
        if self.fail is None or self.fail[0] != name:
            return False
        n, k = self.counts[name], self.fail[1]
        hit = n == k or (self.persistent and n > k)
        if hit:
            self.injected += 1
        return hit

    def _error(self, name: str) -> OSError:
        return OSError(self.err, f"{os.strerror(self.err)} (injected into os.{name})")

    def _step(self, step: str) -> bool:
        """Count an occurrence of `step`; True when this one is the kill point."""
        self.steps[step] += 1
        return self.kill_at is not None and self.kill_at == (step, self.steps[step])

    @staticmethod
    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)
        while True:  # pragma: no cover - the signal is synchronous
            pass

    # -- wrappers --------------------------------------------------------------

    def _open(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if self._should_fail("open"):
            raise self._error("open")
        fd: int = self._real["open"](path, flags, *args, **kwargs)
        if (
            isinstance(path, str)
            and path.endswith(fsutil.TEMP_SUFFIX)
            and self._step("temp-created")
        ):
            self.die()
        return fd

    def _write(self, fd: int, data: Any) -> int:
        if self._should_fail("write"):
            raise self._error("write")
        view = memoryview(data)
        if self._step("mid-write"):
            half = len(view) // 2
            if half:
                self._real["write"](fd, view[:half])
            self.die()
        if self.short is not None:
            view = view[: self.short]
        written: int = self._real["write"](fd, view)
        return written

    def _fsync(self, fd: int) -> None:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        if ident in self.failed_fsync:
            self.fsync_retried.append(ident)
        if self._should_fail("fsync"):
            self.failed_fsync.add(ident)
            raise self._error("fsync")
        self._real["fsync"](fd)
        if self._step("dir-fsynced" if stat.S_ISDIR(st.st_mode) else "file-fsynced"):
            self.die()

    def _replace(self, *args: Any, **kwargs: Any) -> None:
        if self._should_fail("replace"):
            raise self._error("replace")
        self._real["replace"](*args, **kwargs)
        if self._step("renamed"):
            self.die()

    def _swap(self, *args: Any) -> None:
        """swap.unsynced: an unsynced file put in place (by rename or exchange)."""
        if self._should_fail("replace"):
            raise self._error("replace")
        self._real["swap"](*args)
        if self._step("renamed"):
            self.die()

    def _link(self, *args: Any, **kwargs: Any) -> None:
        if self._should_fail("link"):
            raise self._error("link")
        self._real["link"](*args, **kwargs)
        if self._step("linked"):
            self.die()

    def _close(self, fd: int) -> None:
        if self._should_fail("close"):
            self._real["close"](fd)
            raise self._error("close")
        self._real["close"](fd)

    def _syncfs(self, fd: int, shown: str) -> None:
        self._real["syncfs"](fd, shown)
        if self._step("syncfs"):
            self.die()

    # -- context -----------------------------------------------------------------

    def __enter__(self) -> OsFaults:
        wrappers: dict[str, Callable[..., Any]] = {
            "open": self._open,
            "write": self._write,
            "fsync": self._fsync,
            "replace": self._replace,
            "close": self._close,
            "link": self._link,
        }
        for name, wrapper in wrappers.items():
            self._real[name] = getattr(os, name)
            setattr(os, name, wrapper)
        self._real["syncfs"] = fsutil.sync_filesystem
        fsutil.sync_filesystem = self._syncfs  # type: ignore[assignment]
        self._real["swap"] = swap.unsynced
        swap.unsynced = self._swap  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        for name in (*FUNCS, "link"):
            setattr(os, name, self._real[name])
        fsutil.sync_filesystem = self._real["syncfs"]
        swap.unsynced = self._real["swap"]


def walk_paths(root: Path) -> Iterator[Path]:
    yield root
    yield from sorted(root.rglob("*"))


def fake_meminfo(directory: Path, dirty_kib: int) -> str:
    """A /proc/meminfo reporting `dirty_kib` KiB dirty and nothing under
    writeback, for `durability.MEMINFO`: the syncfs(2)-or-fsync(2) choice
    then no longer depends on what the machine has dirty."""
    path = directory / f"meminfo-{dirty_kib}"
    path.write_text(f"Dirty: {dirty_kib} kB\nWriteback: 0 kB\n")
    return str(path)


def unapplied(root: str | Path) -> bool:
    """A committed write not applied yet: journal.json, or wal.log frames past
    what wal.applied notes (stores/jsonfile/wal.py)."""
    from ledger_cli.stores.jsonfile import wal

    if (Path(root) / "journal.json").exists():
        return True
    fd = os.open(root, os.O_RDONLY)
    try:
        return wal.pending(str(root), fd) is not None
    finally:
        os.close(fd)
