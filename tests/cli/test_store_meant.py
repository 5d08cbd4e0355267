"""The store the user meant, each case a fresh `ledger` process.

A read command (or `claim`/`run --next` without `--wait`, which has
nothing to claim there) on a `--store`/`LEDGER_STORE` that does not exist, or that is
a directory holding something but no store, exits 9 and creates nothing (a
mistyped path is not a healthy, empty queue); an empty
store setting, an unknown URL scheme or a URL naming the other kind of
store (a JSON store's directory as SQLite, or the reverse) is a usage
error (2); a write still
creates its store; the default data directory may be empty.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.cli_support import ledger_cmd, lines, run_ledger, subprocess_env

if TYPE_CHECKING:
    from pathlib import Path

READS: list[list[str]] = [
    ["list"],
    ["list", "--jsonl"],
    ["stats"],
    ["state", "a"],
    ["tree", "a"],
    ["log"],
    ["log", "a"],
    ["output", "a"],
    ["doctor"],
    ["snapshot"],
    ["wait", "a", "--timeout", "1s"],
    ["blocked", "a"],
    ["check", "a", "--owner", "w", "--fence", "1"],
    ["graph"],
    ["limit"],
    # Writes with nothing to claim in a store that does not exist (no --wait):
    ["claim", "--next", "--owner", "w", "--lease", "1m"],
    ["run", "--next", "--owner", "w", "--lease", "1m", "--", "true"],
    ["run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true"],
]


def _bare(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`ledger ARGS` with no --store of its own."""
    return subprocess.run(
        [*ledger_cmd(), *args],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", ["store", "store.db", "store.sqlite"])
@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_a_read_on_a_missing_store_exits_9_and_creates_nothing(
    tmp_path: Path, name: str, args: list[str]
) -> None:
    target = tmp_path / name
    r = run_ledger(target, *args)
    assert r.returncode == 9, (r.returncode, r.stderr)
    assert lines(r.stderr) == [f"ledger: no store at {target} (the first write creates it)"]
    assert "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_ledger_store_variable_is_checked_too(tmp_path: Path) -> None:
    target = tmp_path / "nope.db"
    r = _bare("list", LEDGER_STORE=str(target))
    assert r.returncode == 9, r.stderr
    assert "no store at" in r.stderr
    assert not target.exists()


@pytest.mark.parametrize("name", ["store", "store.db"])
def test_a_write_creates_the_store_and_reads_then_work(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    assert run_ledger(target, "admit", "a").returncode == 0
    r = run_ledger(target, "list", "--jsonl")
    assert r.returncode == 0, r.stderr
    assert '"a"' in r.stdout


def test_an_existing_empty_directory_is_an_empty_store(tmp_path: Path) -> None:
    r = run_ledger(tmp_path, "list", "--jsonl")
    assert (r.returncode, r.stdout) == (0, "")


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_a_directory_that_is_not_a_store_is_refused_by_every_read(
    tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    r = run_ledger(tmp_path, *args)
    assert r.returncode == 9, (r.returncode, r.stderr)
    assert lines(r.stderr) == [
        f"ledger: store: {tmp_path}: is not empty and is not a ledger store (it holds "
        "'notes.txt'); choose an empty or new directory"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_the_default_store_may_be_missing(tmp_path: Path) -> None:
    # A fresh user's `ledger list`: the default data directory is under HOME.
    r = _bare("list", "--jsonl", HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))
    assert (r.returncode, r.stdout) == (0, ""), r.stderr


@pytest.mark.parametrize("how", ["option", "variable"])
@pytest.mark.parametrize("args", [["list"], ["admit", "a"], ["stats"]], ids=" ".join)
def test_an_empty_store_setting_is_a_usage_error(tmp_path: Path, how: str, args: list[str]) -> None:
    if how == "option":
        r = _bare("--store", "", *args, HOME=str(tmp_path))
    else:
        r = _bare(*args, HOME=str(tmp_path), LEDGER_STORE="")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines(r.stderr)) == 1
    assert "is empty" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["foo://bar", "mysql://h/db", "file:x"])
@pytest.mark.parametrize("args", [["list"], ["admit", "a"]], ids=" ".join)
def test_an_unknown_scheme_is_a_usage_error(tmp_path: Path, url: str, args: list[str]) -> None:
    r = subprocess.run(
        [*ledger_cmd(), "--store", url, *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines(r.stderr)) == 1
    assert "unknown store URL scheme" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_log_of_a_key_without_a_record_exits_3(tmp_path: Path) -> None:
    assert run_ledger(tmp_path, "admit", "a").returncode == 0
    r = run_ledger(tmp_path, "log", "nope")
    assert r.returncode == 3
    assert lines(r.stderr) == ["ledger: key has no record: nope"]
    ok = run_ledger(tmp_path, "log", "a")
    assert ok.returncode == 0 and "admitted" in ok.stdout


def test_run_without_dashes_names_the_fix(tmp_path: Path) -> None:
    r = run_ledger(tmp_path, "run", "--next", "--owner", "w", "--lease", "1m", "echo", "hi")
    assert r.returncode == 2
    [line] = [ln for ln in lines(r.stderr) if "unexpected extra argument" in ln]
    assert "put the command after --" in line
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("name", ["store", "store.db"])
def test_completing_keys_creates_no_store(tmp_path: Path, name: str) -> None:
    from ledger_cli.cli.shell_completion import keys_from
    from ledger_cli.errors import NoStoreError

    with pytest.raises(NoStoreError):
        keys_from(str(tmp_path / name), "")
    assert list(tmp_path.iterdir()) == []


def test_a_trailing_slash_names_a_directory_so_a_json_store(tmp_path: Path) -> None:
    """A path ending .db/.sqlite is SQLite; with a trailing `/` it names a
    directory, and a store in a directory is the JSON store (README, Store URLs)."""
    assert run_ledger(f"{tmp_path}/app.db/", "admit", "a").returncode == 0
    assert (tmp_path / "app.db" / "ledger-store.json").is_file()
    assert run_ledger(f"json:{tmp_path}/app.db", "state", "a").returncode == 0
    assert run_ledger(f"{tmp_path}/other.sqlite", "admit", "a").returncode == 0
    assert (tmp_path / "other.sqlite").is_file()
    assert run_ledger(f"sqlite:{tmp_path}/other.sqlite", "state", "a").returncode == 0


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("args", [["list"], ["stats"], ["admit", "zz"], ["doctor"]], ids=str)
def test_a_url_naming_the_other_kind_of_store_is_one_usage_line(
    tmp_path: Path, args: list[str]
) -> None:
    """A JSON store's directory named as `sqlite:PATH` (or as a plain path
    ending .db), and an SQLite file named as a JSON store (`json:PATH`, or a
    plain path without .db): exit 2, one line saying what is there and the
    URL that opens it, nothing written (stores/otherkind.py). Before, each
    was exit 9 with SQLite's "unable to open database file" or "not a directory"."""
    json_dir, sqlite_file = tmp_path / "jobs", tmp_path / "jobs.sqlite"
    assert run_ledger(json_dir, "admit", "a").returncode == 0
    assert run_ledger(sqlite_file, "admit", "a").returncode == 0
    plain = tmp_path / "app.db"  # a JSON store whose name ends .db
    assert run_ledger(f"json:{plain}", "admit", "a").returncode == 0
    blob = tmp_path / "ledger-data"  # an SQLite file without the suffix
    blob.write_bytes(sqlite_file.read_bytes())
    before = _tree(tmp_path)
    cases = {
        f"sqlite:{json_dir}": f"ledger: store sqlite:{json_dir} is a JSON store's directory, not"
        f" an SQLite database file; use the store URL json:{json_dir}",
        str(plain): f"ledger: store sqlite:{plain} is a JSON store's directory, not"
        f" an SQLite database file; use the store URL json:{plain}",
        f"json:{sqlite_file}": f"ledger: store {sqlite_file} is an SQLite database file, not"
        f" a JSON store directory; use the store URL sqlite:{sqlite_file}",
        str(blob): f"ledger: store {blob} is an SQLite database file, not"
        f" a JSON store directory; use the store URL sqlite:{blob}",
        f"sqlite:{tmp_path}": f"ledger: store sqlite:{tmp_path} is a directory, not an SQLite"
        " database file; name the database file (sqlite:DIR/ledger.db)",
    }
    for url, message in cases.items():
        res = run_ledger(url, *args)
        assert (res.returncode, res.stdout, lines(res.stderr)) == (2, "", [message]), url
    assert _tree(tmp_path) == before
