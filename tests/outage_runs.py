"""The commands and checks of the outage fault tests (tests/faults/test_faults_outage*.py).

Each task's command (JOB) appends `start KEY FENCE T` and `end KEY FENCE T`
(T: the wall clock) to a log, so a test sees every run of every command and
when it ran (`Runs`); `Ledger` is a `ledger` process whose stderr is read as
it comes, to wait for a warning.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
from datetime import datetime
from pathlib import Path

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.go_support import go_connect
from tests.timing_support import HANG

JOB = """\
log="$1"; secs="$2"
exec 2>>"$log.err"  # the command's own stderr is not ledger's
now() { date +%s.%N; }
echo "start $LEDGER_KEY $LEDGER_FENCE $(now)" >> "$log"
trap 'echo "end $LEDGER_KEY $LEDGER_FENCE $(now) stopped" >> "$log"; exit 143' TERM
if [ "$secs" = flag ]; then
  while [ ! -e "$log.go" ]; do sleep 0.02; done
else
  sleep "$secs" & wait $!
fi
echo "end $LEDGER_KEY $LEDGER_FENCE $(now)" >> "$log"
"""


class Ledger:
    """A `ledger` process whose stderr is read as it comes (to wait for a warning)."""

    def __init__(self, url: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*ledger_cmd(), "--store", url, *args],
            env=subprocess_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.stderr)

    def wait(self) -> int:
        try:
            rc = self.proc.wait(timeout=HANG)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # a hang is a failure: leave no process behind
            self.proc.wait()
            raise
        self._reader.join(HANG)
        return rc


class Runs:
    """The log the commands write: every run of every task's command."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "runs.log"
        self.path.touch()
        self.script = tmp_path / "job.sh"
        self.script.write_text(JOB)

    def command(self, secs: str) -> list[str]:
        return ["--", "sh", str(self.script), str(self.path), secs]

    def lines(self) -> list[list[str]]:
        return [line.split() for line in self.path.read_text().splitlines() if line.strip()]

    def starts(self) -> int:
        return sum(1 for parts in self.lines() if parts[0] == "start")

    def finish(self) -> None:
        (self.path.parent / (self.path.name + ".go")).touch()

    def by_key(self) -> dict[str, list[tuple[float, float | None]]]:
        """Each key's runs as (start, end) in start order (end None: still running)."""
        runs: dict[tuple[str, str], list[float | None]] = {}
        for parts in self.lines():
            kind, key, fence, at = parts[:4]
            slot = runs.setdefault((key, fence), [None, None])
            slot[0 if kind == "start" else 1] = float(at)
        out: dict[str, list[tuple[float, float | None]]] = {}
        for (key, _), (start, end) in runs.items():
            assert start is not None, f"{key}: an end without a start"
            out.setdefault(key, []).append((start, end))
        return {key: sorted(spans) for key, spans in out.items()}

    def assert_no_overlap(self) -> None:
        for key, spans in self.by_key().items():
            for (_, end), (start, _) in itertools.pairwise(spans):
                assert end is not None and end <= start, f"{key}: two runs at once: {spans}"


def admit(url: str, *keys: str) -> None:
    lines = "".join(json.dumps({"key": key}) + "\n" for key in keys)
    done = subprocess.run(
        [*ledger_cmd(), "--store", url, "admit", "--batch", "-"],
        input=lines,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def state(url: str, key: str) -> dict[str, object]:
    res = run_ledger(url, "state", key, "--json")
    assert res.returncode == 0, res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def lease_end(url: str, key: str) -> float:
    """The record's lease_until as a POSIX time (the store's clock is this host's)."""
    text = str(state(url, key)["LeaseUntil"]).removesuffix("Z")
    whole, _, frac = text.partition(".")
    at = datetime.fromisoformat(whole + "+00:00").timestamp()
    return at + float(f"0.{frac or 0}")


def assert_ours(*workers: Ledger) -> None:
    """stderr holds our own one-line messages only: no psycopg noise, no traceback."""
    for worker in workers:
        for line in worker.stderr:
            assert line.startswith("ledger: "), worker.stderr


def assert_clean(url: str) -> None:
    res = run_ledger(url, "doctor")
    assert res.returncode == 0, res.stdout + res.stderr


def assert_each_once(url: str, runs: Runs, keys: list[str]) -> None:
    """Each task's command ran once, and each task was completed once."""
    spans = runs.by_key()
    twice = {key: s for key, s in spans.items() if len(s) != 1}
    assert not twice, f"commands ran twice: {twice}"
    assert sorted(spans) == sorted(keys)
    listed = run_ledger(url, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {r["Key"]: r["Status"] for r in json.loads(listed.stdout)} == dict.fromkeys(
        keys, "completed"
    )
    log = run_ledger(url, "log", "--json")
    assert log.returncode == 0, log.stderr
    done = [e["key"] for e in json.loads(log.stdout) if e["event"] == "ledger.completed"]
    assert sorted(done) == sorted(keys), "a task was completed twice, or not at all"


def lock_sqlite(db: Path) -> object:
    conn = go_connect(db)
    conn.execute("BEGIN IMMEDIATE")  # the write lock, as a Go writer holds it
    return conn
