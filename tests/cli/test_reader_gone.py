"""A reader that goes away (`ledger list | head`) ends the command with exit 141
and nothing on stderr (docs/design.md §4.4), whatever prints: the fast path,
the Typer app, rich's tables and trees, raw bytes (`snapshot`, `output`), each
`--json`; never typer's or rich's 1 (a predicate's "no" to a `pipefail`
script), never 0 with the output cut short.

Fresh processes on every durable store. Two readers, neither timed: one
whose end of the pipe is closed before the command starts (every write
fails), and one that reads a little and closes its end while the command is
still writing an output larger than a pipe holds (the write in progress fails
after a part of it was taken: with Python's stdout unbuffered the text layer
dropped the rest and the command exited 0).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion
READER_GONE = 141
RECORDS = 3000  # `list`'s table: about 260 KB, four times what a Linux pipe holds
BIG_OUTPUT = 300_000  # bytes `ledger output` prints

COMMANDS = [
    ["list"],
    ["list", "--jsonl"],
    ["--json", "list"],
    ["log"],
    ["log", "--jsonl"],
    ["--json", "log"],
    ["graph"],
    ["graph", "--format", "mermaid"],
    ["--json", "graph"],
    ["snapshot"],
    ["tree"],
    ["--json", "tree"],
    ["output", "big"],
    ["--json", "output", "big"],
    ["stats", "--prometheus"],
    ["--json", "stats"],
    ["--help"],
]
LARGE = [["list"], ["--json", "list"], ["log"], ["log", "--jsonl"], ["snapshot"], ["output", "big"]]


def environment(unbuffered: bool) -> dict[str, str]:
    env = subprocess_env()
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def store(url: str) -> str:
    batch = "".join(f'{{"key":"k{i:05d}"}}\n' for i in range(RECORDS)).encode()
    assert run_ledger(url, "admit", "--batch", "-", input=batch).returncode == 0
    assert run_ledger(url, "admit", "big").returncode == 0
    script = f"import sys; sys.stdout.write('x' * {BIG_OUTPUT})"
    ran = run_ledger(
        url, "run", "--owner", "w", "--lease", "1m", "big", "--", sys.executable, "-c", script
    )
    assert ran.returncode == 0, ran.stderr
    return url


def test_a_reader_closed_before_the_command_writes(store: str) -> None:
    env = environment(unbuffered=False)
    for args in COMMANDS:
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            res = subprocess.run(
                [*ledger_cmd(), "--store", store, *args],
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                timeout=EXIT_TIMEOUT,
                check=False,
            )
        finally:
            os.close(write_end)
        assert (res.returncode, res.stderr) == (READER_GONE, ""), args


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_reader_that_takes_one_line_and_leaves(store: str, unbuffered: bool) -> None:
    env = environment(unbuffered)
    for args in LARGE:
        proc = subprocess.Popen(
            [*ledger_cmd(), "--store", store, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(1)  # the command is writing: more than the pipe holds is to come
        proc.stdout.close()
        stderr = proc.stderr.read()
        assert (proc.wait(timeout=EXIT_TIMEOUT), stderr) == (READER_GONE, b""), args
