"""`ledger output` (docs/design.md §7.2) and `ledger wait` (docs/design.md §7.5) through the command
line, on every durable store (subprocesses) and on MemStore (in process).

Attempts are written here through the store's AttemptLog, as `ledger run`
writes them, so these tests hold whatever runs the command.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ledger_cli.engine.attempts import Attempt
from ledger_cli.engine.memstore import MemStore
from ledger_cli.engine.store import Store
from ledger_cli.stores import open_store
from ledger_cli.stores.attemptlog import attempt_log
from tests.cli_support import Cli, ledger_cmd, run_ledger, subprocess_env

RAW = b"\x00nul \xff\xfe not utf-8 \x1b[1;31mred\x1b[0m\nline 2\nline 3\nno newline"


def _empty_store(url: str) -> None:
    """An empty store at `url`: a read refuses one that does not exist."""
    if url.startswith("json:"):
        Path(url.removeprefix("json:")).mkdir(parents=True, exist_ok=True)
    else:
        open_store(url).close()


def ledger(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*ledger_cmd(), "--store", url, *args],
        capture_output=True,
        env=subprocess_env(),
        timeout=timeout,
        check=False,
    )


def record_attempt(
    store: Store, key: str, output: bytes, *, total: int | None = None, **end: object
) -> Attempt:
    """An attempt of `key` as `ledger run` leaves it (ended unless told otherwise)."""
    log = attempt_log(store)
    rec = store.load(key)
    att = Attempt(
        key,
        fence=rec.fence if rec is not None else 0,
        owner="w1",
        host="h1",
        pid=99,
        started="2026-01-02T03:04:05Z",
    )
    att.n = log.start_attempt(att)
    att.output_bytes = len(output) if total is None else total
    att.kept_bytes = len(output)
    att.ended = "2026-01-02T03:04:09.2Z"
    att.exit = 1
    for name, value in end.items():
        setattr(att, name, value)
    log.save_attempt(att, output)
    return att


def test_output_is_the_kept_bytes_exactly(url: str) -> None:
    assert ledger(url, "admit", "job").returncode == 0
    with open_store(url) as store:
        record_attempt(store, "job", b"first run\n")
        record_attempt(store, "job", RAW, total=len(RAW) + 3_405_201)
    res = ledger(url, "output", "job")
    assert res.returncode == 0, res.stderr
    assert res.stdout == RAW
    assert res.stderr == b"ledger: the first 3,405,201 bytes of attempt 2 were not kept\n"
    res = ledger(url, "output", "job", "--attempt", "1")
    assert (res.returncode, res.stdout, res.stderr) == (0, b"first run\n", b"")
    assert ledger(url, "output", "job", "--tail", "2").stdout == b"line 3\nno newline"
    assert ledger(url, "output", "job", "--attempt", "1", "--tail", "1").stdout == b"first run\n"
    doc = json.loads(ledger(url, "--json", "output", "job").stdout)
    assert doc["key"] == "job"
    assert doc["attempt"]["n"] == 2 and doc["attempt"]["exit"] == 1
    assert doc["output"] == RAW.decode("utf-8", "replace")


def test_output_refusals(url: str) -> None:
    _empty_store(url)
    res = ledger(url, "output", "nope")
    assert res.returncode == 3
    assert ledger(url, "admit", "job").returncode == 0
    res = ledger(url, "output", "job")
    assert (res.returncode, res.stdout) == (1, b"")
    assert res.stderr == b"ledger: job has no recorded run\n"
    with open_store(url) as store:
        record_attempt(store, "job", b"x")
    for bad in ("0", "x", "-1", "1.5"):
        res = ledger(url, "output", "job", "--attempt", bad)
        assert res.returncode == 2, (bad, res.stderr)
        assert len(res.stderr.decode().strip().splitlines()) <= 3
    res = ledger(url, "output", "job", "--attempt", "7")
    assert res.returncode == 1 and b"no attempt 7" in res.stderr
    assert ledger(url, "output", "job", "--tail", "many").returncode == 2


@pytest.mark.parametrize("bad", ["0", "-1", "00", "x"])
def test_attempt_zero_and_negative_are_one_refusal(tmp_path: Path, bad: str) -> None:
    """`--attempt 0` said `usage` "--attempt counts from 1", `--attempt -1`
    `bad_number` "must be a non-negative integer" (as if 0 were allowed):
    one code and one message for every number that names no attempt."""
    store = str(tmp_path / "store")
    assert ledger(store, "admit", "job").returncode == 0
    res = ledger(store, "--json", "output", "job", "--attempt", bad)
    assert res.returncode == 2
    message = f'ledger: --attempt must be a positive integer (attempts count from 1), got "{bad}"'
    assert json.loads(res.stdout)["error"] == {"code": "bad_number", "message": message, "exit": 2}
    plain = ledger(store, "output", "job", "--attempt", bad)
    assert (plain.returncode, plain.stdout, plain.stderr) == (2, b"", message.encode() + b"\n")


def test_follow_streams_another_process_writing(url: str) -> None:
    """The reader is a `ledger output --follow` process; the writer is this one,
    saving as a runner's flusher does; each step waits for the reader's state."""
    assert ledger(url, "admit", "job").returncode == 0
    assert ledger(url, "claim", "job", "--owner", "w1", "--lease", "10m").returncode == 0
    with open_store(url) as store:
        log = attempt_log(store)
        att = Attempt("job", fence=1, owner="w1", host="h1", pid=1, started="2026-01-02T03:04:05Z")
        att.n = log.start_attempt(att)
        reader = subprocess.Popen(
            [*ledger_cmd(), "--store", url, "output", "job", "--follow"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
        )
        assert reader.stdout is not None
        try:
            kept = b""
            for chunk in (b"one\n", b"two \x00\xff\n", b"three"):
                kept += chunk
                att.output_bytes = att.kept_bytes = len(kept)
                log.save_attempt(att, kept)
                got = b""
                while len(got) < len(chunk):  # what is new, and only that
                    part = reader.stdout.read1(4096)
                    assert part, "the reader stopped early"
                    got += part
                assert got == chunk
            att.ended, att.exit = "2026-01-02T03:04:09.2Z", 0
            log.save_attempt(att, None)
            out, err = reader.communicate(timeout=60)
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.wait()
    assert reader.returncode == 0
    assert out == b""
    assert err == b"ledger: attempt 1 of job exited 0 after 4.2s\n"


def test_follow_ends_when_the_runner_is_gone(url: str) -> None:
    """An attempt whose runner died never ends; once the record moved on
    (here: taken over and completed) it is abandoned, and --follow stops (exit 5)."""
    assert ledger(url, "admit", "job").returncode == 0
    assert ledger(url, "claim", "job", "--owner", "w1", "--lease", "1s").returncode == 0
    with open_store(url) as store:
        record_attempt(store, "job", b"half", ended=None, exit=None)
    f = ledger(
        url, "takeover", "job", "--owner", "w2", "--lease", "1m", "--now", "2099-01-01T00:00:00Z"
    )
    assert f.returncode == 0, f.stderr
    assert ledger(url, "complete", "job", "--owner", "w2", "--fence", "2").returncode == 0
    line = b"ledger: attempt 1 of job was abandoned: no end was recorded and the lease"
    res = ledger(url, "output", "job", "--follow")
    assert (res.returncode, res.stdout) == (5, b"half")
    assert res.stderr == line + b" it ran under is over\n"
    res = ledger(url, "output", "job")  # what was kept, told as abandoned
    assert (res.returncode, res.stdout) == (0, b"half")
    assert res.stderr.startswith(line)
    res = ledger(url, "--json", "output", "job", "--follow")
    assert (res.returncode, res.stderr) == (5, b"")
    doc = json.loads(res.stdout)
    assert doc["attempt"]["abandoned"] is True and doc["attempt"]["ended"] is None
    assert doc["output"] == "half"


def test_wait_settles_as_workers_in_other_processes_finish(url: str) -> None:
    for key in ("a", "b", "c"):
        assert ledger(url, "admit", key).returncode == 0
    waiter = subprocess.Popen(
        [*ledger_cmd(), "--store", url, "wait", "a", "b", "c", "--interval", "0.05s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
        text=True,
    )
    assert waiter.stdout is not None
    try:
        # Each worker is a process of its own; the waiter prints each settling.
        for key, failed in (("b", False), ("a", True)):
            f = ledger(url, "claim", key, "--owner", "w", "--lease", "1m").stdout.decode().strip()
            args = ["complete", key, "--owner", "w", "--fence", f] + (
                ["--failed"] if failed else []
            )
            assert ledger(url, *args).returncode == 0
            line = waiter.stdout.readline()
            assert line == (f"failed {key}\n" if failed else f"completed {key}\n")
        assert waiter.poll() is None  # c is still pending
        f = ledger(url, "claim", "c", "--owner", "w", "--lease", "1m").stdout.decode().strip()
        assert ledger(url, "complete", "c", "--owner", "w", "--fence", f).returncode == 0
        out, _err = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert out == "completed c\n"
    assert waiter.returncode == 1  # a failed


def test_wait_exit_codes(url: str) -> None:
    assert ledger(url, "admit", "done").returncode == 0
    f = ledger(url, "claim", "done", "--owner", "w", "--lease", "1m").stdout.decode().strip()
    assert ledger(url, "complete", "done", "--owner", "w", "--fence", f).returncode == 0
    res = ledger(url, "wait", "done")
    assert (res.returncode, res.stdout) == (0, b"completed done\n")
    res = ledger(url, "wait", "done", "typo")
    assert res.returncode == 3 and res.stdout == b""
    assert ledger(url, "admit", "root").returncode == 0
    assert ledger(url, "admit", "leaf", "--needs", "root").returncode == 0
    f = ledger(url, "claim", "root", "--owner", "w", "--lease", "1m").stdout.decode().strip()
    with open_store(url) as store:
        record_attempt(store, "root", b"boom\n", exit=2)
    assert ledger(url, "complete", "root", "--owner", "w", "--fence", f, "--failed").returncode == 0
    res = ledger(url, "wait", "root", "leaf")
    assert res.returncode == 1
    assert res.stdout.decode().splitlines() == ["failed root (exit 2)", "blocked leaf by root"]
    doc = json.loads(ledger(url, "--json", "wait", "done", "root").stdout)
    assert doc == {
        "settled": [
            {"key": "done", "status": "completed", "blocked_by": None, "exit": None},
            {"key": "root", "status": "failed", "blocked_by": None, "exit": 2},
        ],
        "unsettled": [],
        "timed_out": False,
    }
    assert ledger(url, "admit", "open").returncode == 0
    res = ledger(url, "wait", "open", "done", "--timeout", "0.3s", "--interval", "0.1s")
    assert res.returncode == 124
    assert res.stderr == b"ledger: timed out; 1 still unsettled: open\n"
    res = ledger(url, "wait", "--all", "--timeout", "0.3s", "--interval", "0.1s")
    assert res.returncode == 124


def test_wait_all(url: str) -> None:
    _empty_store(url)
    assert ledger(url, "wait", "--all").returncode == 0  # nothing at all
    assert ledger(url, "admit", "a").returncode == 0
    f = ledger(url, "claim", "a", "--owner", "w", "--lease", "1m").stdout.decode().strip()
    assert ledger(url, "complete", "a", "--owner", "w", "--fence", f).returncode == 0
    assert ledger(url, "wait", "--all").returncode == 0
    assert ledger(url, "admit", "b").returncode == 0
    f = ledger(url, "claim", "b", "--owner", "w", "--lease", "1m").stdout.decode().strip()
    assert ledger(url, "complete", "b", "--owner", "w", "--fence", f, "--failed").returncode == 0
    res = ledger(url, "wait", "--all")
    assert res.returncode == 1
    assert res.stderr == b"ledger: 1 record failed or blocked: b\n"


def test_wait_all_timing_out_lists_what_is_unsettled(url: str) -> None:
    """`--all --json` that times out names every pending and claimed key (of
    the given queues), as `wait KEY…` does, and under `settled` every failed
    and blocked record (reference.md), as when it does not time out."""
    for key, queue in (("b", "default"), ("a", "default"), ("q1", "q"), ("f", "default")):
        assert ledger(url, "admit", key, "--queue", queue).returncode == 0
    assert ledger(url, "claim", "a", "--owner", "w", "--lease", "1m").returncode == 0
    f = ledger(url, "claim", "f", "--owner", "w", "--lease", "1m").stdout.decode().strip()
    assert ledger(url, "complete", "f", "--owner", "w", "--fence", f, "--failed").returncode == 0
    assert ledger(url, "admit", "g", "--needs", "f").returncode == 0  # blocked at admission
    res = ledger(url, "--json", "wait", "--all", "--timeout", "0.2s", "--interval", "0.1s")
    assert res.returncode == 124
    assert json.loads(res.stdout) == {
        "settled": [
            {"key": "f", "status": "failed", "blocked_by": None, "exit": None},
            {"key": "g", "status": "blocked", "blocked_by": "f", "exit": None},
        ],
        "unsettled": ["a", "b", "q1"],
        "timed_out": True,
    }
    res = ledger(url, "--json", "wait", "--all", "--queue", "q", "--timeout", "0.2s")
    assert json.loads(res.stdout) == {"settled": [], "unsettled": ["q1"], "timed_out": True}


def test_wait_all_names_the_failed_and_blocked(url: str) -> None:
    """The first five on stderr, then how many more; every one in `--json`,
    each with its latest attempt's exit (0 for a run that exited 0)."""
    assert ledger(url, "admit", "ok").returncode == 0
    assert ledger(url, "run", "ok", "--owner", "w", "--lease", "1m", "--", "true").returncode == 0
    doc = json.loads(ledger(url, "--json", "wait", "ok").stdout)
    assert doc["settled"] == [{"key": "ok", "status": "completed", "blocked_by": None, "exit": 0}]
    for key in ("f1", "f2", "f3", "f4", "f5", "f6"):
        assert ledger(url, "admit", key).returncode == 0
        run = ledger(url, "run", key, "--owner", "w", "--lease", "1m", "--", "sh", "-c", "exit 3")
        assert run.returncode == 3
    assert ledger(url, "admit", "g", "--needs", "f2").returncode == 0  # blocked at admission
    res = ledger(url, "wait", "--all")
    assert res.returncode == 1 and res.stdout == b""
    assert res.stderr == b"ledger: 7 records failed or blocked: f1, f2, f3, f4, f5 and 2 more\n"
    res = ledger(url, "--json", "wait", "--all")
    assert res.returncode == 1
    failed = [
        {"key": f"f{n}", "status": "failed", "blocked_by": None, "exit": 3} for n in range(1, 7)
    ]
    blocked = {"key": "g", "status": "blocked", "blocked_by": "f2", "exit": None}
    assert json.loads(res.stdout) == {
        "settled": [*failed, blocked],
        "unsettled": [],
        "timed_out": False,
    }


@pytest.mark.parametrize(
    "args",
    [
        ["wait"],
        ["wait", "a", "--all"],
        ["wait", "a", "--timeout", "0s"],
        ["wait", "a", "--timeout", "-1s"],
        ["wait", "a", "--timeout", "soon"],
        ["wait", "a", "--interval", "0"],
    ],
)
def test_wait_bad_input_is_exit_2(args: list[str], tmp_path: Path) -> None:
    res = run_ledger(tmp_path / "s", *args)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    assert not (tmp_path / "s").exists()  # nothing written


class CountingStore(MemStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []

    def load(self, key: str):  # type: ignore[no-untyped-def]
        self.loads.append(key)
        return super().load(key)


def test_each_poll_reads_only_the_unsettled_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    store = CountingStore()
    cli = Cli(store, monkeypatch)
    keys = [f"k{i:02d}" for i in range(40)]
    for key in keys:
        cli.ok("admit", key)
    for key in keys[:36]:
        fence = cli.ok("claim", key, "--owner", "w", "--lease", "1m").stdout.strip()
        cli.ok("complete", key, "--owner", "w", "--fence", fence)
    store.loads.clear()
    res = cli("wait", *keys, "--timeout", "0.5s", "--interval", "0.05s")
    assert res.code == 124
    checked, first_poll, later = store.loads[:40], store.loads[40:80], store.loads[80:]
    assert checked == keys and first_poll == keys  # every key once, then each poll
    assert later, "no second poll"
    assert set(later) == set(keys[36:])  # the unsettled ones only
    assert len(later) % 4 == 0
