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
from ledger_cli.cli.inputs import InputError, parse_duration, validate_text
from ledger_cli.cli.leases import claim_next
from ledger_cli.errors import FencedError, LedgerError, NoKeyError, NotClaimedError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState

STOP_GRACE = 5.0
"""Seconds the command gets to exit after SIGTERM before SIGKILL."""


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
) -> int:
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
    with Session(settings) as s:
        if next_:
            rec, fence = claim_next(s, owner, lease, wait)
        else:
            assert key is not None
            now = s.now()
            with s.write(now):
                fence = s.ledger.claim(s.actor, key, owner, lease_td, now)
                claimed = s.load(key)
            if claimed is None:
                raise NoKeyError()
            rec = claimed
        return Supervisor(s, rec, fence, owner, lease_td, command).run()


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

    # -- the child -------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["LEDGER_KEY"] = self.key
        env["LEDGER_FENCE"] = str(self.fence)
        env["LEDGER_TASK"] = str(output.task(self.rec.task))
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
            now = self.s.now()
            try:
                with self.s.write(now):
                    self.s.ledger.renew(
                        self.s.actor, self.key, self.owner, self.fence, self.lease, now
                    )
            except (FencedError, NotClaimedError, NoKeyError) as exc:
                self.lost = exc
                if self.proc is not None:
                    self._signal_child(signal.SIGTERM)
                return
            except LedgerError as exc:  # the store failed: try again next time
                output.diag(f"ledger: renewing {self.key}: {output.one_line(str(exc))}")

    # -- signals ---------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
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

    def _run(self) -> int:
        try:
            self.proc = subprocess.Popen(self.command, env=self._env(), process_group=0)
        except OSError as exc:
            self._release()
            output.diag(f"ledger: cannot run {self.command[0]}: {exc.strerror or exc}")
            return 126 if isinstance(exc, PermissionError) else 127
        renewer = threading.Thread(target=self._renew_loop, name="ledger-renew", daemon=True)
        renewer.start()
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
        self.stop.set()
        renewer.join()
        if self.lost is not None or self.signum is not None:
            self._signal_child(signal.SIGKILL)  # stragglers in the group
        if self.lost is not None:
            raise LeaseLostError(
                f"{output.one_line(str(self.lost))} (lost the lease on {self.key}; "
                "the command was stopped)"
            )
        if self.signum is not None:
            self._release()
            return 128 + self.signum
        status = "completed" if rc == 0 else "failed"
        now = self.s.now()
        with self.s.write(now):
            self.s.ledger.complete(self.s.actor, self.key, self.owner, self.fence, status, now)
            rec = self.s.load(self.key)
        code = rc if rc >= 0 else 128 - rc
        if self.s.settings.json:
            output.json_line(
                {
                    "key": self.key,
                    "fence": self.fence,
                    "status": status,
                    "exit": code,
                    "record": output.record(rec),
                }
            )
        return code

    def _release(self) -> None:
        now = self.s.now()
        try:
            with self.s.write(now):
                self.s.ledger.release(self.s.actor, self.key, self.owner, self.fence, now)
        except LedgerError as exc:
            output.diag(f"ledger: releasing {self.key}: {output.one_line(str(exc))}")
