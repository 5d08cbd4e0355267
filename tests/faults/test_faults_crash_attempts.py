"""Crash at each step of recording an attempt on the JSON store.

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
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from ledger_cli.engine.attempts import KEEP_ATTEMPTS, Attempt
from ledger_cli.stores.attemptlog import attempt_log
from ledger_cli.stores.jsonfile import JsonFileStore
from tests.faults_support import STEPS, OsFaults, fake_meminfo, invoke

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


@pytest.fixture(scope="module", autouse=True)
def _every_file_fsynced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Whatever the machine has dirty, the reference run and every child take
    one path, an fsync(2) per file (a fake /proc/meminfo with 1 GiB dirty):
    else the step counts of the reference would not be the children's."""
    from ledger_cli.stores.jsonfile import durability

    saved = durability.MEMINFO
    _fake_meminfo(tmp_path_factory.mktemp("dirty") / "store", 1 << 20)
    yield
    durability.MEMINFO = saved


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


# -- the folded commits of `ledger run` ----------------------------------------------
#
# `ledger run` on the JSON store starts its first attempt in the claim's unit
# and saves the attempt's end in the completion's: one journal, one commit for
# each pair. A crash at any step of `run --next -- true` must leave the claim
# and the attempt's start both or neither, and the completion and the end both
# or neither; the next open recovers (a journal is replayed), and `doctor`
# finds no problem.

RUN = ("run", "--next", "--owner", "w", "--lease", "1h", "--", "true")


def _fake_meminfo(root: Path, kib: int) -> None:
    from ledger_cli.stores.jsonfile import durability

    durability.MEMINFO = fake_meminfo(root.parent, kib)


def _run_child(root: str, kib: int, kill_at: tuple[str, int] | None) -> None:
    _fake_meminfo(Path(root), kib)
    with OsFaults(kill_at=kill_at):
        invoke(root, *RUN)


def _run_state(root: Path) -> tuple[str, list[tuple[int, bool, int | None]]]:
    store = JsonFileStore(root)  # opening it replays a journal a crash left
    rec = store.load(KEY)
    assert rec is not None
    atts = attempt_log(store).list_attempts(KEY)
    return str(rec.status), [(a.n, a.ended is not None, a.exit) for a in atts]


@pytest.fixture(scope="module")
def run_steps(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, int]]:
    """The step occurrences of one `run --next -- true`, with syncfs(2) (100 KiB
    dirty) and without (1 GiB dirty: every file fsynced)."""
    out = {}
    for kib in (100, 1 << 20):
        root = tmp_path_factory.mktemp(f"run-{kib}") / "store"
        invoke(root, "admit", KEY)
        proc = FORK.Process(target=_count_child, args=(str(root), kib))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
        out[kib] = json.loads((root.parent / "steps.json").read_text())
        assert _run_state(root) == ("completed", [(1, True, 0)])
    return out


def _count_child(root: str, kib: int) -> None:
    _fake_meminfo(Path(root), kib)
    counting = OsFaults()
    with counting:
        res = invoke(root, *RUN)
    assert res.code == 0, res.stderr
    (Path(root).parent / "steps.json").write_text(json.dumps(dict(counting.steps)))


@pytest.mark.parametrize("kib", [100, 1 << 20], ids=["syncfs", "fsync-each"])
@pytest.mark.parametrize("step", [s for s in STEPS if s != "linked"])
def test_a_crash_in_run_leaves_the_claim_and_the_attempt_together(
    run_steps: dict[int, dict[str, int]], scratch: Path, step: str, kib: int
) -> None:
    total = run_steps[kib].get(step, 0)
    if total == 0:
        pytest.skip(f"run never reaches {step} here")
    seen: collections.Counter[tuple[str, int]] = collections.Counter()
    for n in range(1, total + 1):
        root = scratch / f"{step}-{n}" / "store"
        root.parent.mkdir()
        invoke(root, "admit", KEY)
        proc = FORK.Process(target=_run_child, args=(str(root), kib, (step, n)))
        proc.start()
        proc.join(60)
        where = f"{step} #{n}"
        assert proc.exitcode == -signal.SIGKILL, f"{where}: exit {proc.exitcode}"
        status, atts = _run_state(root)
        # Both or neither: no claim without its attempt, no end without the completion.
        assert (status, atts) in (
            ("pending", []),
            ("claimed", [(1, False, None)]),
            ("completed", [(1, True, 0)]),
        ), (where, status, atts)
        seen[(status, len(atts))] += 1
        doc = json.loads(invoke(root, "--json", "doctor").stdout)
        assert doc["problems"] == [], (where, doc)
        assert all("temporary file" in note for note in doc["notes"]), (where, doc["notes"])
        if status == "claimed":  # the next runner, once the lease is over, gets attempt 2
            res = invoke(root, *RUN, now="2099-01-01T00:00:00Z")
            assert res.code == 0, (where, res.stderr)
            assert _run_state(root) == ("completed", [(1, False, None), (2, True, 0)]), where
        shutil.rmtree(root.parent, ignore_errors=True)
    print(f"\n{step}/{kib}: {dict(seen)}")
