"""What `ledger run` records of each start of its command (docs/design.md §7.1, §7.4).

`AttemptRecorder` is the supervisor's one hook per attempt:

    rec = AttemptRecorder(session, key, fence, owner, try_, keep)
    proc = Popen(cmd, **rec.popen_kwargs())   # pipes when output is kept
    rec.started(proc.pid)                     # the attempt in the store: n
    ...                                       # the capture flushes meanwhile
    rec.ended(rc, timed_out)                  # end + whole tail, durable

The host recorded is the machine's name, or LEDGER_HOST when set (a container's
random name is no help to a person). With `--now` the clock is fixed: the
attempt starts and ends at that instant.

`ended` runs before the completion is written, so a task that `ledger run`
completed always has its whole kept output. Every failure to record is one
warning line on stderr; the command, the lease and the completion go on.
"""

from __future__ import annotations

import functools
import os
import time
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.engine.attempts import Attempt, seconds_text, signal_name
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    import threading
    from typing import Any

    from ledger_cli.cli.commands.run.capture import Capture
    from ledger_cli.cli.context import Session
    from ledger_cli.engine.attempts import AttemptLog


class AttemptRecorder:
    def __init__(
        self, session: Session, key: str, fence: int, owner: str, try_: int, keep: int
    ) -> None:
        from ledger_cli.engine.instant import Instant

        self.s = session
        self.keep = keep
        self.att = Attempt(key, fence=fence, try_=try_, owner=owner, host=_host(), started="")
        self._fixed = session.settings.now is not None
        """--now fixes the clock: the attempt starts and ends at that instant."""
        self._instant = Instant
        self._mono = 0.0
        self.log: AttemptLog | None = None
        self.capture: Capture | None = None
        self.recorded = False
        self.warned = False
        self._final: tuple[Attempt, bytes | None] | None = None
        """The end and the tail, once the command exited, until saved."""
        self._starter: threading.Event | None = None
        """Set once the attempt's start (or its pid) is recorded (or failed to be)."""
        self._pid_due = False
        """The pid of an attempt the claim started is still to be noted (`outlived`)."""
        try:
            from ledger_cli.stores.attemptlog import attempt_log

            self.log = attempt_log(session.store)
        except Exception as exc:
            self._warn("recording the run", exc)
        # Under --json, stdout carries only the result's JSON (a script pipes it
        # to jq): the command's stdout goes to our stderr instead.
        self.out_fd = 2 if session.settings.json else 1
        if keep > 0:
            from ledger_cli.cli.commands.run.capture import Capture

            sink: Any = self.log if self.log is not None else _NoLog()
            self.capture = Capture(keep, sink, self.att, out_fd=self.out_fd)
            self.capture.warn = self._capture_warned

    def _warn(self, what: str, exc: BaseException) -> None:
        """One warning line per attempt, whatever else fails after it."""
        if self.warned:
            return
        self.warned = True
        output.diag(output.within(f"{what} of {self.att.key}", f"{exc} (the command goes on)"))

    def _capture_warned(self, line: str) -> None:
        if not self.warned:
            self.warned = True
            output.diag(line)

    def popen_kwargs(self) -> dict[str, Any]:
        if self.capture is not None:
            return self.capture.popen_kwargs()
        return {"stdout": self.out_fd} if self.out_fd != 1 else {}

    def not_started(self) -> None:
        if self.capture is not None:
            self.capture.abandon()
        if self.att.n > 0:  # started with the claim, but no command ran
            drop_begun(self.s, self.att.key, self.att.n)

    def started(self, pid: int) -> None:
        """The command runs: start the capture, and record the attempt (its
        `n`) in a thread of its own: the supervisor never waits on the store
        while the command runs (a store outage delays the record, not the
        lease's hard stop). An attempt the claim's unit started (`begun`)
        only has its pid noted, once the command outlives a poll (`outlived`):
        a short command's end carries its pid, so draining short commands
        writes nothing between a task's claim and its completion (SQL's
        note_pid is a commit, JSON's a file beside the attempt)."""
        self._mono = time.monotonic()
        self.att.pid = pid
        begun = self.att.n > 0  # started in the claim's unit (`ClaimStart`)
        if not begun:
            self.att.started = str((self.s.now() if self._fixed else self._instant.now()).utc())
        if self.capture is not None:
            self.capture.start()  # the pump first: the command never waits on the store
        if self.log is None:
            return
        if begun:
            self.recorded = True
            if self.capture is not None:
                self.capture.recording = True
            self._pid_due = True
            return
        from ledger_cli.cli.commands.run.threads import spawn

        self._starter = spawn(self._start)

    def outlived(self) -> None:
        """The command outlived the supervisor's first poll: note its pid now,
        in a thread of its own, when `started` left that for later."""
        if not self._pid_due:
            return
        self._pid_due = False
        from ledger_cli.cli.commands.run.threads import spawn

        self._starter = spawn(self._note_pid)

    def begun(self, n: int, started: str) -> None:
        """The attempt was started in the claim's unit as `n` (`ClaimStart`):
        once the command runs only its pid is noted."""
        self.att.n, self.att.started = n, started

    def _note_pid(self) -> None:
        assert self.log is not None
        self.recorded = True
        if self.capture is not None:
            self.capture.recording = True
        try:
            self.log.note_pid(self.att.copy())  # type: ignore[attr-defined]
        except Exception as exc:
            self._warn("recording the run", exc)

    def _start(self) -> None:
        assert self.log is not None
        try:
            self.att.n = self.log.start_attempt(self.att.copy())
        except Exception as exc:
            self._warn("recording the run", exc)
            return
        self.recorded = True
        if self.capture is not None:
            self.capture.recording = True

    def ended(self, rc: int | None, timed_out: bool = False, limit: float = 30.0) -> None:
        """The command exited (`rc` as Popen gives it: -N for signal N; None:
        unknown). Drain the capture and stop its flushes (waiting for a flush
        in flight up to `limit` seconds); the end and the whole tail are then
        saved by `save_end` (the completion's unit calls it, so they are
        durable with the completion) or `save_now` (no completion follows)."""
        took = time.monotonic() - self._mono
        deadline = time.monotonic() + max(limit, 0.0)
        kept: bytes | None = None
        if self.capture is not None:
            kept = self.capture.finish()
        att = self.att
        if rc is not None and rc < 0:
            att.exit, att.signal = None, signal_name(-rc)
        elif rc is not None:
            att.exit, att.signal = rc, None
        att.timed_out = timed_out
        start = self._instant.parse(att.started)
        att.ended = str(start if self._fixed else start.add_ns(int(took * 1e9)))
        starter = self._starter
        if starter is not None:
            starter.wait(max(deadline - time.monotonic(), 0.0))
        if self.capture is not None:
            lock = self.capture.save_lock
            if lock.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
                self.capture.closed = True  # no flush after the end
                lock.release()
            else:
                self.capture.closed = True
                self._warn("recording the output", TimeoutError("the store did not answer"))
                return
        if self.recorded and self.log is not None:
            self._final = (att.copy(), kept)

    def save_end(self) -> None:
        """Save the end (once), inside the caller's unit when it has one: in a
        nested batch (a savepoint), so that a refusal of this write alone is one
        warning and leaves the rest of the unit (the completion) to go on."""
        final = self._final
        if final is None or self.log is None:
            return
        try:
            with self.s.store.batch():
                self.log.save_attempt(*final)
        except StoreError as exc:
            if _is_outage(exc):
                raise  # the unit is tried again (cli/outage.py), this save with it
            self._warn("recording the output", exc)
            self._final = None
        # Else kept until the unit is known to have committed: a unit tried
        # again saves it again, and a refused completion (a lost lease) rolls
        # it back, to be saved on its own (`save_now`).

    def save_now(self, limit: float) -> None:
        """Save the end where no completion follows (a retry, a lost lease, a
        signal), waiting for the store up to `limit` seconds."""
        import threading

        if self._final is None:
            return
        saver = threading.Thread(target=self._save_quietly, name="ledger-attempt", daemon=True)
        saver.start()
        saver.join(max(limit, 0.0))
        if saver.is_alive():
            self._warn("recording the output", TimeoutError("the store did not answer in time"))

    def _save_quietly(self) -> None:
        final = self._final
        if final is None or self.log is None:
            return
        try:
            self.log.save_attempt(*final)
            self._final = None
        except Exception as exc:
            self._warn("recording the output", exc)

    def summary(self) -> str:
        """`exit 1 after 0.4s`, `SIGKILL after 3.0s`, `timed out after 10.0s`."""
        took = self.att.seconds()
        after = f" after {seconds_text(took)}" if took is not None else ""
        return f"{self.att.outcome()}{after}"

    def to_obj(self) -> dict[str, Any]:
        return self.att.shown_obj()


class ClaimStart:
    """Called in the claim's unit once it claimed (commands/claim.py): records the
    first attempt's start there, on a store whose attempts commit with its
    batch (JSON: one journal, one sync for the claim and the start), before
    the command's pid is known (`AttemptRecorder.begun`, then `note_pid`).
    `take(key, fence)`: (n, started) of that claim, None when it was not
    recorded this way (the runner then records the start once the command
    runs, as before)."""

    def __init__(self, session: Session, owner: str) -> None:
        self.s, self.owner = session, owner
        self.got: tuple[str, int, int, str] | None = None
        """(key, fence, n, started) of the last call's start."""

    def take(self, key: str, fence: int) -> tuple[int, str] | None:
        """The start recorded with the claim of `key` at `fence` (once): a
        unit rolled back and tried again may have called this for another."""
        got, self.got = self.got, None
        if got is None or got[:2] != (key, fence):
            return None
        return got[2], got[3]

    def __call__(self, rec: Any, fence: int) -> None:
        from ledger_cli.engine.instant import Instant
        from ledger_cli.stores.attemptlog import attempt_log

        self.got = None
        try:
            log = attempt_log(self.s.store)
        except StoreError:
            return
        if not getattr(log, "folds_into_batch", False):
            return
        fixed = self.s.settings.now is not None
        started = str((self.s.now() if fixed else Instant.now()).utc())
        att = Attempt(rec.key, fence=fence, try_=1, owner=self.owner, host=_host(), started=started)
        try:
            with self.s.store.batch():  # a savepoint: a refusal leaves the claim
                n = log.start_attempt(att)
        except StoreError as exc:
            if _is_outage(exc):
                raise  # the claim's unit is tried again, this start with it
            return
        self.got = (rec.key, fence, n, started)


def drop_begun(session: Session, key: str, n: int) -> None:
    """Remove attempt n, which a claim's unit started (`ClaimStart`), when no
    command ran for it: an attempt is a start of the command (docs/design.md §7.1)."""
    from ledger_cli.stores.attemptlog import attempt_log

    try:
        attempt_log(session.store).drop_attempt(key, n)  # type: ignore[attr-defined]
    except Exception as exc:  # one warning, as every failure to record
        output.diag(output.within(f"removing attempt {n} of {key}", str(exc)))


@functools.cache
def _host() -> str:
    """The runner's host name (LEDGER_HOST when set), asked once a process."""
    return os.environ.get("LEDGER_HOST") or os.uname().nodename


class _NoLog:
    """Where a capture saves when the store keeps no attempts: nowhere."""

    def save_attempt(self, att: Attempt, output: bytes | None) -> None:
        pass


def completion_note(rec: AttemptRecorder | None) -> str:
    """What a `ledger.completed` line written by `run` adds to its text."""
    if rec is None or not rec.att.started:
        return ""
    n = f", attempt {rec.att.n}" if rec.att.n else ""
    return f" ({rec.summary()}{n})"


def _is_outage(exc: BaseException) -> bool:
    from ledger_cli.cli.outage import is_outage

    return bool(is_outage(exc))


def annotate_completion(session: Session, key: str, rec: AttemptRecorder | None) -> None:
    """Inside the completion's unit: the attempt's end is saved with it
    (`save_end`), and its `ledger.completed` line carries the exit, the
    duration and the attempt (`… by w1 (exit 1 after 0.4s, attempt 2)`)."""
    if rec is not None:
        rec.save_end()
    note = completion_note(rec)
    if not note:
        return
    from ledger_cli.engine.events import COMPLETED, Event

    events = session.recorder.events
    for i in range(len(events) - 1, -1, -1):
        ev = events[i]
        if ev.name == COMPLETED and ev.key == key:
            events[i] = Event(ev.name, ev.key, ev.data + note)
            return
