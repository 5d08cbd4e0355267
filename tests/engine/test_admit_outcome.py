"""Loud conflicts at admission (docs/design.md §8.4): admitted, duplicate, stale, conflict.

In process on MemStore for the words and shapes; as real racing processes on
every durable store for "exactly one admitted, the rest conflict".
"""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.conflict import json_equal
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from tests.cli_support import Cli, ledger_cmd, make_cli, subprocess_env
from tests.stores import KINDS

T = Instant.parse("2026-01-02T03:04:05Z")


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return make_cli(monkeypatch)


def test_json_values_compare_by_value_not_by_spelling() -> None:
    assert json_equal({"a": 1, "b": [1.0, None]}, {"b": [1, None], "a": 1.0})
    assert json_equal(-0.0, 0)
    assert not json_equal(True, 1)
    assert not json_equal(1, True)
    assert not json_equal(None, 0)
    assert not json_equal("1", 1)
    assert not json_equal([1], [1, 1])
    assert not json_equal({"a": 1}, {"a": 1, "b": None})
    assert json_equal(2**63, 2**63)


def test_the_four_words(cli: Cli) -> None:
    assert cli.ok("admit", "a", "--task", '{"x":1,"y":[1.0]}').stdout == "admitted\n"
    assert cli.ok("admit", "a", "--task", '{ "y": [1], "x": 1.0 }').stdout == "duplicate\n"
    res = cli("admit", "a", "--task", '{"x":2}')
    assert (res.code, res.stdout) == (8, "conflict\n")
    assert res.stderr == "ledger: a is already admitted at sequence 1 with a different task\n"
    res = cli("admit", "a", "--task", '{"x":1,"y":[1]}', "--needs", "b")
    assert (res.code, res.stdout) == (8, "conflict\n")
    assert res.stderr == "ledger: a is already admitted at sequence 1 with different needs\n"
    res = cli("admit", "a", "--needs", "b")
    assert res.stderr.endswith("with a different task and different needs\n")
    assert cli.ok("admit", "a", "--seq", "0").stdout == "stale\n"
    assert cli.ok("admit", "a", "--seq", "2", "--task", "7").stdout == "admitted\n"
    assert cli.ok("admit", "a", "--task", "7").stdout == "stale\n"
    rec = cli.store.load("a")
    assert rec is not None and (rec.sequence, rec.task) == (2, 7)


def test_no_needs_and_empty_needs_are_the_same(cli: Cli) -> None:
    led = Ledger(cli.store)
    # The Go service stores [] for none.
    assert led.admit_outcome("go", "g", 1, None, T).word == "admitted"
    assert led.admit_outcome("go", "g", 1, None, T).word == "duplicate"
    assert cli.ok("admit", "g").stdout == "duplicate\n"
    assert led.admit_outcome("go", "n", 1, 5, T, "x", "y").word == "admitted"
    assert led.admit_outcome("go", "n", 1, 5, T, "y", "x").word == "conflict"


def test_a_finished_record_is_a_duplicate_at_a_higher_sequence(cli: Cli) -> None:
    cli.ok("admit", "f", "--task", "1")
    fence = cli.ok("claim", "f", "--owner", "w", "--lease", "1m").stdout.strip()
    cli.ok("complete", "f", "--owner", "w", "--fence", fence)
    assert cli.ok("admit", "f", "--seq", "2", "--task", "2").stdout == "duplicate\n"
    assert cli.ok("admit", "f", "--task", "1").stdout == "duplicate\n"
    assert cli("admit", "f", "--task", "2").code == 8  # same sequence, another task


def test_a_pruned_record_is_a_duplicate(cli: Cli) -> None:
    cli.ok("admit", "p", "--task", '{"day":1}')
    fence = cli.ok("claim", "p", "--owner", "w", "--lease", "1m").stdout.strip()
    cli.ok("complete", "p", "--owner", "w", "--fence", fence)
    later = str(T + timedelta(days=30))
    cli.ok("prune", "--older-than", "1d", now=later)
    assert cli.ok("admit", "p", "--task", '{"day":2}', now=later).stdout == "duplicate\n"


def test_json_adds_the_outcome_and_a_conflict_the_error(cli: Cli) -> None:
    got = cli.ok("--json", "admit", "j", "--task", "1").json()
    assert (got["admitted"], got["outcome"], got["record"]["Task"]) == (True, "admitted", 1)
    got = cli.ok("--json", "admit", "j", "--task", "1.0").json()
    assert (got["admitted"], got["outcome"]) == (False, "duplicate")
    res = cli("--json", "admit", "j", "--task", "2")
    got = res.json()
    assert res.code == 8
    assert (got["outcome"], got["record"]["Task"]) == ("conflict", 1)
    assert got["error"] == {
        "code": "conflict",
        "message": "ledger: j is already admitted at sequence 1 with a different task",
        "exit": 8,
    }


def test_batch_prints_a_word_per_line_and_exits_8_at_the_end(cli: Cli) -> None:
    cli.ok("admit", "a", "--task", "1")
    cli.ok("admit", "s", "--seq", "3")
    lines = '{"key":"a","task":2}\n{"key":"a","task":1}\n{"key":"s"}\n{"key":"new"}\n'
    res = cli("admit", "--batch", "-", input=lines)
    assert res.code == 8
    assert res.stdout == "conflict a\nduplicate a\nstale s\nadmitted new\n"
    assert res.stderr == (
        "ledger: line 1: a is already admitted at sequence 1 with a different task\n"
    )
    assert cli.store.load("new") is not None
    res = cli("--json", "admit", "--batch", "-", input='{"key":"a","task":3}\n{"key":"b"}\n')
    assert res.code == 8
    got = res.json()
    assert [(g["key"], g["outcome"]) for g in got] == [("a", "conflict"), ("b", "admitted")]
    assert got[0]["error"]["code"] == "conflict"
    ok = cli("admit", "--batch", "-", input='{"key":"a","task":1.0}\n')
    assert (ok.code, ok.stdout) == (0, "duplicate a\n")


def test_the_library_keeps_gos_bool(cli: Cli) -> None:
    led = Ledger(cli.store)
    assert led.admit("a", "k", 1, {"v": 1}, T) is True
    assert led.admit("a", "k", 1, {"v": 2}, T) is False  # Go: a no-op, not an error
    assert led.admit_outcome("a", "k", 1, {"v": 2}, T).word == "conflict"


RACERS = 6


@pytest.mark.parametrize("kind", ["json", "sqlite", "postgresql"])
def test_racing_admits_of_one_key_exactly_one_admitted(kind: str, tmp_path: Path) -> None:
    with KINDS[kind].place(tmp_path) as location:
        url = KINDS[kind].url(location)
        go = tmp_path / "go"
        # Each racer waits for the go file, so that they all admit at once.
        script = (
            "import os, subprocess, sys, time\n"
            "while not os.path.exists(sys.argv[1]): time.sleep(0.005)\n"
            "p = subprocess.run(sys.argv[2:], capture_output=True, text=True)\n"
            "sys.stdout.write(f'{p.returncode} {p.stdout.strip()}\\n')\n"
        )
        procs = [
            subprocess.Popen(
                [
                    *ledger_cmd()[:1],
                    "-c",
                    script,
                    str(go),
                    *ledger_cmd(),
                    "--store",
                    url,
                    "admit",
                    "report",
                    "--task",
                    f'{{"day": {n}}}',
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=subprocess_env(),
            )
            for n in range(RACERS)
        ]
        go.touch()
        outs = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
        assert outs == ["0 admitted"] + ["8 conflict"] * (RACERS - 1), outs
        store = KINDS[kind].open(location, lambda: T)
        try:
            recs = list(store.range())
        finally:
            store.close()
        assert [(r.key, r.sequence) for r in recs] == [("report", 1)]
