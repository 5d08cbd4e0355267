"""`ledger run`'s supervisor: one claimed task's command, run under its lease.

- The command runs in its own process group with LEDGER_KEY, LEDGER_FENCE,
  LEDGER_TASK (the task as JSON) and LEDGER_ATTEMPT in its environment.
- The lease is kept by cli/commands/run/leasekeeper.py. A refused renewal
  (the lease is lost) stops the process group and exits 5 without completing.
  A renewal that cannot be made is tried again; when none has landed by a
  margin before the end of the lease last proved (a tenth of the lease or 1 s,
  whichever is less), the process group is stopped and `run` exits 5.
- Stopping is SIGTERM, then SIGKILL after STOP_GRACE or by half the margin
  before the end of the lease last proved, whichever comes first (for a signal
  to `run` itself too): the command never outlives a lease the runner cannot
  prove, even when it ignores SIGTERM. An attempt ends only when its whole
  process group is gone (run/group.py), however its main process ended.
- A completion refused (rebased, cancelled or taken over as the command
  ended by itself) is a lost lease too: exit 5 saying how the command had
  ended, and the attempt's end and output are saved on their own (side data
  keyed by the attempt: the task's record is not written).
- The outcome (completed, or failed) is written with the claim's fence (outcome.py), and
  tried again through a store outage until it lands or the lease last proved
  is over (then exit 5: the task will run again). A write whose commit outcome
  is unknown (its connection dropped at COMMIT) is settled by reading the
  record back: the same fence, the outcome, this owner and actor ⇒ it landed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any

from ledger_cli.cli import output
from ledger_cli.cli.commands.run import watchdog
from ledger_cli.cli.commands.run.exitwaiter import ExitWaiter
from ledger_cli.cli.commands.run.leasekeeper import REFUSALS, LeaseKeeper
from ledger_cli.cli.commands.run.limits import TIMEOUT_EXIT
from ledger_cli.cli.commands.run.outcome import (
    LeaseLostError,
    OutcomeWrites,
    exit_code,
    lost_lease,
)
from ledger_cli.cli.commands.run.signals import passed_on, with_signals
from ledger_cli.cli.context import Session
from ledger_cli.errors import LedgerError, StoreError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState

STOP_GRACE = 5.0
"""Seconds the command gets to exit after SIGTERM before SIGKILL (a lost lease, a signal)."""

DEFAULT_BACKOFF = timedelta(seconds=1)


class Supervisor(OutcomeWrites):
    def __init__(
        self,
        session: Session,
        rec: TaskState,
        fence: int,
        owner: str,
        lease: timedelta,
        command: list[str],
        sent: float | None = None,
    ) -> None:
        """`sent`: the monotonic time just before the claim was sent (the lease
        is proved from then on); None: now (the caller claimed just before)."""
        self.s = session
        self.rec = rec
        self.key = rec.key
        self.fence = fence
        self.owner = owner
        self.lease = lease
        self.command = command
        self.proc: subprocess.Popen[bytes] | None = None
        self.lost: LedgerError | None = None
        self.signum: int | None = None
        self.attempts = 1
        self.attempt = 0
        self.backoff = DEFAULT_BACKOFF
        self.wake = threading.Event()
        """Set when the lease is lost or a signal arrives: cuts a backoff wait short."""
        self.writing = threading.Lock()
        """One write at a time on the session (the renewer runs beside the attempts)."""
        self.unstarted = False
        """The command could not be started (exit 126/127; the task was released)."""
        self.keeper = LeaseKeeper(
            session,
            self.key,
            owner,
            fence,
            lease,
            time.monotonic() if sent is None else sent,
            self.writing,
            self._on_lost,
        )
        self.poll = min(0.1, self.keeper.margin / 4)
        from ledger_cli.cli.commands.run.limits import RunOptions

        self.options = RunOptions()
        """--keep-output, --timeout, --kill-after (run.py sets them)."""
        self.recorder: Any = None
        """The last attempt's AttemptRecorder (None before the first start)."""
        self.begun: tuple[int, str] | None = None
        """(n, started) of the first attempt when the claim's unit recorded it."""
        self.timed_out = False
        self.unproved = False
        """The lease ran out of proof (no renewal landed in time): `lost` says so."""
        self.ended_itself: int | None = None
        """The exit status of a command over on its own when the lease was found lost."""

    # -- the child -------------------------------------------------------------

    def _env(self) -> dict[bytes, bytes]:
        """The command's environment: ours, and the task's LEDGER_* variables.
        In bytes, as the kernel takes it: a drain starts a command a task, and
        decoding and re-encoding every variable for each was most of building it."""
        env = dict(os.environb)
        env[b"LEDGER_KEY"] = os.fsencode(self.key)
        env[b"LEDGER_FENCE"] = b"%d" % self.fence
        env[b"LEDGER_TASK"] = os.fsencode(str(output.task(self.rec.task)))
        env[b"LEDGER_ATTEMPT"] = b"%d" % self.attempt
        return env

    def _signal_child(self, signum: int) -> None:
        """Signal the command's whole process group (it may outlive the command)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signum)

    def _stop_child(self, grace: float = STOP_GRACE) -> int:
        """SIGTERM the command's process group; SIGKILL it after `grace` seconds."""
        assert self.proc is not None
        self._signal_child(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=max(grace, 0.0))
        except subprocess.TimeoutExpired:
            self._signal_child(signal.SIGKILL)
            return self.proc.wait()
        finally:
            # Leave nothing of the group behind (a shell's children included).
            self._signal_child(signal.SIGKILL)

    def _kill_by(self, signalled_at: float) -> float:
        """When a command sent SIGTERM at `signalled_at` gets SIGKILL: after
        STOP_GRACE, but never past the lease last proved (`kill_at`): a
        refused renewal may mean that a rival holds the task now."""
        return min(signalled_at + STOP_GRACE, self.keeper.kill_at())

    def _on_lost(self, exc: LedgerError) -> None:
        """A renewal was refused: the watch loop stops the command within one poll
        (one SIGTERM: a second one means "force quit" to many programs). It is
        the reason told, even after the lease went unproved."""
        self.lost, self.unproved = exc, False
        self.wake.set()

    def _unproved(self) -> None:
        """No renewal landed in time: the lease can no longer be proved."""
        if self.lost is None:
            self.lost = StoreError(
                f"ledger: could not renew the lease on {self.key} before it could run out "
                "(the store did not answer): the command was stopped"
            )
            self.unproved = True
        self.wake.set()

    # -- signals ---------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        self.wake.set()
        self._signal_child(passed_on(signum))

    def run(self) -> int:
        return with_signals(self._on_signal, self._run)

    def _attempt(self) -> int | None:
        """Run the command once; its exit status (None: a signal or a lost lease
        stopped it). Raises OSError when it cannot be started. The attempt and
        its output are recorded beside the record (cli/commands/run/attempts.py)."""
        from ledger_cli.cli.commands.run.attempts import AttemptRecorder
        from ledger_cli.cli.commands.run.limits import Deadline

        opts = self.options
        rec = AttemptRecorder(self.s, self.key, self.fence, self.owner, self.attempt, opts.keep)
        if self.attempt == 1 and self.begun is not None:
            rec.begun(*self.begun)  # started in the claim's unit (run_attempts.ClaimStart)
        self.recorder, deadline = rec, Deadline(opts)
        watchdog.ready()
        try:
            self.proc = subprocess.Popen(
                self.command, env=self._env(), process_group=0, **rec.popen_kwargs()
            )
        except OSError:
            rec.not_started()
            self.recorder = None
            raise
        watchdog.started(self.proc.pid)  # its process group: the command dies with `run`
        if self.signum is not None:  # one came before `proc` was set: the handler missed it
            self._signal_child(passed_on(self.signum))
        rec.started(self.proc.pid)
        rc: int | None = None
        try:
            rc = self._watch(deadline)
        finally:
            watchdog.ended(self.proc.pid)
            # Durable before the outcome, waiting for the store while the lease holds.
            limit = self.keeper.proved_until() - time.monotonic()
            rec.ended(self.proc.returncode, deadline.timed_out, limit)
        self.timed_out = deadline.timed_out
        return rc

    def _watch(self, deadline: Any) -> int | None:
        assert self.proc is not None
        with ExitWaiter(self.proc) as exited:
            return self._watch_until(exited, deadline)

    def _watch_until(self, exited: ExitWaiter, deadline: Any) -> int | None:
        assert self.proc is not None
        rc: int | None = None
        signalled_at: float | None = None
        stopped = False
        while rc is None:
            rc = exited.within(self.poll)
            if rc is None:
                self.keeper.start()  # the command outlived a poll: keep its lease
                if self.recorder is not None:
                    self.recorder.outlived()  # and note its pid (run/attempts.py)
                deadline.check(self._signal_child)  # --timeout: SIGTERM, then SIGKILL
                if self.signum is not None:
                    # Passed on by the handler; escalate after the grace period.
                    if signalled_at is None:
                        signalled_at = time.monotonic()
                    elif time.monotonic() >= self._kill_by(signalled_at):
                        self._signal_child(signal.SIGKILL)
                elif self.lost is not None:
                    stopped = True
                    rc = self._stop_child(self._kill_by(time.monotonic()) - time.monotonic())
                elif self.keeper.expired():  # the hard stop: before the lease can run out
                    self._unproved()
                    stopped = True
                    rc = self._stop_child(self.keeper.kill_at() - time.monotonic())
        self._end_group(deadline, signalled_at, stopped)
        if self.lost is not None and self.signum is None and (not stopped or (rc or 0) >= 0):
            self.ended_itself = rc  # by itself, or exiting when asked: not killed by a signal
        if self.lost is not None or self.signum is not None:
            return None
        return rc

    def _end_group(self, deadline: Any, signalled_at: float | None, stopped: bool) -> None:
        """The attempt is over once its whole process group is (run/group.py):
        SIGTERM to what is left (unless it had one), SIGKILL after --kill-after
        (STOP_GRACE without --timeout), never past the lease last proved."""
        from ledger_cli.cli.commands.run import group

        assert self.proc is not None
        now = time.monotonic()
        termed = deadline.timed_out or stopped
        if termed:  # --timeout's SIGTERM (SIGKILL when due), or stopped: SIGKILL sent
            first = deadline.kill_at if deadline.kill_at is not None else now
        elif self.signum is not None:
            termed = passed_on(self.signum) == signal.SIGTERM
            first = (signalled_at if signalled_at is not None else now) + STOP_GRACE
        else:
            first = now + (self.options.kill_after if self.options.timeout else STOP_GRACE)
        since: list[float] = []

        def kill_by() -> float:
            self.keeper.start()  # the group runs under the lease: keep it
            at = time.monotonic()
            if self.keeper.expired():
                self._unproved()
                return at
            if self.lost is not None or self.signum is not None:
                since[:] = since or [at]  # since the first poll that saw it
                return min(first, self._kill_by(since[0]))
            return min(first, self.keeper.kill_at())

        group.end(self.proc.pid, self._signal_child, kill_by, term=not termed, poll=self.poll)

    def _wait(self, pause: float) -> bool:
        """Wait between attempts; True when cut short (lease lost or
        unprovable, or a signal)."""
        end = time.monotonic() + pause
        self.keeper.start()
        while True:
            if self.keeper.expired():
                self._unproved()
                return True
            left = min(end, self.keeper.stop_at()) - time.monotonic()
            if left <= 0:
                return False
            if self.wake.wait(left):
                return True

    def _save_attempt_end(self) -> None:
        """The last attempt's end where no completion carries it (bounded wait)."""
        if self.recorder is not None:
            self.recorder.save_now(max(self.keeper.proved_until() - time.monotonic(), 1.0))

    def _attempt_failed(self, rc: int) -> None:
        """A history line for a failed attempt that will be retried (best effort:
        a store outage loses the line, not the task)."""
        from ledger_cli.engine.events import ATTEMPT_FAILED, Event

        try:
            with self.writing:
                for attempt in self.s.writes(self.s.unit_now()):
                    with attempt:
                        self.s.recorder.emit(
                            Event(
                                ATTEMPT_FAILED,
                                self.key,
                                f"key {self.key} attempt {self.attempt} of {self.attempts} "
                                f"failed with exit status {exit_code(rc)}",
                            )
                        )
        except StoreError as exc:
            output.diag(f"{output.one_line(str(exc))} (the history of attempt {self.attempt})")

    def _run(self) -> int:
        rc: int | None = None
        try:
            while True:
                self.attempt += 1
                try:
                    rc = self._attempt()
                except OSError as exc:
                    self.keeper.halt()
                    self._release()
                    self.unstarted = True
                    code = 126 if isinstance(exc, PermissionError) else 127
                    message = f"ledger: cannot run {self.command[0]}: {exc.strerror or exc}"
                    output.report_unstarted(message, code, self.s.settings.json)
                    return code
                if rc is None or rc == 0 or self.attempt >= self.attempts:
                    break
                self._save_attempt_end()  # no completion follows this one
                self._attempt_failed(rc)
                pause = self.backoff.total_seconds() * 2 ** (self.attempt - 1)
                if self._wait(pause):  # the lease was lost or unprovable, or a signal came
                    if self.lost is not None:
                        self.ended_itself, rc = rc, None
                    break
        finally:
            # A renewer blocked on a stalled connection is not waited for past the lease.
            self.keeper.halt(wait=False)
            self.keeper.join(max(self.keeper.proved_until() - time.monotonic(), 0))
            if self.keeper.running():
                self._interrupt()
                self.keeper.join(self.keeper.margin)
        if self.unproved or self.lost is not None or self.signum is not None:
            self._save_attempt_end()
        if self.unproved:
            raise LeaseLostError(output.one_line(str(self.lost)))
        if self.lost is not None:
            raise lost_lease(self.key, self.lost, self.ended_itself)
        if self.signum is not None:
            self._release()
            return 128 + self.signum
        assert rc is not None
        status = "completed" if rc == 0 else "failed"
        try:
            rec = self._complete(status)
        except REFUSALS as exc:  # rebased, cancelled or taken over as the command ended
            self._save_attempt_end()  # the run's own end: no write to the task's record
            raise lost_lease(self.key, exc, rc) from None
        code = TIMEOUT_EXIT if self.timed_out else exit_code(rc)
        if self.s.settings.json:
            doc: dict[str, Any] = {
                "key": self.key,
                "fence": self.fence,
                "status": status,
                "exit": code,
                "attempts": self.attempt,
            }
            if self.recorder is not None and self.recorder.recorded:
                doc["attempt"] = self.recorder.to_obj()
            doc["record"] = output.record(rec)
            output.json_line(doc)
        return code

    def _release(self) -> None:
        try:
            for attempt in self.s.writes(self.s.unit_now()):
                with attempt:
                    now = attempt.clock(self.key)
                    self.s.ledger.release(self.s.actor, self.key, self.owner, self.fence, now)
        except LedgerError as exc:
            output.diag(output.within(f"releasing {self.key}", str(exc)))
