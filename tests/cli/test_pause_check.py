"""`ledger pause` / `resume` (docs/design.md §8.3) and `ledger check` (docs/design.md §8.5).

The words, exits and figures in process on MemStore; on every durable store
as real processes: `pause` racing 8 `run --next --drain` workers, after which
no new claim lands. Waits are for states, never times.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_support import Cli, ledger_cmd, make_cli, run_ledger, subprocess_env
from tests.sql_support import waiting_on_a_lock
from tests.stores import KINDS

T0 = "2026-01-02T03:04:05Z"
T30 = "2026-01-02T03:04:35Z"
T2M = "2026-01-02T03:06:05Z"
EXIT_TIMEOUT = 120.0  # a bound for a hung test, never a timing assertion


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return make_cli(monkeypatch)


# -- check -------------------------------------------------------------------------


def test_check_says_whether_the_lease_is_still_held(cli: Cli) -> None:
    cli.ok("admit", "a")
    fence = cli.ok("claim", "a", "--owner", "w", "--lease", "1m").stdout.strip()
    res = cli.ok("check", "a", "--owner", "w", "--fence", fence, now=T30)
    assert res.stdout == "30s left (until 2026-01-02T03:05:05Z)\n"
    doc = cli.ok("--json", "check", "a", "--owner", "w", "--fence", fence, now=T30).json()
    assert doc == {
        "key": "a",
        "owner": "w",
        "fence": 1,
        "lease_until": "2026-01-02T03:05:05Z",
        "left_seconds": 30.0,
    }
    stale = cli("check", "a", "--owner", "w", "--fence", "9", now=T30)
    assert (stale.code, stale.stderr) == (
        5,
        "ledger: fence token is stale (the current fence is 1)\n",
    )
    other = cli("check", "a", "--owner", "v", "--fence", fence, now=T30)
    assert (other.code, other.stderr) == (5, "ledger: a is held by w, not v\n")
    late = cli("check", "a", "--owner", "w", "--fence", fence, now=T2M)
    assert (late.code, late.stderr) == (5, "ledger: lease expired at 2026-01-02T03:05:05Z\n")
    assert cli("check", "nope", "--owner", "w", "--fence", "1").code == 3
    cli.ok("complete", "a", "--owner", "w", "--fence", fence, now=T30)
    done = cli("check", "a", "--owner", "w", "--fence", fence, now=T30)
    assert (done.code, done.stderr) == (6, "ledger: record is not claimed (a is completed)\n")
    assert cli("check", "a", "--owner", "w", "--fence", "x").code == 2


def test_check_refuses_bad_text_with_one_line(cli: Cli) -> None:
    """An owner the writes would refuse, or an empty key, is refused here too
    (exit 2, one line), not looked up (any other key is looked up, as `renew`
    and `complete` look it up: docs/design.md §5.2)."""
    cli.ok("admit", "a")
    fence = cli.ok("claim", "a", "--owner", "w", "--lease", "1m").stdout.strip()
    bad_owner = cli("check", "a", "--owner", "w\x07", "--fence", fence)
    assert (bad_owner.code, bad_owner.stderr) == (
        2,
        'ledger: owner "w\\a" contains a control character\n',
    )
    empty_key = cli("check", "", "--owner", "w", "--fence", fence)
    assert (empty_key.code, empty_key.stderr) == (2, "ledger: key must not be empty\n")


def test_check_writes_nothing(cli: Cli) -> None:
    cli.ok("admit", "a")
    fence = cli.ok("claim", "a", "--owner", "w", "--lease", "1m").stdout.strip()
    before = list(cli.store.range()), list(cli.store.read_history())  # type: ignore[attr-defined]
    cli.ok("check", "a", "--owner", "w", "--fence", fence)
    cli("check", "a", "--owner", "w", "--fence", "7")
    assert (list(cli.store.range()), list(cli.store.read_history())) == before  # type: ignore[attr-defined]


# -- pause / resume ----------------------------------------------------------------


def test_pause_stops_next_claims_only(cli: Cli) -> None:
    cli.ok("admit", "a")
    cli.ok("admit", "b")
    res = cli.ok("pause", "--reason", "deploy freeze")
    assert res.stdout.startswith("paused: ")
    again = cli.ok("pause")
    assert again.stdout == f"already paused (since {T0} by tester: deploy freeze)\n"
    refused = cli("claim", "--next", "--owner", "w", "--lease", "1m")
    assert refused.code == 7
    assert refused.stderr == (
        f"ledger: claiming is paused (since {T0} by tester: deploy freeze);"
        " ledger resume starts it again\n"
    )
    as_json = cli("--json", "claim", "--next", "--owner", "w", "--lease", "1m")
    assert as_json.json()["error"]["code"] == "paused"
    assert cli("run", "--next", "--owner", "w", "--lease", "1m", "--", "true").code == 7
    # Everything else works as always.
    fence = cli.ok("claim", "a", "--owner", "w", "--lease", "1m").stdout.strip()
    cli.ok("renew", "a", "--owner", "w", "--fence", fence, "--lease", "1m")
    cli.ok("complete", "a", "--owner", "w", "--fence", fence)
    cli.ok("admit", "c")
    assert cli.ok("--json", "stats").json()["paused"] is True
    assert "ledger_paused 1.0" in cli.ok("stats", "--prometheus").stdout
    assert cli.ok("resume").stdout == f"resumed (paused since {T0} by tester: deploy freeze)\n"
    assert cli.ok("resume").stdout == "not paused: claiming runs\n"
    assert cli.ok("claim", "--next", "--owner", "w", "--lease", "1m").stdout == "b 1\n"
    assert cli.ok("--json", "stats").json()["paused"] is False
    events = [json.loads(ln) for ln in cli.ok("log", "--jsonl").stdout.splitlines()]
    marks = [(e["event"], e["data"]) for e in events if e["event"].endswith(("paused", "resumed"))]
    assert marks == [
        ("ledger.paused", "claiming paused by tester: deploy freeze"),
        ("ledger.resumed", "claiming resumed by tester"),
    ]


def test_pause_lines_show_format_characters_as_escapes(tmp_path: Path) -> None:
    """A reason or actor may hold format characters, as a key may (docs/design.md
    §5.2: only controls are refused); `pause` and `resume` print them as
    escapes wherever their line goes (human lines, §5.3), `--json` as stored."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    bad = run_ledger(store, "pause", "--reason", "freeze\x1b[2J")
    assert bad.returncode == 2 and bad.stderr.endswith("contains a control character\n")
    assert bad.stdout == ""
    res = run_ledger(store, "pause", "--reason", "freeze\u202eevil", "--actor", "act\u202e")
    assert res.returncode == 0, res.stderr
    assert res.stdout.endswith(" by act\\u202e: freeze\\u202eevil)\n")
    again = run_ledger(store, "pause")
    assert again.stdout.endswith(" by act\\u202e: freeze\\u202eevil)\n")
    doc = json.loads(run_ledger(store, "--json", "pause").stdout)
    assert (doc["actor"], doc["reason"]) == ("act\u202e", "freeze\u202eevil")
    resumed = run_ledger(store, "resume")
    assert resumed.stdout.endswith(" by act\\u202e: freeze\\u202eevil)\n")
    assert "\u202e" not in res.stdout + again.stdout + resumed.stdout


WORKERS = 8
TASKS = 2000


def _claims(url: str) -> int:
    res = run_ledger(url, "log", "--jsonl")
    assert res.returncode == 0, res.stderr
    return sum(json.loads(ln)["event"] == "ledger.claimed" for ln in res.stdout.splitlines())


def test_no_claim_lands_after_pause_returns(url: str, tmp_path: Path) -> None:
    batch = "".join(json.dumps({"key": f"t{i:04d}"}) + "\n" for i in range(TASKS))
    assert run_ledger(url, "admit", "--batch", "-", input=batch.encode()).returncode == 0
    workers = [
        subprocess.Popen(
            [
                *ledger_cmd(),
                "--store",
                url,
                "run",
                "--next",
                "--drain",
                "--owner",
                f"w{n}",
                "--lease",
                "5m",
                "--",
                "true",
            ],
            env=subprocess_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    try:
        deadline = time.monotonic() + EXIT_TIMEOUT
        while _claims(url) < WORKERS and time.monotonic() < deadline:
            time.sleep(0.05)  # wait for a state: the workers are claiming
        assert run_ledger(url, "pause", "--reason", "race").returncode == 0
        at_pause = _claims(url)
        codes = [w.wait(timeout=EXIT_TIMEOUT) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert all(code in (0, 7) for code in codes), [
        (c, w.stderr) for c, w in zip(codes, workers, strict=True)
    ]
    assert _claims(url) == at_pause
    assert at_pause < TASKS, "every task was claimed before the pause: nothing was raced"
    refused = run_ledger(url, "claim", "--next", "--owner", "z", "--lease", "1m")
    assert refused.returncode == 7 and "claiming is paused" in refused.stderr
    assert run_ledger(url, "resume").returncode == 0
    assert run_ledger(url, "claim", "--next", "--owner", "z", "--lease", "1m").returncode == 0


# -- two pauses at once on PostgreSQL ------------------------------------------------


@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_of_two_pauses_at_once_one_changes_and_the_other_says_already(
    tmp_path: Path, verb: str
) -> None:
    """A pause (or resume) that commits while another one is between its read
    and its write: the second waits for the first and then says `already`, and
    one history line is written, not two. Staged: a transaction makes the
    change and holds the row; `ledger pause` starts, and once it waits on the
    row lock the transaction commits. Read without the lock, the second saw
    the old state and printed `paused` (`resumed`) as well."""
    from urllib.parse import quote

    import psycopg

    with KINDS["postgresql"].place(tmp_path) as url:
        assert run_ledger(url, "admit", "a").returncode == 0
        if verb == "resume":
            assert run_ledger(url, "pause").returncode == 0
        app = f"second_{verb}"
        second_url = f"{url}&{quote('application_name')}={app}"
        with psycopg.connect(url) as conn:
            paused = 1 if verb == "pause" else 0
            conn.execute(
                "UPDATE ledger_pause SET paused = %s, since = %s, actor = 'first',"
                " reason = '' WHERE id = 1",
                (paused, T0 if paused else ""),
            )
            second = subprocess.Popen(
                [*ledger_cmd(), "--store", second_url, verb],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=subprocess_env(),
            )
            deadline = time.monotonic() + EXIT_TIMEOUT
            while not waiting_on_a_lock(url, app):
                assert second.poll() is None, second.communicate()
                assert time.monotonic() < deadline, "the second never reached the row"
                time.sleep(0.05)
            conn.commit()
        out, err = second.communicate(timeout=EXIT_TIMEOUT)
        assert (second.returncode, err) == (0, "")
        assert out.startswith("already paused" if verb == "pause" else "not paused"), out
        log = run_ledger(url, "log", "--jsonl").stdout.splitlines()
        assert [json.loads(line)["event"] for line in log].count(f"ledger.{verb}d") == 0
