"""The store the user meant, in the installed `ledger` run as a fresh process:
a command that only reads never creates the store it is pointed at (exit 9,
one line), an empty or unknown store URL is a usage error (exit 2), a write
still creates its store, and `log` of a key nobody admitted exits 3."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

READS = [
    ["list"],
    ["list", "--jsonl"],
    ["stats"],
    ["state", "k"],
    ["tree"],
    ["blocked", "k"],
    ["log"],
    ["output", "k"],
    ["snapshot"],
    ["doctor"],
    ["doctor", "--fix"],
    ["check", "k", "--owner", "w", "--fence", "1"],
    ["wait", "k", "--timeout", "1s"],
]


def _ledger(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_cmd(), *args],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=60,
        check=False,
    )


def _one_line(err: str) -> str:
    assert "Traceback" not in err
    got = [ln for ln in err.splitlines() if ln]
    assert len(got) == 1, err
    return got[0]


@pytest.mark.parametrize("name", ["absent", "absent.db", "sqlite:absent-db"])
@pytest.mark.parametrize("args", READS, ids=lambda a: "-".join(a))
def test_a_read_never_creates_the_store(tmp_path: Path, name: str, args: list[str]) -> None:
    path = tmp_path / name.removeprefix("sqlite:")
    url = f"sqlite:{path}" if name.startswith("sqlite:") else str(path)
    done = run_ledger(url, *args)
    assert done.returncode == 9, (done.stdout, done.stderr)
    assert _one_line(done.stderr) == f"ledger: no store at {path} (the first write creates it)"
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_the_refusal_is_a_json_error_under_json(tmp_path: Path) -> None:
    done = run_ledger(tmp_path / "absent", "--json", "stats")
    assert done.returncode == 9
    assert json.loads(done.stdout)["error"]["code"] == "no_store"


def test_the_same_store_through_ledger_store(tmp_path: Path) -> None:
    done = _ledger("list", LEDGER_STORE=str(tmp_path / "absent"))
    assert done.returncode == 9
    assert "no store at" in _one_line(done.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["dir", "sqlite"])
def test_a_write_creates_the_store_and_a_read_then_finds_it(tmp_path: Path, kind: str) -> None:
    url = str(tmp_path / ("s.db" if kind == "sqlite" else "s"))
    assert run_ledger(url, "admit", "a").returncode == 0
    done = run_ledger(url, "list", "--jsonl")
    assert done.returncode == 0
    assert [json.loads(ln)["Key"] for ln in done.stdout.splitlines()] == ["a"]


@pytest.mark.parametrize(
    ("how", "args", "env"),
    [
        ("empty --store", ["--store", "", "list"], {}),
        ("empty --store on a write", ["--store", "", "admit", "a"], {}),
        ("empty LEDGER_STORE", ["list"], {"LEDGER_STORE": ""}),
        ("empty LEDGER_STORE on a write", ["admit", "a"], {"LEDGER_STORE": ""}),
        ("unknown scheme", ["--store", "foo://bar", "list"], {}),
        ("unknown scheme on a write", ["--store", "foo://bar", "admit", "a"], {}),
        ("no path", ["--store", "sqlite:", "list"], {}),
    ],
)
def test_a_store_url_that_names_no_store_is_a_usage_error(
    tmp_path: Path, how: str, args: list[str], env: dict[str, str]
) -> None:
    # HOME in tmp_path: had the default store been opened instead, it would be there.
    done = _ledger(*args, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), **env)
    assert done.returncode == 2, (how, done.stdout, done.stderr)
    assert _one_line(done.stderr).startswith("ledger: ")
    assert list(tmp_path.iterdir()) == []


def test_log_of_a_key_nobody_admitted_exits_3(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    done = run_ledger(store, "log", "nope")
    assert done.returncode == 3
    assert _one_line(done.stderr) == "ledger: key has no record: nope"
    assert run_ledger(store, "log", "a").returncode == 0


def test_a_forgotten_separator_is_named_on_the_error_line(tmp_path: Path) -> None:
    args = ["run", "--next", "--owner", "w", "--lease", "1m", "echo", "hi"]
    done = run_ledger(tmp_path / "s", *args)
    assert done.returncode == 2
    assert "put the command after --: ledger run [OPTIONS] [KEY] -- CMD" in done.stderr
    assert not (tmp_path / "s").exists()
