"""`completions/` holds exactly what the app generates; `--show-completion` and
`--install-completion` take the SHELL; completion works."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ledger_cli.cli import shell_completion
from tests.cli_support import ROOT, ledger_cmd, subprocess_env


@pytest.mark.parametrize(("shell", "name"), sorted(shell_completion.FILES.items()))
def test_completion_scripts_are_current(shell: str, name: str) -> None:
    path = ROOT / "completions" / name
    assert path.read_text(encoding="utf-8") == shell_completion.script(shell), (
        f"{path} is stale: run `python -m ledger_cli.cli.shell_completion`"
    )
    assert "_LEDGER_COMPLETE" in path.read_text(encoding="utf-8")


def test_show_completion_prints_the_same_script() -> None:
    # Typer's own switch: take the shell from the argument, not from detection.
    env = subprocess_env(_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    res = subprocess.run(
        [*ledger_cmd(), "--show-completion", "bash"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert res.stdout == shell_completion.script("bash")


@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [
        ("ledger cl", "1", "claim"),
        ("ledger claim --ow", "2", "--owner"),
        ("ledger li", "1", "list"),
    ],
)
def test_bash_completion_answers(words: str, cword: str, expected: str) -> None:
    env = subprocess_env(_LEDGER_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=cword)
    res = subprocess.run(ledger_cmd(), capture_output=True, text=True, env=env, check=False)
    assert expected in res.stdout.split()


@pytest.mark.parametrize(
    ("words", "statuses"),
    [
        ("ledger list --status ", ["pending", "claimed", "completed", "failed", "blocked"]),
        ("ledger watch --status ", ["pending", "claimed", "failed", "blocked"]),
    ],
)
def test_status_completion_offers_what_the_command_takes(words: str, statuses: list[str]) -> None:
    """`watch --status completed` exits 2: it is not offered there."""
    env = subprocess_env(_LEDGER_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD="3")
    res = subprocess.run(ledger_cmd(), capture_output=True, text=True, env=env, check=False)
    assert res.stdout.split() == statuses


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_show_completion_prints_the_named_shells_script(shell: str) -> None:
    res = subprocess.run(
        [*ledger_cmd(), "--show-completion", shell],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=False,
    )
    assert (res.returncode, res.stdout, res.stderr) == (0, shell_completion.script(shell), "")
    assert "_LEDGER_COMPLETE=complete_" + shell in res.stdout
    # Without SHELL: the shell ledger runs in (typer's detection, from the process's parents).
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    cmd = " ".join([*ledger_cmd(), "--show-completion"]) + "; true"  # no exec: SHELL stays
    res = subprocess.run(
        [shell, "-c", cmd], capture_output=True, text=True, env=subprocess_env(), check=False
    )
    assert (res.returncode, res.stdout) == (0, shell_completion.script(shell))


@pytest.mark.parametrize("option", ["--show-completion", "--install-completion"])
@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["bogus"], "{option}: unknown shell 'bogus' (bash, zsh or fish)"),
        (["powershell"], "{option}: unknown shell 'powershell' (bash, zsh or fish)"),
        (["zsh", "fish"], "{option} takes one SHELL (bash, zsh or fish), not 'zsh fish'"),
    ],
)
def test_another_shell_is_a_usage_error_and_installs_nothing(
    option: str, words: list[str], message: str, tmp_path: Path
) -> None:
    res = subprocess.run(
        [*ledger_cmd(), option, *words],
        capture_output=True,
        text=True,
        env=subprocess_env(HOME=str(tmp_path)),
        check=False,
    )
    assert res.returncode == 2
    assert res.stderr == f"ledger: {message.format(option=option)}\n"
    assert res.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_install_completion_writes_the_named_shells_script(shell: str, tmp_path: Path) -> None:
    env = subprocess_env(HOME=str(tmp_path))
    cmd = [*ledger_cmd(), "--install-completion", shell]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    place = {
        "bash": tmp_path / ".bash_completions" / "ledger.sh",
        "zsh": tmp_path / ".zfunc" / "_ledger",
        "fish": tmp_path / ".config" / "fish" / "completions" / "ledger.fish",
    }[shell]
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.splitlines()[0] == f"{shell} completion installed in {place}"
    assert place.read_text(encoding="utf-8") == shell_completion.script(shell)
    rc = {"bash": tmp_path / ".bashrc", "zsh": tmp_path / ".zshrc"}.get(shell)
    if rc is not None:  # the line that loads it, once however often it is installed
        rc.write_text("# the user's own\nalias ll='ls -l'", encoding="utf-8")
        assert subprocess.run(cmd, capture_output=True, env=env, check=False).returncode == 0
        assert subprocess.run(cmd, capture_output=True, env=env, check=False).returncode == 0
        needed = {
            "bash": f"source '{place}'",
            "zsh": "fpath+=~/.zfunc; autoload -Uz compinit; compinit",
        }[shell]
        lines = rc.read_text(encoding="utf-8").splitlines()
        assert lines == ["# the user's own", "alias ll='ls -l'", needed]


@pytest.mark.parametrize(
    ("shell", "env"),
    [
        ("zsh", {"_TYPER_COMPLETE_ARGS": "ledger li"}),
        ("fish", {"_TYPER_COMPLETE_ARGS": "ledger li", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}),
    ],
)
def test_a_script_an_earlier_ledger_installed_still_gets_answers(
    shell: str, env: dict[str, str]
) -> None:
    # typer's own zsh and fish scripts (what `--install-completion` wrote before).
    full = subprocess_env(_LEDGER_COMPLETE=f"complete_{shell}", **env)
    res = subprocess.run(ledger_cmd(), capture_output=True, text=True, env=full, check=False)
    assert res.returncode == 0 and "list" in res.stdout and "limit" in res.stdout


KEY_COMMANDS = [
    "admit", "claim", "renew", "release", "takeover", "complete", "state", "blocked",
    "tree", "log", "graph", "run", "output", "wait", "retry", "cancel", "check",
]  # fmt: skip


@pytest.fixture(scope="module")
def dash_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("dash") / "store"
    for key in ("-dash", "a"):
        res = subprocess.run(
            [*ledger_cmd(), "--store", str(store), "admit", "--", key],
            capture_output=True,
            env=subprocess_env(),
            check=False,
        )
        assert res.returncode == 0, res.stderr
    return store


def _answer(store: Path, shell: str, words: list[str], word: str) -> list[str]:
    """`ledger`'s answer to SHELL's script for the words before the cursor's and WORD."""
    if shell == "bash":
        env = {
            "COMP_WORDS": "\n".join([*words, word]),
            "COMP_CWORD": str(len(words)),
            "COMP_LINE": " ".join([*words, word]),
        }
    else:
        env = {"_LEDGER_COMPLETE_WORDS": "\n".join(words), "_LEDGER_COMPLETE_WORD": word}
    env |= {"_LEDGER_COMPLETE": f"complete_{shell}", "LEDGER_STORE": str(store)}
    res = subprocess.run(
        ledger_cmd(), capture_output=True, text=True, env=subprocess_env(**env), check=False
    )
    assert res.returncode == 0, res.stderr
    return [line for line in res.stdout.splitlines() if line]


@pytest.mark.parametrize("command", KEY_COMMANDS)
def test_every_key_argument_puts_a_dash_key_after_a_double_dash(
    dash_store: Path, command: str
) -> None:
    """Each command's KEY: `-dash` comes as `-- -dash` on a line with no `--`
    (with `-d` typed too), alone after one, never bare before one."""
    assert sorted(_answer(dash_store, "bash", ["ledger", command], "")) == ["-- -dash", "a"]
    assert "-- -dash" in _answer(dash_store, "bash", ["ledger", command], "-d")
    after = _answer(dash_store, "bash", ["ledger", command, "--"], "")
    assert sorted(after) == ["-dash", "a"]


def test_each_shell_gets_its_own_form_of_a_dash_key(dash_store: Path) -> None:
    words = ["ledger", "state"]
    assert sorted(_answer(dash_store, "zsh", words, "")) == ["\t-dash", "a"]
    assert _answer(dash_store, "fish", words, "") == ["a", "--\tthen the key -dash"]
    assert _answer(dash_store, "fish", words, "-d") == []  # fish: `--` first
    # A quote begun: bash cannot put `--` before it, so the key is left out.
    assert _answer(dash_store, "bash", words, "'") == ["a"]
    # Not a KEY argument: an option's value and a given KEY stay as they are.
    assert sorted(_answer(dash_store, "bash", ["ledger", "admit", "x", "--needs"], "")) == [
        "-dash",
        "a",
    ]
    assert "-- -dash" not in _answer(dash_store, "bash", ["ledger", "state", "a"], "-")
