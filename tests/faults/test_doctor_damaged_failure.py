"""`doctor --fix` over a damaged record file of a failed task that has
dependents, as the user meets it: the blocks below it cannot be judged (the
failure is in the file that does not read), so they are no orphaned blocks
and no repair walks through that file; `--fix` lists the problems as plain
`doctor` does, rather than stop at the file with one line, and says which
checks did not run. Each command is a fresh `ledger` process."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_sane

if TYPE_CHECKING:
    from pathlib import Path


def _problems(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("problem: ")]


def test_fix_lists_the_problems_around_a_damaged_failure(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for args in (("p",), ("c", "--needs", "p"), ("d", "--needs", "p")):
        assert run_sane(store, "admit", *args).returncode == 0
    assert run_sane(store, "claim", "p", "--owner", "w", "--lease", "1h").returncode == 0
    done = run_sane(store, "complete", "p", "--owner", "w", "--fence", "1", "--failed")
    assert done.returncode == 0, done.stderr
    digest = key_digest("p")
    assert digest is not None
    path = store / "records" / digest[:2] / f"{digest}.json"
    data = bytearray(path.read_bytes())
    data[10:11] = b"X"
    path.write_bytes(bytes(data))

    plain = run_sane(store, "doctor")
    assert plain.returncode == 9, plain.stdout
    problems = _problems(plain.stdout)
    assert problems and all(str(path) in p for p in problems), plain.stdout
    assert "orphaned block" not in plain.stdout, plain.stdout
    assert "derived indexes (dependents, ready, live, tally) were not checked" in plain.stdout

    fixed = run_sane(store, "doctor", "--fix")
    assert fixed.returncode == 9, fixed.stdout
    assert fixed.stdout.startswith(f"store {store}: 2 records\n"), (fixed.stdout, fixed.stderr)
    assert _problems(fixed.stdout) == problems, fixed.stdout
    assert "were not checked or rebuilt while a record file does not read" in fixed.stdout
    assert fixed.stderr == "", fixed.stderr
    state = run_sane(store, "--json", "state", "c")
    assert '"Status":"blocked"' in state.stdout.replace(" ", ""), state.stdout

    dropped = run_sane(store, "doctor", "--fix", "--drop-damaged")
    assert dropped.returncode == 0, dropped.stdout
    assert "fixed: dropped record p" in dropped.stdout, dropped.stdout
    again = run_sane(store, "doctor")
    assert again.returncode == 0, again.stdout
