"""`ledger run` records every start of its command (docs/design.md §7.1, §7.3, §7.4), on
every durable store (the runner a process of its own) and on MemStore (in
process): the attempt, the tee'd output, `--keep-output`, `--timeout`, the
history line and `--json`; and the faults — a runner SIGKILLed mid-command, a
store error while flushing, bad inputs.

No test waits for a time: each waits for a state (a file, a line of output,
an attempt in the store), and the durations given are far from the waits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger_cli.errors import StoreError
from ledger_cli.stores import attemptlog, open_store
from ledger_cli.stores.attemptlog import attempt_log
from tests.cli.test_output_wait import ledger
from tests.cli_support import ledger_cmd, make_cli, subprocess_env

PY = sys.executable


def attempts(url: str, key: str = "job") -> list[dict[str, object]]:
    with open_store(url) as store:
        return [a.to_obj() for a in attempt_log(store).list_attempts(key)]


def wait_for(predicate, what: str, limit: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    """Poll for a state (the limit only stops a broken test from hanging)."""
    end = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.02)


def test_run_records_the_attempt_and_tees_its_output(url: str) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    script = "import sys; sys.stdout.buffer.write(b'out \\x00\\xff\\n'); sys.stdout.flush(); " \
        "sys.stderr.write('err\\n'); sys.exit(3)"  # fmt: skip
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", "--", PY, "-c", script)
    assert res.returncode == 3
    assert res.stdout == b"out \x00\xff\n"  # the runner's own stdout, unchanged
    assert res.stderr == b"err\n"
    (att,) = attempts(url)
    assert att["n"] == 1 and att["fence"] == 1 and att["try"] == 1
    assert att["owner"] == "w1" and att["exit"] == 3 and att["signal"] is None
    assert att["ended"] is not None and att["timed_out"] is False
    assert att["output_bytes"] == att["kept_bytes"] == len(b"out \x00\xff\nerr\n")
    out = ledger(url, "output", "job").stdout
    assert sorted(out.splitlines()) == sorted([b"out \x00\xff", b"err"])
    log = ledger(url, "log", "job").stdout.decode()
    assert "key job completed as failed by w1 (exit 3 after " in log
    assert ", attempt 1)" in log
    state = json.loads(ledger(url, "--json", "state", "job").stdout)
    assert [a["n"] for a in state["attempts"]] == [1]
    text = ledger(url, "state", "job").stdout.decode()
    assert "exit 3" in text and "output job" in text  # all of it: ledger --store URL output job


def test_retries_each_start_is_an_attempt_and_json(url: str, tmp_path: Path) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    count = tmp_path / "count"
    script = (
        f"import pathlib, sys; p = pathlib.Path({str(count)!r}); "
        "n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n)); "
        "print('try', n); sys.exit(0 if n == 3 else 1)"
    )
    res = ledger(url, "--json", "run", "job", "--owner", "w1", "--lease", "1m",
                 "--retries", "3", "--backoff", "0.01s", "--", PY, "-c", script)  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout.decode().splitlines()[-1])
    assert doc["attempt"]["n"] == 3 and doc["attempt"]["exit"] == 0
    got = attempts(url)
    assert [(a["n"], a["try"], a["exit"]) for a in got] == [(1, 1, 1), (2, 2, 1), (3, 3, 0)]
    assert ledger(url, "output", "job", "--attempt", "2").stdout == b"try 2\n"


def test_keep_output_keeps_the_tail_bytes_exact(url: str) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    script = "import sys; sys.stdout.buffer.write(b'x' * 100000 + b'\\x1b[31m\\x00\\xfeEND')"
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m",
                 "--keep-output", "16", "--", PY, "-c", script)  # fmt: skip
    assert res.returncode == 0
    assert len(res.stdout) == 100000 + 10
    (att,) = attempts(url)
    assert att["output_bytes"] == 100010 and att["kept_bytes"] == 16
    res = ledger(url, "output", "job")
    assert res.stdout == b"xxxxxx\x1b[31m\x00\xfeEND"
    assert res.stderr == b"ledger: the first 99,994 bytes of attempt 1 were not kept\n"


def test_keep_output_0_connects_the_command_straight(url: str) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    script = "import os, sys; print(os.path.samestat(os.fstat(1), os.fstat(sys.argv[1] and 1)))"
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", "--keep-output", "0",
                 "--", PY, "-c", script, "x")  # fmt: skip
    assert res.returncode == 0 and res.stdout == b"True\n"
    (att,) = attempts(url)
    assert att["kept_bytes"] == 0 and att["exit"] == 0
    res = ledger(url, "output", "job")
    assert (res.returncode, res.stdout) == (0, b"")


def test_output_of_an_attempt_that_kept_none_says_so(url: str) -> None:
    """`--keep-output 0` keeps nothing: `ledger output` prints nothing, exits 0
    (the run is recorded) and says why on stderr, in one line, with --json
    and --follow too. Its output went uncounted, so it reads as a command
    that wrote nothing: the line names both."""
    assert ledger(url, "admit", "job").returncode == 0
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", "--keep-output", "0",
                 "--", PY, "-c", "print('straight through')")  # fmt: skip
    assert res.returncode == 0 and res.stdout == b"straight through\n"
    note = (
        b"ledger: no output was kept for attempt 1 of job "
        b"(it wrote none, or it ran with --keep-output 0)\n"
    )
    res = ledger(url, "output", "job")
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", note)
    res = ledger(url, "--json", "output", "job")
    assert (res.returncode, res.stderr) == (0, note)
    assert json.loads(res.stdout)["output"] == ""
    res = ledger(url, "output", "job", "--follow")
    assert (res.returncode, res.stdout) == (0, b"")
    assert res.stderr.splitlines()[0] + b"\n" == note


@pytest.mark.parametrize(
    "extra",
    [
        ["--keep-output", "65MiB"],
        ["--keep-output", "-1"],
        ["--keep-output", "lots"],
        ["--timeout", "0"],
        ["--timeout", "-5s"],
        ["--timeout", "soon"],
        ["--kill-after", "1s"],
        ["--timeout", "1s", "--kill-after", "never"],
    ],
)
def test_bad_run_inputs_are_exit_2_and_write_nothing(extra: list[str], tmp_path: Path) -> None:
    url = f"json:{tmp_path / 's'}"
    assert ledger(url, "admit", "job").returncode == 0
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", *extra, "--", "true")
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.decode().strip().splitlines()) <= 3
    state = json.loads(ledger(url, "--json", "state", "job").stdout)
    assert state["Status"] == "pending" and state["attempts"] == []


def test_timeout_stops_the_command_and_exits_124(url: str) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    script = "import time; print('going', flush=True); time.sleep(60)"
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", "--timeout", "0.5s",
                 "--", PY, "-c", script)  # fmt: skip
    assert res.returncode == 124
    (att,) = attempts(url)
    assert att["timed_out"] is True and att["signal"] == "SIGTERM" and att["exit"] is None
    state = json.loads(ledger(url, "--json", "state", "job").stdout)
    assert state["Status"] == "failed"
    assert "job  failed (timed out)" in ledger(url, "tree").stdout.decode()
    assert ledger(url, "output", "job").stdout == b"going\n"


def test_kill_after_escalates_to_sigkill(tmp_path: Path) -> None:
    url = f"json:{tmp_path / 's'}"
    assert ledger(url, "admit", "job").returncode == 0
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", "--timeout", "0.3s",
                 "--kill-after", "0.3s", "--", PY, "-c", script)  # fmt: skip
    assert res.returncode == 124
    (att,) = attempts(url)
    assert att["timed_out"] is True and att["signal"] == "SIGKILL"


def test_a_runner_killed_mid_command_leaves_what_was_flushed(url: str) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    script = "import time; print('started', flush=True); time.sleep(120)"
    runner = subprocess.Popen(
        [*[PY, "-m", "ledger_cli"], "--store", url, "run", "job", "--owner", "w1",
         "--lease", "2s", "--", PY, "-c", script],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=subprocess_env(),
    )  # fmt: skip
    try:
        # What the runner flushed is visible to other processes while it runs.
        wait_for(lambda: ledger(url, "output", "job").stdout == b"started\n", "a flush")
    finally:
        runner.kill()
        runner.wait()
    (att,) = attempts(url)
    assert att["ended"] is None and att["exit"] is None
    os.killpg(int(att["pid"]), signal.SIGKILL)  # the command's group outlived its runner
    assert ledger(url, "output", "job").stdout == b"started\n"
    # The next claimer (once the lease has run out) records attempt 2.
    state = json.loads(ledger(url, "--json", "state", "job").stdout)
    later = "2099-01-01T00:00:00Z"
    assert state["Status"] == "claimed"
    res = ledger(url, "--now", later, "run", "job", "--owner", "w2", "--lease", "1m",
                 "--", PY, "-c", "print('again')")  # fmt: skip
    assert res.returncode == 0, res.stderr
    got = attempts(url)
    assert [(a["n"], a["fence"], a["owner"]) for a in got] == [(1, 1, "w1"), (2, 2, "w2")]
    shown = json.loads(ledger(url, "--json", "state", "job").stdout)["attempts"]
    assert [a["abandoned"] for a in shown] == [True, False]  # taken over: its runner is gone
    assert ledger(url, "output", "job").stdout == b"again\n"


def test_follow_a_real_run_from_another_process(url: str, tmp_path: Path) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    go = tmp_path / "go"
    script = (
        "import os, time; print('first', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "print('second', flush=True)"
    )
    env = subprocess_env()
    runner = subprocess.Popen(
        [PY, "-m", "ledger_cli", "--store", url, "run", "job", "--owner", "w1", "--lease", "1m",
         "--", PY, "-c", script],
        stdout=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    try:
        wait_for(lambda: bool(attempts(url)), "the attempt")
        reader = subprocess.Popen(
            [PY, "-m", "ledger_cli", "--store", url, "output", "job", "--follow"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        assert reader.stdout is not None
        assert reader.stdout.readline() == b"first\n"  # while the command still runs
        go.touch()
        out, err = reader.communicate(timeout=120)
        assert out == b"second\n"
        assert err.startswith(b"ledger: attempt 1 of job exited 0 after ")
        assert runner.wait(timeout=120) == 0
    finally:
        for p in (runner,):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_memstore_run_and_a_store_error_while_flushing(monkeypatch: pytest.MonkeyPatch) -> None:
    """In process on MemStore: a save that fails is one warning; the command goes
    on and the completion lands."""
    cli = make_cli(monkeypatch)
    cli.ok("admit", "job")
    res = cli("run", "job", "--owner", "w1", "--lease", "1m", "--", PY, "-c", "print('hi')")
    assert res.code == 0, res.stderr
    assert cli.ok("output", "job").stdout == "hi\n"

    def broken(self: object, att: object, output: bytes | None) -> None:
        raise StoreError("ledger: store: disk full (injected)")

    monkeypatch.setattr(attemptlog.MemAttempts, "save_attempt", broken)
    cli.ok("admit", "two")
    script = "import time\nfor i in range(3): print(i, flush=True); time.sleep(0.6)"
    res = cli("run", "two", "--owner", "w1", "--lease", "1m", "--", PY, "-c", script)
    assert res.code == 0
    assert res.stdout == "0\n1\n2\n"
    warnings = res.stderr.splitlines()
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("ledger: recording the output of two: store: disk full")  # once
    assert cli.store.load("two").status == "completed"  # type: ignore[union-attr]


def test_drain_records_an_attempt_per_task(tmp_path: Path) -> None:
    url = f"json:{tmp_path / 's'}"
    for key in ("a", "b", "c"):
        assert ledger(url, "admit", key).returncode == 0
    res = ledger(url, "run", "--next", "--drain", "--owner", "w1", "--lease", "1m",
                 "--", "sh", "-c", 'echo "did $LEDGER_KEY"')  # fmt: skip
    assert res.returncode == 0, res.stderr
    for key in ("a", "b", "c"):
        (att,) = attempts(url, key)
        assert att["exit"] == 0
        assert ledger(url, "output", key).stdout == f"did {key}\n".encode()


def test_a_huge_line_is_kept_tail_bounded_in_bounded_memory(tmp_path: Path) -> None:
    """128 MiB in one line without a newline: the runner keeps the last 1 MiB,
    byte for byte, and its peak RSS stays far below what was printed."""
    url = f"json:{tmp_path / 's'}"
    assert ledger(url, "admit", "job").returncode == 0
    script = (
        "import os\nblock = bytes(range(256)) * 4096\n"
        "for _ in range(128): os.write(1, block)\nos.write(1, b'END')"
    )
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    res = subprocess.run(
        [PY, "-c", probe, PY, "-m", "ledger_cli", "--store", url, "run", "job", "--owner", "w1",
         "--lease", "1m", "--", PY, "-c", script],
        capture_output=True, env=subprocess_env(), check=True, timeout=600,
    )  # fmt: skip
    peak_mib = int(res.stdout.split()[-1]) / 1024
    assert peak_mib < 96, peak_mib  # 128 MiB went through; a bounded tail stays well below
    (att,) = attempts(url)
    assert att["output_bytes"] == 128 * (1 << 20) + 3 and att["kept_bytes"] == 1 << 20
    kept = ledger(url, "output", "job").stdout
    assert kept == ((bytes(range(256)) * 4096) + b"END")[-(1 << 20) :]


def test_a_command_that_cannot_start_leaves_no_attempt(url: str, tmp_path: Path) -> None:
    # On JSON the first attempt starts in the claim's unit, before the command
    # runs: one that cannot be started takes that attempt back (docs/design.md §7.1: an
    # attempt is a start of the command).
    assert ledger(url, "admit", "job").returncode == 0
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", "--",
                 str(tmp_path / "no-such-command"))  # fmt: skip
    assert res.returncode == 127
    assert attempts(url) == []
    res = ledger(url, "run", "job", "--owner", "w1", "--lease", "1m", "--", "true")
    assert res.returncode == 0, res.stderr
    assert [a["n"] for a in attempts(url)] == [1]


def test_a_running_commands_attempt_shows_its_pid(url: str) -> None:
    """While the command runs, `ledger output --json` (a fresh process) shows
    the command's own pid in its attempt: on the JSON store from the pid note
    beside an attempt started with the claim, on SQL once the command
    outlives the runner's first poll."""
    assert ledger(url, "admit", "job").returncode == 0
    script = (
        "import json, os, subprocess, sys, time\n"
        "end = time.monotonic() + 60\n"
        "while time.monotonic() < end:\n"
        "    out = subprocess.run(sys.argv[1:], capture_output=True).stdout\n"
        "    if json.loads(out)['attempt']['pid'] == os.getpid():\n"
        "        sys.exit(0)\n"
        "    time.sleep(0.05)\n"
        "sys.exit(3)\n"
    )
    watch = [*ledger_cmd(), "--store", url, "output", "job", "--json"]
    run = ("run", "job", "--owner", "w1", "--lease", "1m", "--", PY, "-c", script, *watch)
    res = ledger(url, *run)
    assert res.returncode == 0, res.stderr
