"""Completion typed as a user types it (docs/design.md §6.8): bash, zsh and fish
in a real terminal (tmux), the scripts of `completions/` sourced or put in
place by `ledger --install-completion SHELL`. Each line is completed with one
TAB and run through a function that prints the words the shell passed: a key
must come back as exactly one word, exactly the key (a space, `$`, quotes,
`\\`, `!`, `:` in it), whichever quote the word was begun with.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import ROOT, run_ledger
from tests.tmux_support import Tmux, tmux_server

KEYS = ["sp ace", "dol$lar", 'quo"te', "sq'uote", "back\\slash", "col:on", "x!y", "tick'", 'dq"']

# What is typed before the TAB, and the word the key must come back as.
TYPED = [
    ("ledger state sp", "sp ace"),
    ("ledger state dol", "dol$lar"),
    ("ledger state quo", 'quo"te'),
    ("ledger state 'sq", "sq'uote"),
    ('ledger state "dol', "dol$lar"),
    ("ledger state back", "back\\slash"),
    ('ledger state "back', "back\\slash"),
    ("ledger state col:", "col:on"),
    ("ledger state col", "col:on"),
    ('ledger state "x', "x!y"),
    ("ledger state x", "x!y"),
    ("ledger state 'tic", "tick'"),
    ('ledger state "dq', 'dq"'),
    ("ledger state dq", 'dq"'),
]

CHOICES = [
    ("ledger prune --status compl", "completed"),
    ("ledger prune --status=fai", "--status=failed"),
    ("ledger graph --format merm", "mermaid"),
    ("ledger log --event ledger.compl", "ledger.completed"),
]
"""Typed before the TAB (the option's values), and the word it must come back as."""

SHOW = {
    "bash": "show() { local n=$1; shift; printf '%s:' \"$n\"; printf '<%s>' \"$@\"; echo; }",
    "zsh": "show() { local n=$1; shift; printf '%s:' \"$n\"; printf '<%s>' \"$@\"; echo; }",
    "fish": "function show; printf '%s:' $argv[1]; printf '<%s>' $argv[2..-1]; echo; end",
}


def _need(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("ledger", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the ledger console script is not installed next to this Python")
    base = tmp_path_factory.mktemp("shells")
    json_store, sqlite_store = base / "store", base / "jobs.db"
    for key in KEYS:
        assert run_ledger(json_store, "admit", key).returncode == 0, key
    assert run_ledger(sqlite_store, "admit", "job-alpha").returncode == 0
    return {"json": json_store, "sqlite": sqlite_store}


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


def _env(home: Path, store: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # the `ledger` console script
    env = {
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "HOME": str(home),
        "LEDGER_STORE": str(store),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm",
        "LANG": "C.UTF-8",
        "HISTFILE": str(home / "history"),
    }
    return env


def _start(tmux: Tmux, shell: str, env: dict[str, str], setup: list[str]) -> None:
    """Start SHELL in the terminal with ENV, type SETUP and `show`, wait until it is ready."""
    argv = {
        "bash": ["bash", "--noprofile", "-i"],
        "zsh": ["zsh", "-i"],
        "fish": ["fish", "-i"],
    }[shell]
    prefix = ["env", "-i", *(f"{k}={v}" for k, v in env.items())]
    tmux("new-session", "-d", "-s", tmux.session, "-x", "200", "-y", "50", *prefix, *argv)
    for line in [*setup, SHOW[shell], "printf 'READY-%s\\n' 42"]:
        tmux.type(line)
        tmux.keys("Enter")
    tmux.wait_for("READY-42")


def _completed(tmux: Tmux, n: int, typed: str) -> str:
    """What the shell passes for `typed` completed with one TAB (the words of `show`)."""
    tmux.type(typed)
    tmux.keys("Tab")
    tmux.keys("C-a")
    tmux.type(f"show R{n} ")
    tmux.keys("Enter")
    return tmux.wait_line(f"R{n}:")[len(f"R{n}:") :]


def _argv(*words: str) -> str:
    return "".join(f"<{w}>" for w in words)


def _files(store: Path) -> dict[str, bytes]:
    if store.is_file():
        return {store.name: store.read_bytes()}
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def _check_typed(tmux: Tmux, stores: dict[str, Path]) -> None:
    before = {name: _files(store) for name, store in stores.items()}
    got = [_completed(tmux, n, typed) for n, (typed, _) in enumerate(TYPED)]
    assert got == [_argv("ledger", "state", key) for _, key in TYPED]
    db = stores["sqlite"]
    line = f"ledger --store sqlite:{db} state job-a"
    assert _completed(tmux, 100, line) == _argv(
        "ledger", "--store", f"sqlite:{db}", "state", "job-alpha"
    )
    assert _completed(tmux, 101, "ledger list --status=compl") == _argv(
        "ledger", "list", "--status=completed"
    )
    # An option of a few values completes them, never the shell's file names.
    for n, (typed, word) in enumerate(CHOICES, start=110):
        assert _completed(tmux, n, typed) == _argv(*typed.split()[:-1], word), typed
    assert {name: _files(store) for name, store in stores.items()} == before  # nothing written
    # No candidate from the ledger: the shell's own file names (zsh drops the
    # directory's slash when the line is run).
    base = stores["json"].parent
    got = _completed(tmux, 102, f"ledger --store {base}/sto")
    assert got in (_argv("ledger", "--store", f"{base}/store{end}") for end in ("/", ""))


def _sourcing(shell: str) -> list[str]:
    """The lines that give `shell` a plain prompt and source the shipped
    completion script (completions/), as a user's rc file would."""
    script = (
        ROOT
        / "completions"
        / {"bash": "ledger.bash", "zsh": "_ledger", "fish": "ledger.fish"}[shell]
    )
    return {
        "bash": ["PS1='$ '", f"source {script}"],
        "zsh": ["PS1='$ '", "autoload -Uz compinit && compinit -u", f"source {script}"],
        "fish": ["function fish_prompt; echo '$ '; end", f"source {script}"],
    }[shell]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_sourced_script_inserts_each_key_as_one_exact_word(
    shell: str, stores: dict[str, Path], tmux: Tmux, tmp_path: Path
) -> None:
    _need(shell)
    _start(tmux, shell, _env(tmp_path, stores["json"]), _sourcing(shell))
    _check_typed(tmux, stores)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_an_installed_script_completes_in_a_new_shell(
    shell: str, stores: dict[str, Path], tmux: Tmux, tmp_path: Path
) -> None:
    _need(shell)
    env = _env(tmp_path, stores["json"])
    res = subprocess.run(
        ["ledger", "--install-completion", shell],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0 and res.stdout.startswith(f"{shell} completion installed in ")
    # Installing again adds no second line to the start-up file.
    again = subprocess.run(
        ["ledger", "--install-completion", shell],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0
    rc = {"bash": ".bashrc", "zsh": ".zshrc", "fish": None}[shell]
    if rc is not None:
        lines = (tmp_path / rc).read_text().splitlines()
        assert len(lines) == len(set(lines)) == 1
    _start(
        tmux,
        shell,
        env,
        ["PS1='$ '" if shell != "fish" else "function fish_prompt; echo '$ '; end"],
    )
    assert _completed(tmux, 1, "ledger state sp") == _argv("ledger", "state", "sp ace")
    assert _completed(tmux, 2, "ledger state 'sq") == _argv("ledger", "state", "sq'uote")


# -- a key that starts with "-" ------------------------------------------------------


def _dash_store(base: Path) -> Path:
    store = base / "dash-store"
    assert run_ledger(store, "admit", "--", "-dash").returncode == 0
    return store


def _tab(tmux: Tmux, shell: str | None) -> None:
    """Complete a key that starts with `-` on a line without `--`: one TAB in
    bash and zsh; in fish TAB (`--`, with no space after it, as fish adds
    none after a `-`), a space, TAB."""
    tmux.keys("Tab")
    if shell == "fish":  # None: one TAB in every shell
        tmux.type(" ")
        tmux.keys("Tab")


def _tabbed(tmux: Tmux, shell: str | None, n: int, typed: str) -> str:
    """What the shell passes for `typed` completed by `_tab`."""
    tmux.type(typed)
    _tab(tmux, shell)
    tmux.keys("C-a")
    tmux.type(f"show D{n} ")
    tmux.keys("Enter")
    return tmux.wait_line(f"D{n}:")[len(f"D{n}:") :]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_key_that_starts_with_a_dash_is_completed_after_a_double_dash(
    shell: str, tmux: Tmux, tmp_path: Path
) -> None:
    """bash and zsh insert `-- -dash` with one TAB; fish (which would escape the
    space of one candidate `-- -dash`) inserts `--`, then the key at the next
    TAB after a space. Either way the command receives the key exactly, and
    `run` its command too."""
    _need(shell)
    if shutil.which("ledger", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the ledger console script is not installed next to this Python")
    store = _dash_store(tmp_path)
    _start(tmux, shell, _env(tmp_path, store), _sourcing(shell))
    dashed = _argv("ledger", "state", "--", "-dash")
    assert _tabbed(tmux, shell, 1, "ledger state ") == dashed
    if shell != "fish":  # `-d` typed: click offers options, and the key after a `--`
        assert _tabbed(tmux, shell, 2, "ledger state -d") == dashed
    # A `--` already on the line: the key alone.
    assert _tabbed(tmux, None, 3, "ledger wait a -- ") == _argv(
        "ledger", "wait", "a", "--", "-dash"
    )
    # Run as completed: the command gets the key.
    tmux.type("ledger --json state ")
    _tab(tmux, shell)
    tmux.keys("Enter")
    tmux.wait_for('"Key":"-dash"')
    # `run`: the key's `--`, then the command after a second one.
    tmux.type("ledger run --owner w --lease 1m ")
    _tab(tmux, shell)
    tmux.type(" -- printf 'RAN<%s>\\n' done")
    tmux.keys("Enter")
    tmux.wait_for("\nRAN<done>")
    res = run_ledger(store, "--json", "state", "--", "-dash")
    assert res.returncode == 0 and '"Status":"completed"' in res.stdout, res
