"""Key and status completion (docs/design.md §6.8), through bash with the shipped
script `completions/ledger.bash`: COMP_WORDS/COMP_CWORD set as bash sets
them, `_ledger_completion` called as `complete -F` calls it, COMPREPLY read.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import ROOT, ledger_cmd, run_ledger, subprocess_env

SCRIPT = ROOT / "completions" / "ledger.bash"


def bash_complete(line: str, **env: str) -> tuple[list[str], str]:
    """Complete the last word of `line` (a trailing space: a new, empty word)."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    program = (
        f"source {shlex.quote(str(SCRIPT))}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_ledger_completion ledger\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    bin_dir = str(Path(sys.executable).parent)  # the `ledger` console script
    full = subprocess_env(**env)
    full["PATH"] = bin_dir + os.pathsep + full.get("PATH", "")
    res = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, env=full, timeout=60, check=True
    )
    return [w for w in res.stdout.splitlines() if w], res.stderr


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("ledger", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the ledger console script is not installed next to this Python")
    base = tmp_path_factory.mktemp("comp")
    json_store, sqlite_store = base / "store", base / "ledger.db"
    for key in ("backup/db-1", "backup/db-2", "build"):
        assert run_ledger(json_store, "admit", key).returncode == 0
    lines = "".join(json.dumps({"key": f"job-{i:04d}"}) + "\n" for i in range(1005))
    assert run_ledger(sqlite_store, "admit", "--batch", "-", input=lines.encode()).returncode == 0
    return {"json": json_store, "sqlite": sqlite_store}


def test_keys_from_the_environment_store(stores: dict[str, Path]) -> None:
    got, err = bash_complete("ledger state back", LEDGER_STORE=str(stores["json"]))
    assert got == ["backup/db-1", "backup/db-2"] and err == ""
    got, _ = bash_complete("ledger retry ", LEDGER_STORE=str(stores["json"]))
    assert got == ["backup/db-1", "backup/db-2", "build"]
    got, _ = bash_complete("ledger admit x --needs bu", LEDGER_STORE=str(stores["json"]))
    assert got == ["build"]


def test_store_on_the_line_wins_before_or_after_the_command(stores: dict[str, Path]) -> None:
    db = str(stores["sqlite"])
    env = {"LEDGER_STORE": str(stores["json"])}
    got, _ = bash_complete(f"ledger --store {db} cancel job-100", **env)
    assert got == [f"job-100{i}" for i in range(5)]
    got, _ = bash_complete(f"ledger tree --store {db} job-0999", **env)
    assert got == ["job-0999"]


def test_at_most_a_thousand_candidates(stores: dict[str, Path]) -> None:
    got, _ = bash_complete(f"ledger --store {stores['sqlite']} state job")
    assert len(got) == 1000 and got[0] == "job-0000"


def test_statuses(stores: dict[str, Path]) -> None:
    assert bash_complete("ledger list --status c")[0] == ["claimed", "completed"]
    assert bash_complete("ledger watch --status ")[0] == [  # watch shows no completed task
        "pending",
        "claimed",
        "failed",
        "blocked",
    ]


@pytest.mark.parametrize(
    "store", ["/nonexistent/dir/x.db", "bogus://nowhere", "postgresql://nobody@127.0.0.1:1/x"]
)
def test_silent_when_the_store_cannot_be_read(store: str, tmp_path: Path) -> None:
    got, err = bash_complete(f"ledger --store {store} state ")
    assert got == [] and err == ""


def test_a_corrupt_store_completes_nothing_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    before = bad.read_bytes()
    got, err = bash_complete(f"ledger --store {bad} state ")
    assert got == [] and err == "" and bad.read_bytes() == before
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("name", ["store", "ledger.db"])
def test_pruned_keys_are_not_offered(name: str, tmp_path: Path) -> None:
    # As `list` leaves them out: a pruned key is finished, its task gone.
    if shutil.which("ledger", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the ledger console script is not installed next to this Python")
    store = tmp_path / name
    for key in ("old-done", "old-live"):
        assert run_ledger(store, "admit", key).returncode == 0
    claim = run_ledger(store, "claim", "old-done", "--owner", "w", "--lease", "1m")
    fence = claim.stdout.strip()
    done = run_ledger(store, "complete", "old-done", "--owner", "w", "--fence", fence)
    assert done.returncode == 0
    assert run_ledger(store, "prune", "--older-than", "0s").returncode == 0
    got, _ = bash_complete(f"ledger --store {store} state old")
    assert got == ["old-live"]


def _complete_env(comp_words: str, cword: int, **env: str) -> list[str]:
    """`ledger` run as a completion script runs it, COMP_WORDS as bash splits them."""
    full = subprocess_env(
        _LEDGER_COMPLETE="complete_bash", COMP_WORDS=comp_words, COMP_CWORD=str(cword), **env
    )
    res = subprocess.run(
        [*ledger_cmd()], capture_output=True, text=True, env=full, timeout=60, check=False
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return res.stdout.splitlines()


def test_a_store_url_split_at_colons_is_the_one_on_the_line(tmp_path: Path) -> None:
    # bash splits `sqlite:///x.db` at each `:` (COMP_WORDBREAKS): the words
    # are put back together, from COMP_LINE or, without it, as touching.
    db = tmp_path / "cs.db"  # absolute: `sqlite://` + `/tmp/…` is the guide's `sqlite:///tmp/…`
    for key in ("t0140", "t0141"):
        assert run_ledger(f"sqlite://{db}", "admit", key).returncode == 0
    other = tmp_path / "other"  # LEDGER_STORE: a store that does not hold them
    assert run_ledger(other, "admit", "t0149").returncode == 0
    words = f"ledger --store sqlite : //{db} claim t014"
    assert _complete_env(words, 6, LEDGER_STORE=str(other)) == ["t0140", "t0141"]
    words = f"ledger --store sqlite : ///{db} claim t014"  # the path `//tmp/…`, the same file
    assert _complete_env(words, 6, LEDGER_STORE=str(other)) == ["t0140", "t0141"]
    line = f"ledger --store sqlite://{db} claim t014"
    newline_joined = words.replace(" ", "\n")  # as the script joins them
    got = _complete_env(newline_joined, 6, COMP_LINE=line, LEDGER_STORE=str(other))
    assert got == ["t0140", "t0141"]
    # `--store=URL` too (bash splits at `=` as well).
    words = f"ledger\n--store\n=\nsqlite\n:\n{db}\nstate\nt014"
    line = f"ledger --store=sqlite:{db} state t014"
    assert _complete_env(words, 7, COMP_LINE=line, LEDGER_STORE=str(other)) == [
        "t0140",
        "t0141",
    ]


def test_a_key_with_a_colon_completes_after_the_colon(tmp_path: Path) -> None:
    # readline replaces only the text after the last `:`; the candidate is what follows it.
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "db:backup:1").returncode == 0
    words = "ledger\nstate\ndb\n:\nbac"
    got = _complete_env(words, 4, COMP_LINE="ledger state db:bac", LEDGER_STORE=str(store))
    assert got == ["backup:1"]
    got = _complete_env(
        "ledger\nstate\ndb\n:", 3, COMP_LINE="ledger state db:", LEDGER_STORE=str(store)
    )
    assert got == ["backup:1"]


@pytest.mark.parametrize("name", ["store", "ledger.db"])
def test_keys_that_are_not_printable_are_not_offered(name: str, tmp_path: Path) -> None:
    # Written by the library (or the Go service): a newline would make two
    # candidates, an ESC sequence a terminal command. Such a key is left out.
    from datetime import UTC, datetime

    from ledger_cli import Ledger, open_store

    store = tmp_path / name
    with open_store(str(store), create=True) as opened:
        ledger = Ledger(opened)
        for key in ("k-newline\nx", "k-esc\x1b[31mred", "k-bidi\u202ex", "k-tab\tx", "k-plain"):
            ledger.admit("me", key, 1, None, datetime.now(UTC))
    got, err = bash_complete(f"ledger --store {store} state k-")
    assert got == ["k-plain"] and err == ""


def test_keys_from_the_store_url_on_the_line_of_each_kind(url: str, tmp_path: Path) -> None:
    # `json:DIR`, `sqlite:FILE`, `postgresql://u:p@host:port/db?options=…` as
    # bash splits them: at every run of `:`, `=` or `@`.
    for key in ("url-key-1", "url-key-2"):
        assert run_ledger(url, "admit", key).returncode == 0
    other = tmp_path / "other"
    assert run_ledger(other, "admit", "url-key-9").returncode == 0
    line = f"ledger --store {url} state url-k"
    words = ["ledger", "--store", *re.findall(r"[:=@]+|[^:=@]+", url), "state", "url-k"]
    got = _complete_env("\n".join(words), len(words) - 1, COMP_LINE=line, LEDGER_STORE=str(other))
    assert got == ["url-key-1", "url-key-2"]
