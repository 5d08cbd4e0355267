"""`ledger run`: claim, run a command under the lease, renew it in the
background, complete by the command's exit status.

- The command runs in its own process group with LEDGER_KEY, LEDGER_FENCE and
  LEDGER_TASK (the task as JSON) in its environment. Under `--json` its
  stdout goes to run's stderr, so that stdout holds only the result's JSON
  (`ledger --json run … | jq`).
- A thread renews the lease every third of it (cli/commands/run/leasekeeper.py). When a
  renew is refused (the fence is stale: someone took over; or the record is
  no longer claimed), the whole process group is stopped and `run` exits 5
  without completing; a refused completion is a lost lease too (exit 5, the
  attempt's end kept). A renew that cannot be made (a store outage) is tried
  again until it lands; when none has landed by a margin (a tenth of the
  lease, at most 1 s) before the lease last proved can run out, the process
  group is stopped and `run` exits 5 (cli/commands/run/supervisor.py).
- SIGINT/SIGTERM/SIGHUP: the signal is passed to the command's process group
  (SIGHUP as SIGTERM: cli/commands/run/signals.py), then the claim is
  released; exit 128+signal.
- Otherwise the record is completed (exit status 0) or failed (anything else)
  and `run` exits with the command's status (128+N when a signal N killed it).
  Through a store outage the outcome is tried again, with the claim's fence,
  until it lands or the lease is over (exit 5: the task will run again).
- `--retries N --backoff D` (docs/design.md §6.7): up to N+1 attempts under the one
  lease, renewed throughout (waits included), waiting D, 2D, 4D… between them;
  LEDGER_ATTEMPT (1, 2, …) in the command's environment; each failed attempt
  but the last leaves a history line `ledger.attempt_failed` with its exit
  status; the task is failed only when the last attempt fails. A lost lease
  during an attempt or a wait stops everything (exit 5).
- `--next --drain`: a long-lived worker over one store connection. After each
  task it claims the next ready one, in the unit that records the task's
  outcome (one commit and one sync for both; a claim it must wait for is a
  unit of its own), until none is ready (within `--wait`,
  when given, for each claim) and no other worker holds a live lease (a
  claimed task whose LeaseUntil is after now): that task's outcome may make
  more tasks ready (a DAG's fan-in), so the worker polls for it, with a
  backoff from 50 ms up to a tenth of --lease (at most 1 s). A task not due
  yet (`--not-before`) does not keep it waiting; a paused store stops it
  (exit 7 and the pause's line, as a single `run --next`, whether or not it
  ran a task; exit 1 still when a command failed, the pause's line on stderr).
  `--until-idle` stops at the first moment nothing is ready instead (the
  behaviour before the wait). Exit 7 when it ran no task;
  else 0 when every task it ran completed, 1 when any command failed (each
  failure recorded as above). A lost lease still stops the command and exits 5
  at once; SIGINT/SIGTERM/SIGHUP stop the command, release its task and exit
  128+signal (between tasks: release a task just claimed, if any); a command
  that cannot be started (126/127) stops the drain too, its task released.
  `--retries/--backoff` apply per task; each task has its own history lines.
  A store outage between tasks (or in a `--wait`) is ridden out: one warning
  line, backoff up to 3 s, a new connection; exit 9 once the store has been
  unreachable for longer than `--give-up-after` (5m) (cli/outage.py).
"""

from __future__ import annotations

import signal
import threading
import time
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.commands.claim import (
    NothingReadyError,
    PausedError,
    claim_in_unit,
    claim_key,
    claim_next_timed,
)
from ledger_cli.cli.commands.run.outcome import LeaseLostError, exit_code
from ledger_cli.cli.commands.run.signals import Early, with_signals
from ledger_cli.cli.commands.run.supervisor import DEFAULT_BACKOFF, STOP_GRACE, Supervisor
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import (
    InputError,
    parse_duration,
    parse_uint,
    require_keys,
    validate_text,
)
from ledger_cli.cli.outage import Outage, is_outage, margin_of, open_session, parse_give_up
from ledger_cli.errors import NoKeyError, StoreError

if TYPE_CHECKING:
    from ledger_cli.cli.commands.run.limits import RunOptions
    from ledger_cli.cli.context import Attempt
    from ledger_cli.engine.record import TaskState

__all__ = ["STOP_GRACE", "LeaseLostError", "Supervisor", "exit_code", "run"]

MAX_RETRIES = 1000
"""`--retries` is at most this (the waits double: 1000 is already forever)."""


MIN_LEASE = timedelta(milliseconds=100)
"""The shortest lease `run` takes: below it, a renewal (a store write, at a
third of the lease) cannot be relied on to land before the lease runs out."""


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
    give_up_after: str | None = None,
    keep_output: str | None = None,
    timeout: str | None = None,
    kill_after: str | None = None,
    until_idle: bool = False,
    queue: list[str] | None = None,
) -> int:
    if key is None and not next_ and command[1:2] == ["--"]:
        # `run [OPTIONS] -- KEY -- CMD…`: a KEY that starts with `-` (one the options
        # would take for an option), as `claim … -- KEY` takes it.
        key, command = command[0], command[2:]
        require_keys({"key": key})
    if until_idle and not drain:
        raise InputError("ledger: --until-idle goes with --drain")
    if drain and key is not None:
        raise InputError("ledger: --drain goes with --next, not a KEY")
    if drain and not next_:
        raise InputError("ledger: --drain goes with --next")
    if not command or not command[0]:
        raise InputError("ledger: run needs a command after --, e.g. ledger run K ... -- ./job.sh")
    if next_ and key is not None:
        raise InputError("ledger: run takes a KEY or --next, not both")
    if not next_ and key is None:
        raise InputError("ledger: run needs a KEY (or --next)")
    if not next_ and wait is not None:
        raise InputError("ledger: --wait goes with --next")
    if give_up_after is not None and not drain and wait is None:
        # a single run's renewals and outcome are bound by its lease, not by it
        raise InputError("ledger: --give-up-after goes with --wait or --drain")
    wanted = None
    if queue:
        if not next_:
            raise InputError("ledger: --queue goes with --next")
        from ledger_cli.cli.queueargs import parse_queues

        wanted = parse_queues(queue)
    owner = validate_text(owner, "owner")
    lease_td = parse_duration(lease, "lease", exact=True)
    if settings.now:  # (the clock's now cannot reach the year 9999: nothing to import)
        from ledger_cli.cli.when import check_lease

        check_lease(settings, lease, lease_td)
    if lease_td < MIN_LEASE:
        raise InputError(
            f'ledger: run needs a lease of at least 100ms, got "{lease}": it renews the lease'
            " at a third of its length, and a shorter one can run out before a renewal lands"
        )
    attempts = parse_uint(retries, "--retries", MAX_RETRIES) + 1 if retries is not None else 1
    backoff_td = parse_duration(backoff, "--backoff") if backoff is not None else DEFAULT_BACKOFF
    give_up = parse_give_up(give_up_after)
    from ledger_cli.cli.commands.run.limits import RunOptions

    options = RunOptions(keep_output, timeout, kill_after)  # docs/design.md §7.1, §7.4
    retried = give_up if drain or wait is not None else None
    if next_ and wait is not None:  # waited for, not created
        from ledger_cli.cli.storeappears import wait_for_store

        left = wait_for_store(settings, wait)
        if left is None:
            raise NothingReadyError()
        # A drain's --wait is each claim's: the first waits it whole again.
        wait = wait if drain else left
    # --next without --wait has nothing to claim in a store that does not exist;
    # `run KEY` claims only a record the store holds.
    reads = next_ and wait is None
    with open_session(settings, retried, reads=reads, existing=not next_) as s:
        if drain:
            worker = Drainer(s, owner, lease, lease_td, command, wait)
            worker.attempts, worker.backoff, worker.outage.give_up = attempts, backoff_td, give_up
            worker.options = options
            worker.until_idle = until_idle
            worker.queues = wanted
            return worker.run()
        from ledger_cli.cli.commands.run.attempts import ClaimStart

        begin = ClaimStart(s, owner)  # the first attempt's start, in the claim's unit
        early = Early()  # a signal while claiming: kept for the supervisor (signals.py)

        def claim_and_run() -> int:
            if next_:
                rec, fence, sent = claim_next_timed(
                    s, owner, lease, wait, give_up, begin, queues=wanted, sleep=early.sleep
                )
            else:
                assert key is not None
                sent = time.monotonic()
                fence, claimed = claim_key(s, key, owner, lease_td, begin)
                if claimed is None:
                    raise NoKeyError(key=key)
                rec = claimed
            sup = Supervisor(s, rec, fence, owner, lease_td, command, sent)
            sup.attempts, sup.backoff, sup.options = attempts, backoff_td, options
            sup.begun = begin.take(rec.key, fence)
            early.hand_to(sup)
            return sup.run()

        return with_signals(early, claim_and_run)


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
        """Set by a signal between tasks (signals.STOPPING): cuts a --wait poll short."""
        self.outage = Outage("the drain")
        self.options: RunOptions | None = None
        """--keep-output, --timeout, --kill-after for every task (run/limits.py)."""
        self.until_idle = False
        """Stop at the first moment nothing is ready, whatever leases others hold."""
        self.queues: frozenset[str] | None = None
        """--queue: claim only from these queues (None: every queue)."""
        self.paused: PausedError | None = None
        """Why the last claim found nothing: the store is paused (None: it is not)."""
        self.idle: NothingReadyError | None = None
        """The last claim's refusal (naming a full queue): said when none ran."""
        self.held_cap = max(margin_of(lease_td.total_seconds()), 0.01)
        """Seconds: the longest pause between polls while another worker holds a lease."""
        from ledger_cli.cli.commands.run.attempts import ClaimStart

        self.begin = ClaimStart(session, owner)
        """Each task's first attempt starts in its claim's unit."""

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        self.stopping.set()

    def run(self) -> int:
        return with_signals(self._on_signal, self._drain)

    def _claim(self) -> tuple[TaskState, int, float] | None:
        """The next ready task (and the monotonic time its claim was sent),
        polling up to --wait as `claim --next --wait` does, and then for as
        long as another worker holds a live lease (unless --until-idle); None
        when none became ready or a signal came. A store outage is waited out
        (up to --give-up-after; the --wait clock stops meanwhile)."""
        deadline = time.monotonic() + self.wait_s
        pause = 0.05
        while not self._unread():
            began = time.monotonic()
            try:
                got = claim_next_timed(
                    self.s, self.owner, self.lease, None, None, self.begin, queues=self.queues
                )
            except NothingReadyError as exc:  # its line, a full queue named, if none ran
                got, self.idle = None, exc
                self.paused = exc if isinstance(exc, PausedError) else None
            except StoreError as exc:
                if not is_outage(exc):
                    raise
                if self.stopping.wait(self.outage.failed(exc, began=began)):
                    return None
                deadline += time.monotonic() - began
                continue
            if got is not None:
                self.outage.ok()
                self.paused = None
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                if self.until_idle or self.paused is not None:
                    self.outage.ok()
                    return None
                try:
                    from ledger_cli.cli.commands.run.idle import what_keeps_going

                    what = what_keeps_going(self.s, self.queues)
                except StoreError as exc:
                    if not is_outage(exc):
                        raise
                    if self.stopping.wait(self.outage.failed(exc, began=began)):
                        return None
                    continue
                self.outage.ok()
                if what is None:
                    return None
                # A live lease: poll for its outcome. A ready task the claim
                # missed: another worker's claim of it is in flight; look again.
                left = self.held_cap if what == "held" else pause
            self.outage.ok()
            if self.stopping.wait(min(pause, left)):
                return None
            pause = min(pause * 2, 1.0)
        return None

    def _stopped(self, ran: int, failed: bool) -> int:
        """The exit once nothing more is claimed: a failed command's 1 first,
        then a pause's 7 (its line, as a single `run --next` prints), then 7
        for no task run, else 0. A pause is said on stderr whatever the exit."""
        if failed:
            if self.paused is not None:
                output.diag(str(self.paused))
            return 1
        if self.paused is not None:
            raise self.paused
        if ran == 0:
            raise self.idle or NothingReadyError()
        return 0

    def _claim_after(self, attempt: Attempt, sent: float) -> tuple[TaskState, int, float] | None:
        """The next task, claimed in the unit that records the last one's
        outcome (`Supervisor.then`): one commit and one sync for both. None
        when nothing is ready to it there (the pause, a dependent the outcome
        has just made ready: `_claim` looks again in a unit of its own). Not
        called once a signal came (the supervisor's `signum`)."""
        if self._unread():
            return None
        claimed = claim_in_unit(
            self.s, attempt, self.owner, self.lease_td, [], self.begin, self.queues
        )
        return None if claimed is None else (*claimed, sent)

    def _unread(self) -> bool:
        """Whether to stop: a signal came, or the reader of our stdout or stderr
        is gone (`run --drain | head`), which stops the drain as SIGPIPE would:
        the task in hand goes as it went, nothing more is claimed, exit 141."""
        from ledger_cli.cli.commands.run.capture import readers_gone  # a drain's only

        if self.signum is None and readers_gone():
            self.signum = signal.SIGPIPE
        return self.signum is not None

    def _give_back(self, got: tuple[TaskState, int, float]) -> None:
        """Release a task claimed for a command that will not run (a signal came)."""
        begun = self.begin.take(got[0].key, got[1])
        if begun is not None:
            from ledger_cli.cli.commands.run.attempts import drop_begun

            drop_begun(self.s, got[0].key, begun[0])
        Supervisor(self.s, got[0], got[1], self.owner, self.lease_td, self.command)._release()

    def _drain(self) -> int:
        failed = False
        ran = 0
        got: tuple[TaskState, int, float] | None = None
        while True:
            if got is None:
                got = self._claim()
            if got is not None and self.signum is not None:
                self._give_back(got)  # the signal came while claiming
            if got is None:
                self.begin.got = None  # a start rolled back with its unit, if any
            if self.signum is not None:
                return 128 + self.signum
            if got is None:
                return self._stopped(ran, failed)
            rec, fence, sent = got
            sup = Supervisor(self.s, rec, fence, self.owner, self.lease_td, self.command, sent)
            sup.attempts, sup.backoff = self.attempts, self.backoff
            sup.begun = self.begin.take(rec.key, fence)
            if self.options is not None:
                sup.options = self.options
            sup.then = self._claim_after
            code = sup.run()  # a lost lease raises LeaseLostError: exit 5 at once
            ran += 1
            self.s.recorder.events.clear()  # written to the history already
            got = sup.then_result
            if sup.signum is not None:  # (one that came as the task completed, too)
                if got is not None:
                    self._give_back(got)
                return 128 + sup.signum
            if sup.unstarted:
                return code  # the command cannot be started: 126/127, its task released
            failed = failed or code != 0
