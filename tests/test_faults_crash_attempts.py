"""Crash at each step of recording an attempt on the JSON store (issue 19).

A child process records attempts as `ledger run` does — start (n, the
removal of the oldest beyond 16), saves of the output while it runs, the end —
acknowledging each call, and SIGKILLs itself at the n-th occurrence of one
step of the write path (tests/faults_support.py STEPS) for every n the
sequence reaches. Then: every attempt reads back (no torn file), the attempts
equal those after a prefix of the calls (the acknowledged ones, perhaps the
one in flight), `doctor` finds no problem (a stray temporary file is a note)
and `doctor --fix` leaves none behind, and the next start gets the next n.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import shutil
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from ledger_cli.engine.attempts import KEEP_ATTEMPTS, Attempt
from ledger_cli.stores.attempts import attempt_log
from ledger_cli.stores.jsonfile import JsonFileStore
from tests.faults_support import STEPS, OsFaults, invoke

FORK = multiprocessing.get_context("fork")
KEY = "job/1"

State = tuple[tuple[str, bytes], ...]


def _att(n: int = 0, **fields: object) -> Attempt:
    a = Attempt(KEY, n=n, fence=1, owner="w", host="h", pid=7, started="2026-01-02T03:04:05Z")
    for name, value in fields.items():
        setattr(a, name, value)
    return a


def _start(root: Path) -> None:
    attempt_log(JsonFileStore(root)).start_attempt(_att())


def _save(n: int, out: bytes, **end: object) -> Callable[[Path], None]:
    def op(root: Path) -> None:
        a = _att(n, output_bytes=len(out), kept_bytes=len(out), **end)
        attempt_log(JsonFileStore(root)).save_attempt(a, out)

    return op


OPS: list[Callable[[Path], None]] = [
    lambda root: invoke(root, "admit", KEY),  # the store exists
    _start,
    _save(1, b"first \x00\xff"),
    _save(1, b"first \x00\xff and more\n"),
    _save(1, b"first \x00\xff and more\n", ended="2026-01-02T03:04:06Z", exit=1),
    _start,
    _save(2, b"two", ended="2026-01-02T03:04:07Z", signal="SIGKILL"),
    *([_start] * (KEEP_ATTEMPTS - 1)),  # the 17th start removes the oldest
]


def logical_state(root: Path) -> State:
    store = JsonFileStore(root)
    log = attempt_log(store)
    return tuple(
        (json.dumps(a.to_obj(), sort_keys=True), log.read_output(KEY, a.n))
        for a in log.list_attempts(KEY)
    )


def _child(root: str, kill_at: tuple[str, int], ack: Connection) -> None:
    faults = OsFaults(kill_at=kill_at)
    for i, op in enumerate(OPS):
        with faults:
            op(Path(root))
        ack.send_bytes(bytes([i + 1]))
    ack.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[State], dict[str, int]]:
    root = tmp_path_factory.mktemp("reference") / "store"
    states: list[State] = [()]
    counting = OsFaults()
    for i, op in enumerate(OPS):
        with counting:
            op(root)
        states.append(logical_state(root) if i else ())
    return states, dict(counting.steps)


@pytest.mark.parametrize("step", [s for s in STEPS if s not in ("linked", "syncfs")])
def test_a_crash_at_each_step_of_recording_an_attempt(
    reference: tuple[list[State], dict[str, int]], scratch: Path, step: str
) -> None:
    states, occurrences = reference
    total = occurrences.get(step, 0)
    assert total > 0, f"the sequence never reaches {step}"
    outcomes: collections.Counter[str] = collections.Counter()
    for n in range(1, total + 1):
        root = scratch / f"{step}-{n}"
        recv, send = FORK.Pipe(duplex=False)
        proc = FORK.Process(target=_child, args=(str(root), (step, n), send))
        proc.start()
        send.close()
        acked = 0
        while True:
            try:
                acked = recv.recv_bytes()[0]
            except EOFError:
                break
        proc.join(60)
        recv.close()
        where = f"{step} #{n} (after {acked} acknowledged calls)"
        assert proc.exitcode == -signal.SIGKILL, f"{where}: exit {proc.exitcode}"
        if acked == 0:  # killed creating the store: nothing of attempts yet
            shutil.rmtree(root, ignore_errors=True)
            outcomes["kills"] += 1
            continue
        state = logical_state(root)  # every attempt file reads back whole
        if state == states[acked]:
            outcomes["in-flight call lost"] += acked < len(OPS)
        elif acked < len(OPS) and state == states[acked + 1]:
            outcomes["in-flight call landed"] += 1
        else:
            raise AssertionError(f"{where}: the attempts are no prefix of the calls: {state}")
        doc = json.loads(invoke(root, "--json", "doctor").stdout)
        assert doc["problems"] == [], where
        assert all("temporary file" in note for note in doc["notes"]), (where, doc["notes"])
        outcomes["temp files noted"] += len(doc["notes"])
        invoke(root, "doctor", "--fix")
        doc = json.loads(invoke(root, "--json", "doctor").stdout)
        assert doc["notes"] == [] and doc["problems"] == [], where
        # The next runner's attempt gets the next n.
        before = [json.loads(a)["n"] for a, _out in state]
        got = attempt_log(JsonFileStore(root)).start_attempt(_att())
        assert got == (max(before) + 1 if before else 1), where
        outcomes["kills"] += 1
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{step}: {dict(outcomes)}")
    assert outcomes["kills"] == total
