"""Cycles of needs: an admit, a batch line or a restore that
would close one is refused with exit 8 and writes nothing; `doctor` names the
cycles already in a store (written by Go's Admit, which the engine's
`Ledger.admit` keeps); `tree` draws a cycle as one. Through the installed
`ledger` in fresh processes, on the JSON, SQLite and PostgreSQL stores; the
walks themselves in-process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.cycles import closing_cycle, find_cycles, restored_cycle
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.stores import open_store
from tests.cli_support import run_ledger
from tests.stores import KINDS

T0 = Instant.parse("2026-12-05T10:00:00Z")


@pytest.fixture(params=["json", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        yield kind.url(location)


def ok(store: str, *args: str, input: bytes | None = None) -> str:
    res = run_ledger(store, *args, input=input)
    assert res.returncode == 0, (args, res.stderr)
    return res.stdout


def everything(store: str) -> tuple[str, str]:
    """What a refusal must leave unchanged: every record, and the history."""
    return ok(store, "--json", "list"), ok(store, "--json", "log")


def test_an_admit_that_closes_a_cycle_is_refused(store: str) -> None:
    ok(store, "admit", "p", "--needs", "q")
    before = everything(store)
    res = run_ledger(store, "admit", "q", "--needs", "p")
    assert (res.returncode, res.stdout) == (8, "")
    assert res.stderr == "ledger: admitting q would close a cycle: q → p → q\n"
    assert everything(store) == before

    ok(store, "admit", "a", "--needs", "b")
    ok(store, "admit", "b", "--needs", "c", "--needs", "x")
    before = everything(store)
    res = run_ledger(store, "--json", "admit", "c", "--needs", "z", "--needs", "a")
    assert res.returncode == 8
    assert json.loads(res.stdout) == {
        "error": {
            "code": "cycle",
            "message": "ledger: admitting c would close a cycle: c → a → b → c",
            "exit": 8,
        }
    }
    assert everything(store) == before

    # A rebase that would close one is refused too; one that opens it is not.
    ok(store, "admit", "c")
    res = run_ledger(store, "admit", "c", "--seq", "2", "--needs", "a")
    assert res.returncode == 8 and "c → a → b → c" in res.stderr
    ok(store, "admit", "c", "--seq", "2", "--needs", "x")
    # A no-op admit writes nothing and is not refused (here: a duplicate).
    assert ok(store, "admit", "c", "--seq", "2", "--needs", "x") == "duplicate\n"


def test_a_completed_record_closes_no_cycle(store: str) -> None:
    """A completed need satisfies its dependents whatever it needed: a
    "cycle" through it stalls nothing, and the admit goes through."""
    ok(store, "admit", "p", "--needs", "q")  # q: not yet admitted
    fence = ok(store, "claim", "p", "--owner", "w", "--lease", "1h").strip()
    ok(store, "complete", "p", "--owner", "w", "--fence", fence)
    assert ok(store, "admit", "q", "--needs", "p") == "admitted\n"
    assert ok(store, "claim", "--next", "--owner", "w", "--lease", "1h").strip() == "q 1"


def test_a_batch_line_that_closes_a_cycle_is_refused(store: str) -> None:
    lines = b'{"key": "x", "needs": ["y"]}\n{"key": "y", "needs": ["x"]}\n{"key": "z"}\n'
    res = run_ledger(store, "admit", "--batch", "-", input=lines)
    assert res.returncode == 8
    assert res.stdout == "admitted x\nadmitted z\n"
    assert res.stderr == "ledger: line 2: admitting y would close a cycle: y → x → y\n"
    assert run_ledger(store, "state", "y").returncode == 3
    res = run_ledger(store, "--json", "admit", "--batch", "-", input=lines)
    assert res.returncode == 8
    refused = [item for item in json.loads(res.stdout) if "error" in item]
    assert refused == [
        {
            "line": 2,
            "key": "y",
            "error": {
                "code": "cycle",
                "message": "ledger: line 2: admitting y would close a cycle: y → x → y",
                "exit": 8,
            },
        }
    ]


def _snapshot(*tasks: tuple[str, list[str]]) -> bytes:
    recs = [
        {
            "Key": key,
            "Status": "pending",
            "Sequence": 1,
            "Needs": needs,
            "CreatedAt": "2026-12-05T10:00:00Z",
            "UpdatedAt": "2026-12-05T10:00:00Z",
        }
        for key, needs in tasks
    ]
    return json.dumps({"Tasks": recs}).encode()


def test_a_restore_that_closes_a_cycle_is_refused(store: str) -> None:
    ok(store, "admit", "held", "--needs", "new2")
    before = everything(store)
    # Within the snapshot.
    res = run_ledger(store, "restore", "-", input=_snapshot(("s1", ["s2"]), ("s2", ["s1"])))
    assert (res.returncode, res.stdout) == (8, "")
    assert res.stderr == "ledger: restore: the snapshot's needs close a cycle: s1 → s2 → s1\n"
    # Through a record already in the store.
    res = run_ledger(store, "restore", "-", input=_snapshot(("new1", []), ("new2", ["held"])))
    assert res.returncode == 8
    assert res.stderr == "ledger: restore: the snapshot's needs close a cycle: held → new2 → held\n"
    assert everything(store) == before
    ok(store, "restore", "-", input=_snapshot(("new1", []), ("new2", ["new1"])))


def _write_a_cycle_as_go_does(url: str) -> None:
    """Go's Admit (the engine's `Ledger.admit`) writes a cycle: so can two
    admits racing on different processes."""
    with open_store(url) as st:
        led = Ledger(st)
        led.admit("go", "p", 1, None, T0, "q")
        led.admit("go", "q", 1, None, T0, "p")
        led.admit("go", "a", 1, None, T0, "b")
        led.admit("go", "b", 1, None, T0, "c")
        led.admit("go", "c", 1, None, T0, "a", "p")


def test_doctor_and_tree_name_a_stored_cycle(store: str) -> None:
    ok(store, "admit", "fine")
    assert "no problems found" in ok(store, "doctor")
    _write_a_cycle_as_go_does(store)
    res = run_ledger(store, "doctor")
    assert res.returncode == 9
    problems = [ln for ln in res.stdout.splitlines() if ln.startswith("problem:")]
    assert [p.split(" (")[0] for p in problems] == [
        "problem: a cycle of needs: a → b → c → a",
        "problem: a cycle of needs: p → q → p",
    ]
    assert "ledger cancel" in problems[0]
    res = run_ledger(store, "--json", "doctor", "--fix")
    assert res.returncode == 9  # --fix leaves the choice to the operator
    doc = json.loads(res.stdout)
    assert [p.split(" (")[0] for p in doc["problems"]] == [
        "a cycle of needs: a → b → c → a",
        "a cycle of needs: p → q → p",
    ]
    tree = ok(store, "tree", "p")
    assert tree.splitlines()[-1].endswith("p  (cycle: p → q → p)")
    assert "(see above)" not in tree
    doc = json.loads(ok(store, "--json", "tree", "c"))
    assert doc["cycles"] == [["a", "b", "c", "a"], ["p", "q", "p"]]
    assert json.loads(ok(store, "--json", "tree", "fine"))["cycles"] == []
    # Breaking it: re-admit one at a higher sequence with other needs.
    ok(store, "admit", "q", "--seq", "2")
    doc = json.loads(run_ledger(store, "--json", "doctor").stdout)
    assert [p.split(" (")[0] for p in doc["problems"]] == ["a cycle of needs: a → b → c → a"]


# -- the walks, in-process ---------------------------------------------------------


def _recs(graph: dict[str, tuple[str, ...]], done: set[str] | None = None) -> dict[str, TaskState]:
    return {
        k: TaskState(
            key=k, status="completed" if k in (done or set()) else "pending", needs=n or None
        )
        for k, n in graph.items()
    }


def test_closing_cycle_is_the_shortest_and_stops_at_completed() -> None:
    recs = _recs({"a": ("b", "x"), "b": ("c",), "c": ("k",), "x": ("k",), "y": ("k",)})
    assert closing_cycle(recs.get, "k", ("a",)) == ["k", "a", "x", "k"]
    assert closing_cycle(recs.get, "k", ("y", "a")) == ["k", "y", "k"]
    assert closing_cycle(recs.get, "k", ("k",)) == ["k", "k"]
    assert closing_cycle(recs.get, "k", ("missing", "c")) == ["k", "c", "k"]
    assert closing_cycle(recs.get, "z", ("a",)) is None
    done = _recs({"a": ("b",), "b": ("k",)}, done={"b"})
    assert closing_cycle(done.get, "k", ("a",)) is None


def test_find_cycles_one_per_group_and_long_chains() -> None:
    recs = _recs(
        {
            "a": ("b",),
            "b": ("c", "a"),
            "c": ("a",),
            "d": ("a",),  # needs a cycle, is not on one
            "e": ("f",),
            "f": ("e",),
            "g": ("h",),
            "h": ("g",),
        },
        done={"h"},
    )
    assert find_cycles(recs) == [["a", "b", "a"], ["e", "f", "e"]]
    n = 20_000  # no recursion limit on a long cycle
    chain = {f"k{i:05d}": (f"k{(i + 1) % n:05d}",) for i in range(n)}
    (cycle,) = find_cycles(_recs(chain))
    assert len(cycle) == n + 1 and cycle[0] == cycle[-1] == "k00000"
    assert closing_cycle(_recs(chain).get, "k00000", ("k00001",)) == cycle


def test_restored_cycle_looks_through_the_store() -> None:
    stored = _recs({"s": ("n1",), "t": ("u",)})
    new = list(_recs({"n1": ("n2",), "n2": ("s",)}).values())
    assert restored_cycle(stored.get, new) == ["n1", "n2", "s", "n1"]
    assert restored_cycle(stored.get, list(_recs({"n1": ("t",)}).values())) is None


def test_would_close_asks_the_dependents_first() -> None:
    """Nothing unfinished needs the key: no cycle can close, and the walk up
    the needs is skipped (a new key's usual admission reads one index)."""
    from ledger_cli.engine.cycles import would_close
    from ledger_cli.engine.memstore import MemStore

    store = MemStore()
    led = Ledger(store)
    led.admit("t", "p", 1, None, T0, "q")
    led.admit("t", "a", 1, None, T0, "b")
    assert would_close(store.load, "q", ("p",), store.dependents) == ["q", "p", "q"]
    assert would_close(store.load, "z", ("p",), store.dependents) is None
    assert would_close(store.load, "q", ("q",), store.dependents) is None  # validate's to refuse
    walked: list[str] = []

    def load(key: str) -> TaskState | None:
        walked.append(key)
        return store.load(key)

    assert would_close(load, "new", ("a",), store.dependents) is None
    assert walked == []
    fence = led.claim("t", "a", "w", timedelta(minutes=1), T0)
    led.complete("t", "a", "w", fence, "completed", T0)
    assert would_close(load, "b", ("a",), store.dependents) is None  # a is completed
