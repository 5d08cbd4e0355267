"""Every command's success path through the real entry point, text and --json."""

from __future__ import annotations

import json

import pytest

from ledger_cli.cli.declarations import registered_app
from tests.cli_support import T0, Cli, make_cli


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return make_cli(monkeypatch)


def test_admit_prints_admitted_then_duplicate(cli: Cli) -> None:
    assert cli.ok("admit", "a", "--task", '{"n": 1}').stdout == "admitted\n"
    assert cli.ok("admit", "a", "--task", '{"n":1.0}').stdout == "duplicate\n"
    assert cli.ok("admit", "a", "--seq", "2").stdout == "admitted\n"
    rec = cli.store.load("a")
    assert rec is not None and rec.sequence == 2 and rec.task is None


def test_admit_json_shape_and_wire_record(cli: Cli) -> None:
    out = cli.ok("--json", "admit", "a", "--needs", "b", "--needs", "c", "--task", "[1.5, 2]")
    doc = out.json()
    assert list(doc) == ["key", "admitted", "outcome", "record"]
    assert doc["key"] == "a" and doc["admitted"] is True
    rec = doc["record"]
    assert list(rec) == [
        "Key", "Status", "Sequence", "Owner", "Fence", "LeaseUntil", "Needs", "BlockedBy",
        "Task", "Rev", "CreatedBy", "CreatedAt", "UpdatedBy", "UpdatedAt",
    ]  # fmt: skip
    assert rec["Needs"] == ["b", "c"] and rec["Task"] == [1.5, 2]
    assert rec["CreatedAt"] == T0 and rec["CreatedBy"] == "tester"
    assert '"LeaseUntil":"0001-01-01T00:00:00Z"' in out.stdout


def test_admit_task_file_and_stdin(cli: Cli, tmp_path: object) -> None:
    from pathlib import Path

    f = Path(str(tmp_path)) / "task.json"
    f.write_text('{"cmd": "backup", "at": 3}')
    cli.ok("admit", "f", "--task-file", str(f))
    cli.ok("admit", "s", "--task-file", "-", input='{"from": "stdin"}')
    assert cli.store.load("f").task == {"cmd": "backup", "at": 3}  # type: ignore[union-attr]
    assert cli.store.load("s").task == {"from": "stdin"}  # type: ignore[union-attr]


def test_admit_batch(cli: Cli) -> None:
    lines = "\n".join(
        [
            '{"key": "a"}',
            '{"key": "b", "needs": ["a"], "task": {"x": 1}}',
            "",
            '{"key": "a", "seq": 1}',
        ]
    )
    out = cli.ok("admit", "--batch", "-", input=lines + "\n")
    assert out.stdout == "admitted a\nadmitted b\nduplicate a\n"
    js = cli.ok("--json", "admit", "--batch", "-", input='{"key":"c","seq":3}\n').json()
    assert js[0]["line"] == 1 and js[0]["admitted"] is True and js[0]["record"]["Sequence"] == 3


def test_admit_batch_refused_line_exit_8_rest_admitted(cli: Cli) -> None:
    data = '{"key": "a"}\n{"key": "self", "needs": ["self"]}\n{"key": "c"}\n'
    res = cli("admit", "--batch", "-", input=data)
    assert res.code == 8
    assert res.stdout == "admitted a\nadmitted c\n"
    assert res.stderr == 'ledger: line 2: task "self" names itself in Needs\n'
    assert [k for k, _, _ in cli.dump()] == ["a", "c"]


def test_admit_batch_unparsable_line_admits_nothing(cli: Cli) -> None:
    res = cli("admit", "--batch", "-", input='{"key": "a"}\n{"key": "b",}\n')
    assert res.code == 2
    assert res.stderr.startswith("ledger: line 2: ")
    assert cli.dump() == []


def test_claim_renew_release_takeover_complete(cli: Cli) -> None:
    cli.ok("admit", "job")
    assert cli.ok("claim", "job", "--owner", "w1", "--lease", "5m").stdout == "1\n"
    out = cli.ok("renew", "job", "--owner", "w1", "--fence", "1", "--lease", "10m")
    assert out.stdout == "renewed job until 2026-01-02T03:14:05Z\n"
    assert cli.ok("release", "job", "--owner", "w1", "--fence", "1").stdout == "released job\n"
    assert cli.ok("claim", "job", "--owner", "w1", "--lease", "1m").stdout == "2\n"
    later = "2026-01-02T03:06:00Z"
    assert cli.ok("takeover", "job", "--owner", "w2", "--lease", "1m", now=later).stdout == "3\n"
    assert cli.ok("complete", "job", "--owner", "w2", "--fence", "3").stdout == "completed job\n"
    assert cli.dump() == [("job", "completed", 3)]


def test_complete_failed_blocks_dependents(cli: Cli) -> None:
    cli.ok("admit", "root")
    cli.ok("admit", "child", "--needs", "root")
    cli.ok("claim", "root", "--owner", "w", "--lease", "1m")
    assert cli.ok("complete", "root", "--owner", "w", "--fence", "1", "--failed").stdout == (
        "failed root\n"
    )
    assert cli.ok("blocked", "child").stdout == "root\n"
    assert cli("blocked", "root").code == 1


def test_json_shapes_of_lease_commands(cli: Cli) -> None:
    cli.ok("admit", "k", "--task", '"payload"')
    doc = cli.ok("--json", "claim", "k", "--owner", "o", "--lease", "90s").json()
    assert list(doc) == ["key", "fence", "record"] and doc["fence"] == 1
    assert doc["record"]["LeaseUntil"] == "2026-01-02T03:05:35Z"
    doc = cli.ok("renew", "k", "--owner", "o", "--fence", "1", "--lease", "1h", "--json").json()
    assert list(doc) == ["key", "record"]
    doc = cli.ok("release", "k", "--owner", "o", "--fence", "1", "--json").json()
    assert doc["record"]["Status"] == "pending"
    cli.ok("claim", "k", "--owner", "o", "--lease", "1s")
    doc = cli.ok(
        "takeover", "k", "--owner", "p", "--lease", "1m", "--json", now="2026-01-02T04:00:00Z"
    ).json()
    assert list(doc) == ["key", "fence", "record"] and doc["fence"] == 3
    doc = cli.ok("complete", "k", "--owner", "p", "--fence", "3", "--json").json()
    assert doc["record"]["Status"] == "completed"
    res = cli("blocked", "k", "--json")
    assert res.code == 1 and res.json() == {"key": "k", "blocked": False, "blocked_by": None}


def test_claim_next_orders_by_created_at_and_needs(cli: Cli) -> None:
    cli.ok("admit", "b-second", now="2026-01-02T03:00:02Z")
    cli.ok("admit", "a-third", "--needs", "b-second", now="2026-01-02T03:00:03Z")
    cli.ok("admit", "z-first", now="2026-01-02T03:00:01Z")
    assert cli.ok("claim", "--next", "--owner", "w", "--lease", "1m").stdout == "z-first 1\n"
    doc = cli.ok("claim", "--next", "--owner", "w", "--lease", "1m", "--json").json()
    assert list(doc) == ["key", "fence", "record", "task"]
    assert doc["key"] == "b-second" and doc["task"] is None
    # a-third needs b-second, which is claimed, not completed: nothing is ready.
    res = cli("claim", "--next", "--owner", "w", "--lease", "1m")
    assert (
        res.code == 7 and res.stdout == "" and res.stderr == "ledger: nothing is ready to claim\n"
    )
    cli.ok("complete", "b-second", "--owner", "w", "--fence", "1")
    assert cli.ok("claim", "--next", "--owner", "w", "--lease", "1m").stdout == "a-third 1\n"


def test_claim_next_takes_expired_claims_and_skips_failed_ancestry(cli: Cli) -> None:
    cli.ok("admit", "old", now="2026-01-02T00:00:00Z")
    cli.ok("claim", "old", "--owner", "gone", "--lease", "1m", now="2026-01-02T00:00:00Z")
    assert cli.ok("claim", "--next", "--owner", "w", "--lease", "1m").stdout == "old 2\n"


def test_state_json_is_the_wire_record(cli: Cli) -> None:
    cli.ok("admit", "k", "--task", '{"b": 1, "a": "<&>"}')
    out = cli.ok("state", "k", "--json").stdout
    assert '"Task":{"a":"\\u003c\\u0026\\u003e","b":1}' in out
    assert json.loads(out)["Key"] == "k"


def test_state_panel_in_plain_text(cli: Cli) -> None:
    cli.ok("admit", "k", "--needs", "gone")
    out = cli.ok("state", "k").stdout
    assert "\x1b[" not in out
    assert "never admitted" in out and "pending" in out


def test_list_filters_limit_json_jsonl(cli: Cli) -> None:
    for key in ("a", "b", "c"):
        cli.ok("admit", key)
    cli.ok("claim", "b", "--owner", "w", "--lease", "1m")
    assert [r["Key"] for r in cli.ok("list", "--json").json()] == ["a", "b", "c"]
    assert [r["Key"] for r in cli.ok("list", "--json", "--status", "claimed").json()] == ["b"]
    assert [r["Key"] for r in cli.ok("list", "--json", "--owner", "w").json()] == ["b"]
    assert [r["Key"] for r in cli.ok("list", "--json", "--limit", "2").json()] == ["a", "b"]
    rows = cli.ok("list", "--jsonl", "--status", "pending").stdout.splitlines()
    assert [json.loads(r)["Key"] for r in rows] == ["a", "c"]
    table = cli.ok("list").stdout
    assert "lease left" in table and "1m00s" in table


def test_tree_and_log(cli: Cli) -> None:
    cli.ok("admit", "root")
    cli.ok("admit", "mid", "--needs", "root")
    cli.ok("admit", "leaf", "--needs", "mid", "--needs", "ghost")
    cli.ok("claim", "root", "--owner", "w", "--lease", "1m")
    cli.ok("complete", "root", "--owner", "w", "--fence", "1", "--failed")
    out = cli.ok("tree").stdout
    assert out.splitlines()[0] == "root  failed"
    assert "mid  blocked by root" in out and "leaf  blocked by root" in out
    chain = cli.ok("tree", "leaf").stdout
    assert "ghost  never admitted" in chain and "root  failed" in chain
    doc = cli.ok("tree", "--json").json()
    assert doc == {
        "failed": [
            {
                "key": "root",
                "pruned": False,
                "blocked": ["leaf", "mid"],
                "dependents": ["mid", "leaf"],
                "escaped": [],
                "exit": None,  # no run recorded (completed by `ledger complete`)
                "signal": None,
                "timed_out": False,
            }
        ]
    }
    log = cli.ok("log").stdout.splitlines()
    assert log[0] == f"{T0} tester ledger.admitted root 0 key root admitted at sequence 1"
    assert any("ledger.completed root 1 key root completed as failed by w" in ln for ln in log)
    entries = cli.ok("log", "root", "--json").json()
    assert [e["event"] for e in entries] == [
        "ledger.admitted", "ledger.claimed", "ledger.completed",
    ]  # fmt: skip
    assert set(entries[0]) == {"time", "actor", "event", "key", "fence", "data"}
    assert len(cli.ok("log", "--jsonl").stdout.splitlines()) == len(log)


def test_snapshot_and_restore(cli: Cli, tmp_path: object) -> None:
    from pathlib import Path

    cli.ok("admit", "a", "--task", '{"n": 1}')
    cli.ok("claim", "a", "--owner", "w", "--lease", "1h")
    snap = cli.ok("snapshot").stdout
    assert snap.startswith('{"Tasks":[{"Key":"a","Status":"claimed"') and not snap.endswith("\n")
    f = Path(str(tmp_path)) / "snap.json"
    res = cli.ok("snapshot", "-o", str(f), "--json")
    assert res.json() == {"output": str(f), "records": 1}
    assert f.read_text() == snap
    # Restoring a snapshot whose record the key already holds restores nothing more.
    assert cli.ok("restore", str(f)).stdout == "restored 1 record (1 already there)\n"
    # Over a key that holds another record it refuses and writes nothing.
    cli.ok("renew", "a", "--owner", "w", "--fence", "1", "--lease", "2h")
    res = cli("restore", str(f))
    assert res.code == 8 and res.stderr.startswith(
        'ledger: restore: key "a" already has a record other than the snapshot\'s (its '
    )
    other = Path(str(tmp_path)) / "other.json"
    other.write_text(snap.replace('"Key":"a"', '"Key":"b"'))
    assert cli.ok("restore", str(other)).stdout == "restored 1 record\n"
    assert [k for k, _, _ in cli.dump()] == ["a", "b"]
    assert cli.ok("restore", "-", "--json", input='{"Tasks":null}').json() == {
        "restored": 0,
        "already_there": 0,
    }


def test_help_and_typer_runner(cli: Cli) -> None:
    out = cli.ok("--help").stdout
    assert "admit" in out and "demo" in out and "\x1b[" not in out
    from typer.testing import CliRunner

    res = CliRunner().invoke(registered_app(), ["admit", "--help"])
    assert res.exit_code == 0 and "--task-file" in res.stdout and "--json" in res.stdout


JSON_CASES: dict[str, list[list[str]]] = {
    "admit": [["admit", "x"], ["admit", "--batch", "-"], ["admit", ""]],
    "claim": [["claim", "p", "--owner", "w", "--lease", "1m"], ["claim", "--next", "--owner",
              "w", "--lease", "1m"], ["claim", "nope", "--owner", "w", "--lease", "1m"]],
    "renew": [["renew", "c", "--owner", "w", "--fence", "1", "--lease", "1m"],
              ["renew", "c", "--owner", "w", "--fence", "2", "--lease", "1m"]],
    "release": [["release", "c", "--owner", "w", "--fence", "1"]],
    "takeover": [["takeover", "c", "--owner", "v", "--lease", "1m"]],
    "complete": [["complete", "c", "--owner", "w", "--fence", "1"]],
    "state": [["state", "p"], ["state", "nope"]],
    "blocked": [["blocked", "p"]],
    "list": [["list"]],
    "tree": [["tree"], ["tree", "p"]],
    "graph": [["graph"], ["graph", "p"], ["graph", "nope"]],
    "log": [["log"], ["log", "p"]],
    "run": [["run", "p", "--owner", "w", "--lease", "1m", "--", "true"], ["run", "--owner", "w"]],
    "snapshot": [["snapshot"]],
    "restore": [["restore", "-"]],
    "doctor": [["doctor"]],
    "prune": [["prune", "--older-than", "0s"], ["prune", "--older-than", "1d", "--dry-run"]],
    "demo": [],  # a real multi-process run: tests/cli/test_cli_processes.py
    "retry": [["retry", "p"], ["retry", "nope"]],
    "cancel": [["cancel", "p"], ["cancel", "c", "--reason", "r"]],
    "stats": [["stats"], ["stats", "--prometheus"]],
    "watch": [["watch"]],  # not a terminal here: the JSON error
    "output": [["output", "p"], ["output", "nope"]],
    "wait": [["wait", "nope"]],  # the settled shapes: tests/cli/test_output_wait.py
    "check": [["check", "c", "--owner", "w", "--fence", "1"],
              ["check", "c", "--owner", "w", "--fence", "2"], ["check", "p", "--owner", "w",
              "--fence", "0"]],
    "pause": [["pause", "--reason", "r"]],
    "limit": [["limit"], ["limit", "q", "2"], ["limit", "q", "--clear"], ["limit", "q", "0"]],
    "resume": [["resume"]],
    # A server runs until stopped (tests/cli/test_web.py); here, its refusal of an open bind.
    "serve": [["serve", "--bind", "0.0.0.0:0"]],
}  # fmt: skip


def test_every_command_has_json_cases() -> None:
    from ledger_cli.cli.declarations import build_cli

    assert set(JSON_CASES) == set(build_cli().commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "args", [a for cases in JSON_CASES.values() for a in cases], ids=lambda a: " ".join(a)[:40]
)
def test_json_output_parses(cli: Cli, args: list[str]) -> None:
    cli.ok("admit", "p")
    cli.ok("admit", "c")
    cli.ok("claim", "c", "--owner", "w", "--lease", "1m")
    res = cli("--json", *args, input='{"key": "y"}\n' if "-" in args else None)
    doc = json.loads(res.stdout.splitlines()[-1] if args[0] == "run" else res.stdout)
    if res.code not in (0, 1):
        assert doc["error"]["exit"] == res.code


def test_claim_next_wait_polls_then_exits_7(cli: Cli) -> None:
    import time

    start = time.monotonic()
    res = cli("claim", "--next", "--owner", "w", "--lease", "1m", "--wait", "0.4s")
    assert res.code == 7 and time.monotonic() - start >= 0.4


def test_now_comes_from_the_store_clock_when_it_has_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger_cli.cli.context import Session, Settings
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.memstore import MemStore

    class ClockStore(MemStore):
        def now(self) -> Instant:
            return Instant.parse("2030-05-06T07:08:09Z")

    s = Session(Settings(store="memory:"), store=ClockStore())
    assert str(s.now()) == "2030-05-06T07:08:09Z"
    fixed = Session(Settings(store="memory:", now="2020-01-01T00:00:00Z"), store=ClockStore())
    assert str(fixed.now()) == "2020-01-01T00:00:00Z"


def test_global_settings_from_the_environment(cli: Cli) -> None:
    env = {"LEDGER_ACTOR": "from-env", "LEDGER_NOW": "2031-01-01T00:00:00Z"}
    out = cli("--json", "admit", "e", now=None, env=env)
    # --actor on the command line (tester) wins over LEDGER_ACTOR; LEDGER_NOW applies.
    rec = out.json()["record"]
    assert rec["CreatedBy"] == "tester" and rec["CreatedAt"] == "2031-01-01T00:00:00Z"
