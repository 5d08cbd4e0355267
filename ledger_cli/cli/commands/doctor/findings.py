"""What `ledger doctor` found: problems (exit 9), notes (exit 0), and what `--fix` fixed."""

from __future__ import annotations


class Findings:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.fixed: list[str] = []
