"""Fuzz the installed `ledger`: random argv drawn from the real
command and option names plus junk values, and random stdin, each case a
fresh process. Whatever the input: never exit 70, never a traceback, never a
hang.

The CI tier runs `CI_CASES` cases in parallel; `LEDGER_FUZZ_CASES=N` runs N
(a benchmark-style run, e.g. 20000) and `LEDGER_FUZZ_SEED` replays a run (the
seed is printed; a failure names its case number and argv).

The commands that wait (`wait`, `watch`, `run`, `serve`, `demo`, `claim
--wait`, `log`/`output --follow`) are given a short bound and killed at its
end: a wait is their job, not a hang. Every other command must finish within
`HANG` seconds, a bound far above any start-up time, so only a real hang
trips it.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tests.cli_support import ledger_cmd, subprocess_env

if TYPE_CHECKING:
    from pathlib import Path

CI_CASES = 300
CASES = int(os.environ.get("LEDGER_FUZZ_CASES", str(CI_CASES)))
SEED = int(os.environ.get("LEDGER_FUZZ_SEED", str(random.SystemRandom().randrange(2**32))))
HANG = 60.0
"""Seconds a command that does not wait may take before it counts as hung."""
BOUND = 3.0
"""Seconds a waiting command runs before it is killed (its wait is legitimate)."""

WAITING = frozenset({"wait", "watch", "run", "serve", "demo"})
WAITING_FLAGS = frozenset({"--wait", "--follow", "-f", "--drain"})

JUNK_VALUES: list[str] = [
    "",
    " ",
    "a",
    "b",
    "nope",
    "-",
    "--",
    "-1",
    "0",
    "1",
    "18446744073709551616",
    "1s",
    "1m",
    "0s",
    "-5m",
    "1e400",
    "NaN",
    "2026-13-45T00:00:00Z",
    "2026-12-05T10:00:00Z",
    '{"a":1',
    "{'a':1}",
    "{a:1}",
    "[]",
    "null",
    "[" * 2000,
    "x" * 300,
    "é🔑",
    "\x01\x7f",
    "\u202e",
    "a/b/../c",
    "nonexistent/file",
    "foo://bar",
    "sqlite:",
    "memory:",
    "completed",
    "failed",
    "pending",
    "--json",
    "--help",
]

GOOD_VALUES: list[str] = ["a", "b", "c", "w", "1", "2", "1m", "30s", "completed", "pending"]
"""Values that parse, so a case gets past the argument checks as often as not."""


def _value(rng: random.Random) -> str:
    return rng.choice(GOOD_VALUES if rng.random() < 0.7 else JUNK_VALUES)


STDIN: list[bytes] = [
    b"",
    b'{"a":1',
    b"{'a':1}",
    b"\x00\x00",
    b"\xff\xfe\xfd",
    b'{"key":"k1"}\n{"key":"k2","needs":["k1"]}\n',
    b'{"key":"k3"}\n{"key"\n',
    b"[" * 5000,
    b'{"version":1,"records":[]}',
    b"\n\n\n",
]


def _vocabulary() -> dict[str, list[str]]:
    """Each command's options, from the Typer app itself (so new ones are fuzzed)."""
    from ledger_cli.cli.declarations import build_cli

    cli = build_cli()
    return {
        name: sorted({o for p in cmd.params for o in p.opts if o.startswith("-")})
        for name, cmd in cli.commands.items()  # type: ignore[attr-defined]
    }


def _case(rng: random.Random, vocab: dict[str, list[str]], store: str) -> list[str]:
    """One random command line (after the fixed --store)."""
    names = sorted(vocab)
    argv: list[str] = []
    if rng.random() < 0.05:
        argv.append(rng.choice(JUNK_VALUES))  # not a command at all
    command = rng.choice(names)
    argv.append(command)
    for _ in range(rng.randrange(0, 6)):
        roll = rng.random()
        if roll < 0.55:
            opt = rng.choice(vocab[command])
            argv.append(opt)
            if rng.random() < 0.85:
                argv.append(_value(rng))
        elif roll < 0.9:
            argv.append(_value(rng))
        else:
            argv.append(rng.choice(["--no-such-option", "-Z", "--store=" + store]))
    if command == "run" and rng.random() < 0.5:
        argv += ["--", sys.executable, "-c", "pass"]
    return argv


def _waits(argv: list[str]) -> bool:
    return bool(WAITING.intersection(argv) or WAITING_FLAGS.intersection(argv))


def _one(
    number: int, argv: list[str], stdin: bytes, store: str, cwd: Path
) -> tuple[int, list[str], int | None, str]:
    """Run one case; (number, argv, exit code or None when killed at its bound, stderr)."""
    env = subprocess_env(HOME=str(cwd), XDG_DATA_HOME=str(cwd / "data"))
    proc = subprocess.Popen(
        [*ledger_cmd(), "--store", store, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,  # so a command's children go with it
    )
    bound = BOUND if _waits(argv) else HANG
    try:
        _, err = proc.communicate(stdin, timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        return number, argv, None, err.decode(errors="replace")
    return number, argv, proc.returncode, err.decode(errors="replace")


def test_random_command_lines_never_crash_or_hang(tmp_path: Path) -> None:
    print(f"fuzz: {CASES} cases, LEDGER_FUZZ_SEED={SEED}")
    rng = random.Random(SEED)
    vocab = _vocabulary()
    store = str(tmp_path / "store")
    seed = subprocess.run(
        [*ledger_cmd(), "--store", store, "admit", "--batch", "-"],
        input=b'{"key":"a"}\n{"key":"b","needs":["a"]}\n{"key":"c"}\n',
        capture_output=True,
        env=subprocess_env(),
        timeout=HANG,
        check=False,
    )
    assert seed.returncode == 0, seed.stderr
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cases = [(n, _case(rng, vocab, store), rng.choice(STDIN)) for n in range(CASES)]
    codes: collections.Counter[str] = collections.Counter()
    bad: list[str] = []
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = [pool.submit(_one, n, argv, data, store, cwd) for n, argv, data in cases]
        for future in futures:
            number, argv, code, err = future.result()
            if code is None:
                if _waits(argv):
                    codes["bounded"] += 1
                    continue
                bad.append(f"case {number}: hung: {argv!r}")
                continue
            codes[str(code)] += 1
            if code == 70 or "Traceback" in err or "internal error" in err:
                bad.append(f"case {number}: exit {code}: {argv!r}: {err[-500:]!r}")
    print("fuzz: exit codes seen:", dict(sorted(codes.items())))
    assert not bad, f"LEDGER_FUZZ_SEED={SEED}\n" + "\n".join(bad[:20])
    assert sum(codes.values()) == CASES
