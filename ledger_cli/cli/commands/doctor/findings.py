"""What `ledger doctor` found: problems (exit 9), notes (exit 0), and what `--fix` fixed."""

from __future__ import annotations


class Findings:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.fixed: list[str] = []


def distinct(problems: list[str]) -> list[str]:
    """The problems, each once: a later line that is an earlier one's start
    (the same error met again by another check, without the remedy the
    first check added, or with the `ledger: store: ` of the error itself)
    is left out."""
    kept: list[str] = []
    bare: list[str] = []
    for line in problems:
        text = line.removeprefix("ledger: ").removeprefix("store: ")
        if not any(seen.startswith(text) for seen in bare):
            kept.append(line)
            bare.append(text)
    return kept
