"""`ledger run`: claim, run a command under the lease, renew it in the
background, complete by the command's exit status.

- The command runs in its own process group with LEDGER_KEY, LEDGER_FENCE and
  LEDGER_TASK (the task as JSON) in its environment.
- A thread renews the lease every third of it. When a renew is refused (the
  fence is stale: someone took over; or the record is no longer claimed), the
  whole process group is stopped and `run` exits 5 without completing.
- SIGINT/SIGTERM: the signal is passed to the command's process group, then the
  claim is released; exit 128+signal.
- Otherwise the record is completed (exit status 0) or failed (anything else)
  and `run` exits with the command's status (128+N when a signal N killed it).
- `--retries N --backoff D` (SPEC §6.7): up to N+1 attempts under the one
  lease, renewed throughout (waits included), waiting D, 2D, 4D… between them;
  LEDGER_ATTEMPT (1, 2, …) in the command's environment; each failed attempt
  but the last leaves a history line `ledger.attempt_failed` with its exit
  status; the task is failed only when the last attempt fails. A lost lease
  during an attempt or a wait stops everything (exit 5).
- `--next --drain`: a long-lived worker over one store connection. After each
  task it claims the next ready one, until none is ready (within `--wait`,
  when given, for each claim). Exit 7 when nothing was ready at the start;
  else 0 when every task it ran completed, 1 when any command failed (each
  failure recorded as above). A lost lease still stops the command and exits 5
  at once; SIGINT/SIGTERM stop the command, release its task and exit
  128+signal (between tasks: release a task just claimed, if any); a command
  that cannot be started (126/127) stops the drain too, its task released.
  `--retries/--backoff` apply per task; each task has its own history lines.
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
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_duration, parse_uint, validate_text
from ledger_cli.cli.leases import NothingReadyError, claim_next
from ledger_cli.errors import FencedError, LedgerError, NoKeyError, NotClaimedError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState

STOP_GRACE = 5.0
"""Seconds the command gets to exit after SIGTERM before SIGKILL."""

DEFAULT_BACKOFF = timedelta(seconds=1)
MAX_RETRIES = 1000
"""`--retries` is at most this (the waits double: 1000 is already forever)."""


class LeaseLostError(FencedError):
    """A renew was refused while the command ran: it was stopped (exit 5)."""


def run(
    settings: Settings,
    key: str | None,
    owner: str,
    lease: str,
    command: list[str],
    next_: bool = False,
    wait: str | None = None,
    retries: str | None = None,
    backoff: str | None = None,
    drain: bool = False,
) -> int:
    if drain and key is not None:
        raise InputError("ledger: --drain goes with --next, not a KEY")
    if drain and not next_:
        raise InputError("ledger: --drain goes with --next")
    if not command:
        raise InputError("ledger: run needs a command after --, e.g. ledger run K ... -- ./job.sh")
    if next_ and key is not None:
        raise InputError("ledger: run takes a KEY or --next, not both")
    if not next_ and key is None:
        raise InputError("ledger: run needs a KEY (or --next)")
    if not next_ and wait is not None:
        raise InputError("ledger: --wait goes with --next")
    owner = validate_text(owner, "owner")
    lease_td = parse_duration(lease, "lease")
    attempts = parse_uint(retries, "--retries", MAX_RETRIES) + 1 if retries is not None else 1
    backoff_td = parse_duration(backoff, "--backoff") if backoff is not None else DEFAULT_BACKOFF
    with Session(settings) as s:
        if drain:
            worker = Drainer(s, owner, lease, lease_td, command, wait)
            worker.attempts, worker.backoff = attempts, backoff_td
            return worker.run()
        if next_:
            rec, fence = claim_next(s, owner, lease, wait)
        else:
            assert key is not None
            now = s.now()
            for attempt in s.writes(now):
                with attempt:
                    fence = s.ledger.claim(s.actor, key, owner, lease_td, now)
                    claimed = s.load(key)
            if claimed is None:
                raise NoKeyError()
            rec = claimed
        sup = Supervisor(s, rec, fence, owner, lease_td, command)
        sup.attempts, sup.backoff = attempts, backoff_td
        return sup.run()


class Drainer:
    """`run --next --drain`: claim, run, complete; again, until nothing is ready."""

    def __init__(
        self,
        session: Session,
        owner: str,
        lease: str,
        lease_td: timedelta,
        command: list[str],
        wait: str | None,
    ) -> None:
        self.s = session
        self.owner = owner
        self.lease = lease
        self.lease_td = lease_td
        self.command = command
        self.wait_s = parse_duration(wait, "--wait").total_seconds() if wait is not None else 0.0
        self.attempts = 1
        self.backoff = DEFAULT_BACKOFF
        self.signum: int | None = None
        self.stopping = threading.Event()
        """Set by SIGINT/SIGTERM between tasks: cuts a --wait poll short."""

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        self.stopping.set()

    def run(self) -> int:
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            return self._drain()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _claim(self) -> tuple[TaskState, int] | None:
        """The next ready task, polling up to --wait as `claim --next --wait`
        does; None when none became ready or a signal came."""
        deadline = time.monotonic() + self.wait_s
        pause = 0.05
        while self.signum is None:
            try:
                return claim_next(self.s, self.owner, self.lease, None)
            except NothingReadyError:
                left = deadline - time.monotonic()
                if left <= 0 or self.stopping.wait(min(pause, left)):
                    return None
                pause = min(pause * 2, 1.0)
        return None

    def _drain(self) -> int:
        failed = False
        ran = 0
        while True:
            got = self._claim()
            if got is not None and self.signum is not None:
                # The signal came while claiming: give the task back untouched.
                sup = Supervisor(self.s, got[0], got[1], self.owner, self.lease_td, self.command)
                sup._release()
            if self.signum is not None:
                return 128 + self.signum
            if got is None:
                if ran == 0:
                    raise NothingReadyError()
                return 1 if failed else 0
            rec, fence = got
            sup = Supervisor(self.s, rec, fence, self.owner, self.lease_td, self.command)
            sup.attempts, sup.backoff = self.attempts, self.backoff
            code = sup.run()  # a lost lease raises LeaseLostError: exit 5 at once
            ran += 1
            self.s.recorder.events.clear()  # written to the history already
            if sup.signum is not None:  # (one that came as the task completed, too)
                return 128 + sup.signum
            if sup.unstarted:
                return code  # the command cannot be started: 126/127, its task released
            failed = failed or code != 0


class Supervisor:
    def __init__(
        self,
        session: Session,
        rec: TaskState,
        fence: int,
        owner: str,
        lease: timedelta,
        command: list[str],
    ) -> None:
        self.s = session
        self.rec = rec
        self.key = rec.key
        self.fence = fence
        self.owner = owner
        self.lease = lease
        self.command = command
        self.proc: subprocess.Popen[bytes] | None = None
        self.stop = threading.Event()
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

    # -- the child -------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["LEDGER_KEY"] = self.key
        env["LEDGER_FENCE"] = str(self.fence)
        env["LEDGER_TASK"] = str(output.task(self.rec.task))
        env["LEDGER_ATTEMPT"] = str(self.attempt)
        return env

    def _signal_child(self, signum: int) -> None:
        """Signal the command's whole process group (it may outlive the command)."""
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)

    def _stop_child(self, signum: int = signal.SIGTERM) -> int:
        """Signal the command's process group; SIGKILL it after STOP_GRACE."""
        assert self.proc is not None
        self._signal_child(signum)
        try:
            return self.proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            self._signal_child(signal.SIGKILL)
            return self.proc.wait()
        finally:
            # Leave nothing of the group behind (a shell's children included).
            self._signal_child(signal.SIGKILL)

    # -- the renewer -----------------------------------------------------------

    def _renew_loop(self) -> None:
        interval = max(self.lease.total_seconds() / 3, 0.01)
        while not self.stop.wait(interval):
            try:
                with self.writing:
                    now = self.s.now()
                    for attempt in self.s.writes(now):
                        with attempt:
                            self.s.ledger.renew(
                                self.s.actor, self.key, self.owner, self.fence, self.lease, now
                            )
            except (FencedError, NotClaimedError, NoKeyError) as exc:
                # Refused (exit 5 or 6: taken over, cancelled, rebased): the lease is lost.
                self.lost = exc
                self.wake.set()
                if self.proc is not None:
                    self._signal_child(signal.SIGTERM)
                return
            except LedgerError as exc:  # the store failed: try again next time
                output.diag(f"ledger: renewing {self.key}: {output.one_line(str(exc))}")

    # -- signals ---------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        self.wake.set()
        self._signal_child(signum)

    def run(self) -> int:
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            return self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _attempt(self) -> int | None:
        """Run the command once; its exit status (None: a signal or a lost lease
        stopped it). Raises OSError when it cannot be started."""
        self.proc = subprocess.Popen(self.command, env=self._env(), process_group=0)
        rc: int | None = None
        signalled_at: float | None = None
        while rc is None:
            try:
                rc = self.proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                if self.signum is not None:
                    # Passed on by the handler; escalate after the grace period.
                    if signalled_at is None:
                        signalled_at = time.monotonic()
                    elif time.monotonic() - signalled_at > STOP_GRACE:
                        self._signal_child(signal.SIGKILL)
                elif self.lost is not None:
                    rc = self._stop_child()
        if self.lost is not None or self.signum is not None:
            self._signal_child(signal.SIGKILL)  # stragglers in the group
            return None
        return rc

    def _attempt_failed(self, rc: int) -> None:
        """A history line for a failed attempt that will be retried."""
        from ledger_cli.engine.events import ATTEMPT_FAILED, Event

        with self.writing:
            now = self.s.now()
            for attempt in self.s.writes(now):
                with attempt:
                    self.s.recorder.emit(
                        Event(
                            ATTEMPT_FAILED,
                            self.key,
                            f"key {self.key} attempt {self.attempt} of {self.attempts} "
                            f"failed with exit status {exit_code(rc)}",
                        )
                    )

    def _run(self) -> int:
        renewer = threading.Thread(target=self._renew_loop, name="ledger-renew", daemon=True)
        renewer.start()
        try:
            rc: int | None = None
            while True:
                self.attempt += 1
                try:
                    rc = self._attempt()
                except OSError as exc:
                    self.stop.set()
                    renewer.join()
                    self._release()
                    self.unstarted = True
                    output.diag(f"ledger: cannot run {self.command[0]}: {exc.strerror or exc}")
                    return 126 if isinstance(exc, PermissionError) else 127
                if rc is None or rc == 0 or self.attempt >= self.attempts:
                    break
                self._attempt_failed(rc)
                pause = self.backoff.total_seconds() * 2 ** (self.attempt - 1)
                if self.wake.wait(pause):  # the lease was lost, or a signal came
                    break
        finally:
            self.stop.set()
            renewer.join()
        if self.lost is not None:
            raise LeaseLostError(
                f"{output.one_line(str(self.lost))} (lost the lease on {self.key}; "
                "the command was stopped)"
            )
        if self.signum is not None:
            self._release()
            return 128 + self.signum
        assert rc is not None
        status = "completed" if rc == 0 else "failed"
        # None: the unit reads the store's clock with its load of the key
        # (PostgreSQL: no round trip of its own); else --now or the clock.
        for attempt in self.s.writes(self.s.unit_now("now_with")):
            with attempt:
                now = attempt.clock(self.key)
                self.s.ledger.complete(self.s.actor, self.key, self.owner, self.fence, status, now)
                rec = self.s.load(self.key)
        code = exit_code(rc)
        if self.s.settings.json:
            output.json_line(
                {
                    "key": self.key,
                    "fence": self.fence,
                    "status": status,
                    "exit": code,
                    "attempts": self.attempt,
                    "record": output.record(rec),
                }
            )
        return code

    def _release(self) -> None:
        now = self.s.now()
        try:
            for attempt in self.s.writes(now):
                with attempt:
                    self.s.ledger.release(self.s.actor, self.key, self.owner, self.fence, now)
        except LedgerError as exc:
            output.diag(f"ledger: releasing {self.key}: {output.one_line(str(exc))}")


def exit_code(rc: int) -> int:
    """A child's exit status as a shell reports it (128+N when signal N killed it)."""
    return rc if rc >= 0 else 128 - rc
