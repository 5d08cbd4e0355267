"""The shell completion scripts in `completions/`, generated from the app.

`python -m ledger_cli.cli.shellcomp [DIR]` rewrites them (default
`completions/`); a test regenerates them and fails when they differ. Each is
exactly what `ledger --show-completion SHELL` prints (typer detects the shell
unless told, so the scripts are made from typer's templates directly).
"""

from __future__ import annotations

import sys
from pathlib import Path

FILES: dict[str, str] = {"bash": "ledger.bash", "zsh": "_ledger", "fish": "ledger.fish"}


def script(shell: str) -> str:
    """What `ledger --show-completion SHELL` prints, for this app's program
    name and completion variable (no shell detection involved)."""
    from ledger_cli.cli.commands import COMPLETE_VAR
    from ledger_cli.cli.typer_compat import get_completion_script

    return get_completion_script(prog_name="ledger", complete_var=COMPLETE_VAR, shell=shell) + "\n"


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in FILES.items():
        path = directory / name
        path.write_text(script(shell), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("completions")
    for path in write_all(target):
        print(path)
