"""Worker processes for tests/faults/test_faults_leases.py: `python -m tests.faults_workers KIND …`.

Every worker competes for the same tasks with short leases, renews at random
moments, stalls past its lease now and then (so that others take over), and
keeps going with a lease it lost now and then (so that its stale writes must be
refused). Each logs every command it ran, with its exit code, as JSON lines in
its own file; the test checks those logs against the store's history.

Workers run until the test creates the stop file (it waits for enough stalls,
takeovers and refused stale writes, not for a time). Every pause is a fraction
or a multiple of LEASE, and a `run` worker stops a `ledger run` only once it has
claimed and started its command.

Kinds:
- `cli`:  the real command line (`ledger_cli.cli.app.run`) called in this
          process — a command costs milliseconds, so thousands run;
- `proc`: the same, each command a fresh `python -m ledger_cli` process;
- `run`:  `ledger run --next … -- sleep X` processes, some of which this worker
          stops (SIGSTOP) past their lease and resumes (SIGCONT).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import Any

LEASE = 0.5
"""Seconds: every worker takes leases this long (the checker assumes it)."""
LEASE_ARG = "500ms"
STALL = 1.6 * LEASE
STALL_CHANCE = 0.25
ABANDON_CHANCE = 0.2
STALE_WRITE_CHANCE = 0.6


class Worker:
    def __init__(self, kind: str, store: str, name: str, stop_file: str, log: str) -> None:
        self.kind = kind
        self.store = store
        self.name = name
        self.stop_file = stop_file
        self.rng = random.Random(f"{name}-{os.getpid()}")
        self.log = open(log, "a", encoding="utf-8")  # noqa: SIM115 - closed at exit
        self.known: list[str] = [f"task-{i:02d}" for i in range(12)]  # the test's tasks
        self.admitted = 0

    # -- running commands ----------------------------------------------------------

    def ledger(self, *argv: str) -> tuple[int, str, str]:
        args = ["--store", self.store, "--actor", self.name, *argv]
        if self.kind == "proc":
            res = subprocess.run(
                [sys.executable, "-m", "ledger_cli", *args],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            return res.returncode, res.stdout, res.stderr
        from ledger_cli.cli import app

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = app.run(args)
        return code, out.getvalue(), err.getvalue()

    def note(self, op: str, key: str | None, fence: int | None, code: int, **extra: Any) -> None:
        entry = {"op": op, "key": key, "owner": self.name, "fence": fence, "exit": code, **extra}
        self.log.write(json.dumps(entry) + "\n")
        self.log.flush()

    # -- the cli/proc worker -----------------------------------------------------------

    def acquire(self) -> tuple[str, int] | None:
        if self.rng.random() < 0.35:
            key = self.stale_key()
            if key is None:
                return None
            code, out, err = self.ledger(
                "takeover", key, "--owner", self.name, "--lease", LEASE_ARG
            )
            fence = int(out) if code == 0 else None
            self.note("takeover", key, fence, code, err=err.strip()[:200])
            return (key, fence) if fence is not None else None
        code, out, err = self.ledger("claim", "--next", "--owner", self.name, "--lease", LEASE_ARG)
        if code != 0:
            self.note("claim-next", None, None, code, err=err.strip()[:200])
            if code == 7:
                time.sleep(LEASE / 10)
            return None
        key, fence_text = out.split()
        self.note("claim-next", key, int(fence_text), code)
        if key not in self.known:
            self.known.append(key)
        return key, int(fence_text)

    def stale_key(self) -> str | None:
        """A claimed task whose lease has run out (from `ledger list`), else a known key."""
        from ledger_cli.engine.instant import Instant

        code, out, _ = self.ledger("list", "--status", "claimed", "--jsonl")
        if code == 0:
            now = Instant.now()
            stale = [
                rec["Key"]
                for rec in map(json.loads, out.splitlines())
                if Instant.parse(rec["LeaseUntil"]) <= now
            ]
            if stale:
                return str(self.rng.choice(stale))
        return self.rng.choice(self.known) if self.known else None

    def hold(self, key: str, fence: int) -> None:
        lost = False
        for _ in range(self.rng.randint(0, 3)):
            time.sleep(self.rng.uniform(0.0, 0.3) * LEASE)
            if self.rng.random() < STALL_CHANCE:
                time.sleep(STALL)  # a stall: the lease runs out, someone may take over
            code, _, err = self.ledger(
                "renew", key, "--owner", self.name, "--fence", str(fence), "--lease", LEASE_ARG
            )
            self.note("renew", key, fence, code, err=err.strip()[:200])
            if code != 0:
                lost = True
                break
        if self.rng.random() < ABANDON_CHANCE:
            return  # walk away: the lease expires, another worker picks the task up
        if lost and self.rng.random() > STALE_WRITE_CHANCE:
            return
        if self.rng.random() < STALL_CHANCE:
            time.sleep(STALL)
        if self.rng.random() < 0.4:
            code, _, err = self.ledger("release", key, "--owner", self.name, "--fence", str(fence))
            self.note("release", key, fence, code, err=err.strip()[:200])
        else:
            failed = ["--failed"] if self.rng.random() < 0.15 else []
            code, _, err = self.ledger(
                "complete", key, "--owner", self.name, "--fence", str(fence), *failed
            )
            self.note("complete", key, fence, code, err=err.strip()[:200], failed=bool(failed))
            if code == 0:
                self.refill()

    def refill(self) -> None:
        """Admit a fresh task now and then, so that the pool never runs dry."""
        self.admitted += 1
        key = f"{self.name}-new-{self.admitted}"
        code, _, err = self.ledger("admit", key)
        self.note("admit", key, None, code, err=err.strip()[:200])

    def running(self) -> bool:
        """Until the test, having seen enough, creates the stop file."""
        return not os.path.exists(self.stop_file)

    def loop(self) -> None:
        while self.running():
            got = self.acquire()
            if got is not None:
                self.hold(*got)

    # -- the run worker ------------------------------------------------------------------

    def run_loop(self) -> None:
        while self.running():
            seconds = self.rng.uniform(0.1, 0.8)
            proc = subprocess.Popen(
                [sys.executable, "-m", "ledger_cli", "--store", self.store, "--actor", self.name,
                 "--json", "run", "--next", "--owner", self.name, "--lease", LEASE_ARG,
                 "--", "sleep", f"{seconds:.2f}"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            stopped = False
            if self.rng.random() < 0.6 and self.command_started(proc):
                time.sleep(self.rng.uniform(0.0, 0.5) * LEASE)
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGSTOP)  # the renewer stalls with it
                    stopped = True
                    time.sleep(STALL)
                    os.kill(proc.pid, signal.SIGCONT)
            out, err = proc.communicate(timeout=120)
            doc: dict[str, Any] = {}
            for line in out.splitlines():
                with contextlib.suppress(ValueError):
                    doc = json.loads(line)
            self.note(
                "run", doc.get("key"), doc.get("fence"), proc.returncode,
                stopped=stopped, err=err.strip()[-200:],
            )  # fmt: skip
            if proc.returncode == 0:
                self.refill()  # a task finished: another comes in
            elif proc.returncode == 7:
                time.sleep(LEASE / 5)

    @staticmethod
    def command_started(proc: subprocess.Popen[str]) -> bool:
        """Wait until `ledger run` has claimed and started its command (it has a child
        process), whatever the machine's speed; False when it exited first."""
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
                    if fh.read().split():
                        return True
            except FileNotFoundError:
                return False
            time.sleep(0.005)
        return False


def main(argv: list[str]) -> None:
    kind, store, name, stop_file, log = argv
    worker = Worker(kind, store, name, stop_file, log)
    if kind == "run":
        worker.run_loop()
    else:
        worker.loop()


if __name__ == "__main__":
    main(sys.argv[1:])
