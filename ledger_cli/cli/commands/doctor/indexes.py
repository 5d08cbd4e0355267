"""`ledger doctor`'s check of a store's derived indexes: the ready index (docs/design.md
§6.1) a store keeps for `claim --next` and the dependents index of the
dependents walk must agree with the records; `--fix` rebuilds them. The JSON
store's ready index promotes the tasks waiting on a need through its
dependents index, so that one is checked (and rebuilt) first."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Protocol

from ledger_cli.cli import output
from ledger_cli.errors import StoreError


class _Findings(Protocol):
    problems: list[str]
    notes: list[str]
    fixed: list[str]


def check_indexes(
    store: object,
    found: _Findings,
    fix: bool,
    *,
    lost: bool,
    unreadable: bool,
    drop_damaged: bool = False,
) -> None:
    """Every derived index, the dependents index first: the JSON store's ready
    index finds the tasks a completed need makes ready through it. The JSON
    store reads its records once for the four (without the lock; under it to
    confirm). While a record file does not read (`unreadable`: a problem
    named already) none is checked or rebuilt, each needing every record:
    a note says so, rather than a check that stops at that file unseen."""
    if unreadable:
        found.notes.append(
            "the derived indexes (dependents, ready, live, tally) were not checked"
            + (" or rebuilt" if fix else "")
            + " while a record file does not read (named above): each needs every"
            " record; once the file is restored or dropped, ledger doctor checks them"
        )
        return
    with contextlib.ExitStack() as stack:
        one_scan = getattr(store, "one_scan", None)
        if one_scan is not None:
            with contextlib.suppress(StoreError):  # then each check reports it
                stack.enter_context(one_scan())
        check_deps_index(store, found, fix)
        check_ready_index(store, found, fix, drop_damaged)
        check_live_index(store, found, fix)
        check_tally(store, found, fix, lost=lost)


def check_ready_index(
    store: object, found: _Findings, fix: bool, drop_damaged: bool = False
) -> None:
    """Problems when the ready index disagrees with the records; `fix` rebuilds it.
    Its rebuild reads every key's schedule and queue: while one of those does
    not read (side data is the only copy: sidedata.py names it and its
    remedy), the rebuild stops at it, leaving the index to be built again by
    the first writer after the remedy, and the line says what must come first.

    A queue or schedule file the JSON store's index tells is lost
    (stores/jsonfile/sidelost.py: the task's entry sits in another queue's
    partition, or is ordered by a schedule no file backs) is a problem
    `--fix` leaves as it is, as a lost record: its rebuild keeps those
    entries, the only trace; `--fix --drop-damaged` accepts the loss (the
    task's entry by its files goes in)."""
    blocked = _side_data_damaged(store)
    before = len(found.problems)
    rebuild: Callable[[], None] | None = None
    if drop_damaged and _side_data_kept(store):
        rebuild = functools.partial(store.rebuild_ready_index, accept_lost=True)  # type: ignore[attr-defined]
    _check_index(store, found, fix, "ready", _AFTER_SIDE if blocked else _HINT, rebuild)
    if blocked:
        found.problems[before:] = [
            p.replace("(ledger doctor --fix rebuilds the index)", _AFTER_SIDE.strip())
            for p in found.problems[before:]
        ]


_HINT = " (ledger doctor --fix rebuilds the index)"
_AFTER_SIDE = (
    " (ledger doctor --fix rebuilds the index once the schedule or queue file"
    " named below is repaired or removed)"
)


def _side_data_damaged(store: object) -> bool:
    """Whether a schedule or queue file that the JSON store's ready-index rebuild
    reads does not read (an SQL store's rebuild reads `ledger_tasks` alone)."""
    from ledger_cli.stores.jsonfile import JsonFileStore

    if not isinstance(store, JsonFileStore):
        return False
    for name in ("schedules", "queues"):
        read: Callable[[], object] | None = getattr(store, name, None)
        try:
            if read is not None:
                read()
        except StoreError:
            return True
    return False


def _side_data_kept(store: object) -> bool:
    """Whether the store is the JSON store (its ready index tells lost side files)."""
    from ledger_cli.stores.jsonfile import JsonFileStore

    return isinstance(store, JsonFileStore)


def check_deps_index(store: object, found: _Findings, fix: bool) -> None:
    """Problems when the dependents index misses a record's need; `fix` rebuilds it."""
    _check_index(store, found, fix, "deps")


def check_live_index(store: object, found: _Findings, fix: bool) -> None:
    """Problems when the JSON store's live/ index misses a pending or claimed
    record (every scan of it exits 9 then); `fix` puts its markers back."""
    _check_index(store, found, fix, "live")


def check_tally(store: object, found: _Findings, fix: bool, *, lost: bool = False) -> None:
    """Problems when the JSON store's tally (its counts) disagrees with the
    records; `fix` rebuilds it, unless a record is `lost` (lost.py): then the
    tally stays as it is, still counting that record, so every scan (`list`,
    `snapshot`) goes on exiting 9 rather than answer without it, until the
    record is restored or `--fix --drop-damaged` accepts the loss."""
    if lost:
        hint = (
            " (kept while a record is lost: restore the record, or accept the loss"
            " with ledger doctor --fix --drop-damaged, which rebuilds it)"
        )
        _check_index(store, found, False, "tally", hint)
        return
    rebuild = _counts_missing(store)
    if rebuild is not None:
        # Not damage: a prune or rebuild cut short; the next writer builds them.
        if not fix:
            found.notes.append("tally: the counts are not built (ledger doctor --fix builds them)")
        else:
            try:
                rebuild()
            except StoreError as exc:
                found.problems.append(output.one_line(str(exc)))
                return
            found.fixed.append("built the tally's missing counts from the records")
    _check_index(store, found, fix, "tally")


def _counts_missing(store: object) -> Callable[[], None] | None:
    """The store's tally rebuild when its tally has no counts (the JSON store's
    `status_counts()` is None), else None."""
    rebuild: Callable[[], None] | None = getattr(store, "rebuild_tally_index", None)
    counter: Callable[[], dict[str, int] | None] | None = getattr(store, "status_counts", None)
    if rebuild is None or counter is None:
        return None
    try:
        return rebuild if counter() is None else None
    except StoreError:
        return None  # the check that follows names it


_WHAT = {
    "ready": "ready index",
    "deps": "dependents index",
    "live": "live index",
    "tally": "tally",
}


def _check_index(
    store: object,
    found: _Findings,
    fix: bool,
    name: str,
    hint: str = _HINT,
    rebuild: Callable[[], None] | None = None,
) -> None:
    """`rebuild`: the store's own `rebuild_NAME_index` unless given. A rebuild
    that leaves every problem as it was (a lost file it keeps the trace of)
    is not said to have fixed anything."""
    check: Callable[[], list[str]] | None = getattr(store, f"check_{name}_index", None)
    if rebuild is None:
        rebuild = getattr(store, f"rebuild_{name}_index", None)
    if check is None or rebuild is None:
        return
    try:
        problems = _check_or_rebuild(check, rebuild, found, fix, name)
        if problems and fix:
            rebuild()
            left = check()
            if left != problems:
                found.fixed.append(f"rebuilt the {_WHAT[name]} from the records")
            found.fixed.extend(_accepted(problems, left))
            problems = left
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    found.problems.extend(
        output.one_line(p) + ("" if "doctor --fix" in p else hint) for p in problems
    )


def _accepted(before: list[str], after: list[str]) -> list[str]:
    """What `--fix --drop-damaged` accepted: the lost side files named before
    the rebuild and no more after it."""
    from ledger_cli.stores.jsonfile.sidelost import LOST

    return [
        output.one_line(f"accepted the loss of {p.split(': ', 1)[0]}")
        for p in before
        if LOST in p and p not in after
    ]


def _check_or_rebuild(
    check: Callable[[], list[str]],
    rebuild: Callable[[], None],
    found: _Findings,
    fix: bool,
    name: str,
) -> list[str]:
    """The check's problems; when the index is too damaged to check (a
    StoreError naming its file) and `fix` is given, rebuild it from the records
    first, so `--fix` repairs what a check names (docs/design.md §3.2)."""
    try:
        return check()
    except StoreError as exc:
        if not fix:
            raise
        rebuild()
        found.fixed.append(
            f"rebuilt the {_WHAT[name]} from the records ({output.one_line(str(exc))})"
        )
        return check()
