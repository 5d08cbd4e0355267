"""`ledger run … | head` ends as `yes | head` does (docs/design.md §7.1): once
the runner's own stdout (or stderr) has lost its reader, the command's writes
to that stream fail too (the read end of its pipe is closed), so the command
gets SIGPIPE, or EPIPE when it ignores the signal. The task fails as the
command did (exit 141 for a SIGPIPE), the output read up to then is kept.

Fresh processes on every durable store, each a pipeline into `head -c`: no
test waits for a time, each waits for the runner to end (the bound only stops
a broken test from hanging: without the fix the runner never ends).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.cli_support import ledger_cmd, run_ledger, state_attempts, subprocess_env

HUNG = 60.0  # a bound for a hung test, never a timing assertion
READER_GONE = 141
IGNORES_SIGPIPE = """
import signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
try:
    while True:
        sys.stdout.write("x" * 100 + "\\n")
        sys.stdout.flush()
except BrokenPipeError:
    sys.exit(3)
"""


def through_head(url: str, stream: str, *args: str) -> tuple[int, bytes, bytes]:
    """`ledger --store URL ARGS` with its `stream` ("stdout" or "stderr") piped
    into `head -c 4`: its exit status, what head printed, its other stream."""
    cmd = [*ledger_cmd(), "--store", url, *args]
    pipe = {stream: subprocess.PIPE}
    other = "stderr" if stream == "stdout" else "stdout"
    with (
        subprocess.Popen(cmd, env=subprocess_env(), **pipe, **{other: subprocess.PIPE}) as runner,
        contextlib.ExitStack() as stack,
    ):
        out = getattr(runner, stream)
        head = stack.enter_context(
            subprocess.Popen(["head", "-c", "4"], stdin=out, stdout=subprocess.PIPE)
        )
        out.close()  # head holds the read end alone: it leaves, the reader is gone
        printed, _ = head.communicate(timeout=HUNG)
        try:
            pair = runner.communicate(timeout=HUNG)
        except subprocess.TimeoutExpired:
            runner.send_signal(signal.SIGTERM)  # passed on to the command
            runner.communicate()
            raise
        return runner.returncode, printed, pair[0 if other == "stdout" else 1]


@pytest.fixture
def admitted(url: str) -> str:
    assert run_ledger(url, "admit", "job").returncode == 0
    return url


def one_attempt(url: str) -> dict[str, Any]:
    (att,) = state_attempts(url)
    return att


def status(url: str) -> str:
    res = run_ledger(url, "--json", "state", "job")
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["Status"])


RUN = ["run", "job", "--owner", "w", "--lease", "1m", "--"]


def test_a_command_whose_stdout_reader_left_gets_sigpipe(admitted: str) -> None:
    code, printed, err = through_head(admitted, "stdout", *RUN, "yes")
    assert (code, printed, err) == (READER_GONE, b"y\ny\n", b"")
    assert status(admitted) == "failed"
    att = one_attempt(admitted)
    assert (att["exit"], att["signal"]) == (None, "SIGPIPE")
    kept = run_ledger(admitted, "output", "job").stdout
    assert kept.startswith("y\ny\n") and att["kept_bytes"] == len(kept) > 0


@pytest.mark.parametrize("json_mode", [False, True], ids=["stderr", "json-stdout-on-stderr"])
def test_a_command_whose_stderr_reader_left_gets_sigpipe(admitted: str, json_mode: bool) -> None:
    """Its stderr into the runner's stderr; under --json its stdout goes there too."""
    args = ["--json", *RUN, "yes"] if json_mode else [*RUN, "sh", "-c", "exec yes >&2"]
    code, printed, out = through_head(admitted, "stderr", *args)
    assert (code, printed) == (READER_GONE, b"y\ny\n")
    if json_mode:
        doc = json.loads(out)
        assert (doc["status"], doc["exit"]) == ("failed", READER_GONE)
    else:
        assert out == b""
    assert status(admitted) == "failed"
    assert one_attempt(admitted)["signal"] == "SIGPIPE"


def test_a_command_that_ignores_sigpipe_ends_on_its_epipe(admitted: str) -> None:
    code, printed, _err = through_head(
        admitted, "stdout", *RUN, sys.executable, "-c", IGNORES_SIGPIPE
    )
    assert (code, printed) == (3, b"xxxx")
    assert status(admitted) == "failed"
    att = one_attempt(admitted)
    assert (att["exit"], att["signal"]) == (3, None)


DRAIN = ["run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--"]


def statuses(url: str) -> dict[str, str]:
    res = run_ledger(url, "--json", "list")
    assert res.returncode == 0, res.stderr
    return {r["Key"]: r["Status"] for r in json.loads(res.stdout)}


def test_a_drain_whose_reader_left_claims_nothing_more(url: str) -> None:
    """`run --drain -- yes | head`: the task in hand ends on its SIGPIPE, and the
    drain stops as SIGPIPE would stop it, rather than fail every task after it."""
    for key in ("a", "b", "c"):
        assert run_ledger(url, "admit", key).returncode == 0
    code, printed, err = through_head(url, "stdout", *DRAIN, "yes")
    assert (code, printed, err) == (READER_GONE, b"y\ny\n", b"")
    got = statuses(url)
    assert sorted(got.values()) == ["failed", "pending", "pending"], got


def test_a_drain_with_no_reader_from_the_start_claims_nothing(url: str) -> None:
    """Its stdout a pipe whose reader has already gone: no task is claimed."""
    for key in ("a", "b"):
        assert run_ledger(url, "admit", key).returncode == 0
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = subprocess.run(
            [*ledger_cmd(), "--store", url, *DRAIN, "echo", "hi"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
            timeout=HUNG,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (res.returncode, res.stderr) == (READER_GONE, b"")
    assert statuses(url) == {"a": "pending", "b": "pending"}
