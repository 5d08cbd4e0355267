"""`completions/` holds exactly what the app generates; completion works."""

from __future__ import annotations

import subprocess

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
