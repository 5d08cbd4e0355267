"""A JSON store's queue or schedule file deleted (stores/jsonfile/sidelost.py):
the ready index still holds the task in its queue's partition, ordered by its
schedule, and that trace is what names the loss.

Checked with fresh `ledger` processes: `doctor` names the lost file (exit 9)
with its remedy; `doctor --fix` leaves it a problem (it does not rebuild the
trace away); `claim --next` exits 9 naming the file rather than hand the task
out of the default queue or before its not-before; `doctor --fix
--drop-damaged` accepts the loss. And what is no loss stays quiet: a task
moved back to `default`, or its schedule cleared, by a rebase.
"""

from __future__ import annotations

from pathlib import Path

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import ledger_ok, run_sane

CLAIM = ("claim", "--next", "--owner", "w", "--lease", "1m")


def _side(store: Path, kind: str, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / kind / f"{digest}.json"


def _lose(store: Path) -> tuple[Path, Path]:
    """The tester's store: `a` in queue slow, `b` not before 5 hours from now,
    then both files deleted."""
    ledger_ok(store, "admit", "a", "--queue", "slow")
    ledger_ok(store, "admit", "b", "--delay", "5h")
    queue, schedule = _side(store, "queue", "a"), _side(store, "schedule", "b")
    queue.unlink()
    schedule.unlink()
    return queue, schedule


def test_doctor_names_the_lost_files_and_fix_keeps_them(tmp_path: Path) -> None:
    """`doctor` exits 9 naming both files and what they held; `--fix` leaves
    them problems (no "no problems found"), and a second `doctor` still does."""
    store = tmp_path / "s"
    queue, schedule = _lose(store)
    for args in (("doctor",), ("doctor", "--fix"), ("doctor",)):
        res = run_sane(store, *args)
        assert res.returncode == 9, (args, res.stdout)
        assert f"{queue}: the queue file of 'a' is lost" in res.stdout
        assert "has it in queue 'slow'" in res.stdout
        assert f"{schedule}: the schedule file of 'b' is lost" in res.stdout
        assert "orders it not before" in res.stdout
        assert "no problems found" not in res.stdout
        assert "ready candidate" not in res.stdout


def test_claim_next_never_hands_the_tasks_out(tmp_path: Path) -> None:
    """After `doctor --fix`, `claim --next` exits 9 naming the queue file
    (not "a 1" from `default`); `--queue default` finds nothing ready: `b` is
    not handed out before its not-before; `--queue slow` names the file too."""
    store = tmp_path / "s"
    queue, _ = _lose(store)
    run_sane(store, "doctor", "--fix")
    for args in (CLAIM, CLAIM, (*CLAIM, "--queue", "slow")):
        res = run_sane(store, *args)
        assert res.returncode == 9, (args, res.stdout)
        assert res.stdout == ""
        assert str(queue) in res.stderr and "is lost" in res.stderr
    res = run_sane(store, *CLAIM, "--queue", "default")
    assert res.returncode == 7, res.stdout  # nothing ready: b is not due
    assert res.stdout == ""


def test_lost_priority_stops_claim_next(tmp_path: Path) -> None:
    """A lost schedule file of a task with a priority: `claim --next` meets
    its entry first and exits 9 naming the file, rather than drop the entry
    (the task then out of every `--next`) and hand out the next task."""
    store = tmp_path / "s"
    ledger_ok(store, "admit", "p", "--priority", "5")
    ledger_ok(store, "admit", "q")
    schedule = _side(store, "schedule", "p")
    schedule.unlink()
    res = run_sane(store, *CLAIM)
    assert res.returncode == 9 and res.stdout == ""
    assert f"{schedule}: the schedule file of 'p' is lost" in res.stderr
    assert "priority 5" in res.stderr
    res = run_sane(store, "doctor")
    assert res.returncode == 9 and "priority 5" in res.stdout


def test_drop_damaged_accepts_the_loss(tmp_path: Path) -> None:
    """`doctor --fix --drop-damaged` accepts the loss (each file named), then
    `doctor` is clean and both tasks are claimed from `default`, due now."""
    store = tmp_path / "s"
    queue, schedule = _lose(store)
    res = run_sane(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert f"fixed: accepted the loss of {queue}" in res.stdout
    assert f"fixed: accepted the loss of {schedule}" in res.stdout
    assert "no problems found" in run_sane(store, "doctor").stdout
    got = {ledger_ok(store, *CLAIM).split()[0] for _ in range(2)}
    assert got == {"a", "b"}


def test_no_loss_is_quiet(tmp_path: Path) -> None:
    """Stale entries of no loss: a task moved from slow back to `default` and
    one whose not-before a rebase cleared are claimed (doctor clean before
    and after); a finished task's queue file deleted changes nothing a
    command shows (docs/stores.md: not detected)."""
    store = tmp_path / "s"
    ledger_ok(store, "admit", "x", "--queue", "slow", "--priority", "3")
    ledger_ok(store, "admit", "x", "--seq", "2")
    ledger_ok(store, "admit", "y", "--delay", "5h", "--priority", "2")
    ledger_ok(store, "admit", "y", "--seq", "2")
    ledger_ok(store, "admit", "f", "--queue", "slow")
    ledger_ok(store, "run", "f", "--owner", "w", "--lease", "1m", "--", "true")
    _side(store, "queue", "f").unlink()
    assert "no problems found" in run_sane(store, "doctor").stdout
    got = {ledger_ok(store, *CLAIM).split()[0] for _ in range(2)}
    assert got == {"x", "y"}
    assert "no problems found" in run_sane(store, "doctor").stdout
