"""`ledger doctor`'s checks of the records themselves (any store).

Problems (exit 9):
- text that is not valid UTF-8 (another writer, such as the Go service,
  wrote bytes): the row is named with its exact bytes, so an operator can
  address it (`ledger state $'key-\\xff'`);
- an escaped block and an orphaned block (`engine.invariants`); `--fix`
  blocks the first with the engine's walk and un-blocks the second, each a
  history line like any write through the command line.
Notes (exit 0):
- records whose latest write left no history line: the Go service (or any
  other writer) keeps no history, so `ledger log` is incomplete for them
  (but for pruned records, whose history `ledger prune` dropped);
- a need that names no record (`check_needs`): never admitted, lost,
  dropped, or filed in a record file that does not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from ledger_cli.stores.sql.codec import hex_bytes, is_utf8, shown

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.cli.context import Session
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.record import TaskState

MAX_NAMED = 10
"""A note about many records names this many of them, then counts the rest."""


class Found(Protocol):
    """Where the checks put what they find (doctor's Findings has these lists)."""

    problems: list[str]
    notes: list[str]
    fixed: list[str]


def check_records(
    s: Session,
    records: Sequence[TaskState],
    found: Found,
    fix: bool,
    history: Sequence[HistoryEntry] | None,
    pruned: frozenset[str] = frozenset(),
    damaged: frozenset[str] = frozenset(),
) -> None:
    """Every record check, in the order doctor prints them. `pruned`: the
    keys `ledger prune` pruned (it dropped their history). `damaged`: the
    file names (digests) of the record files that do not read."""
    invalid_text(records, found)
    dependency_invariants(s, _with_pruned(s, records, pruned), found, fix, damaged)
    if history is not None:
        history_coverage(records, history, found, pruned)


def _text_fields(rec: TaskState) -> Iterable[tuple[str, str]]:
    yield "key", rec.key
    yield "status", rec.status
    yield "owner", rec.owner
    yield "blocked_by", rec.blocked_by
    yield "created_by", rec.created_by
    yield "updated_by", rec.updated_by
    for need in rec.needs or ():
        yield "needs", need


def invalid_text(records: Iterable[TaskState], found: Found) -> None:
    """A problem per record with a text column that is not valid UTF-8."""
    for rec in records:
        bad = [(col, value) for col, value in _text_fields(rec) if not is_utf8(value)]
        if not bad:
            continue
        columns = ", ".join(dict.fromkeys(col for col, _ in bad))
        detail = "; ".join(f"{col} bytes '{hex_bytes(value)}'" for col, value in bad[:3])
        where = (
            f"name it by its exact bytes (ledger state $'{hex_bytes(rec.key)}')"
            if not is_utf8(rec.key)
            else "an operation on it keeps those bytes unless it sets that column"
        )
        found.problems.append(
            f"record {shown(rec.key)}: {columns} not valid UTF-8 ({detail}), shown with "
            f"U+FFFD; written by another program (the Go service?); {where}, or repair the row"
        )


def _with_pruned(
    s: Session, records: Sequence[TaskState], pruned: frozenset[str]
) -> Sequence[TaskState]:
    """`records` and the pruned records they lack (the JSON store keeps those
    in pruned/, not as record files): a task blocked by a pruned failure is
    blocked by a failure, not an orphaned block."""
    if not pruned:
        return records
    from ledger_cli.engine import prune

    seen = {rec.key for rec in records}
    return [*records, *(rec for rec in prune.pruned(s.store) if rec.key not in seen)]


def _behind_damage(records: Sequence[TaskState], damaged: frozenset[str]) -> set[str]:
    """The keys whose transitive needs reach a need filed in a record file of
    `damaged` (digests): whether something failed below them is not known,
    and the walks that repair a block would read that file."""
    if not damaged:
        return set()
    from ledger_cli.stores.jsonfile.records import key_digest

    have = {rec.key for rec in records}
    dependents: dict[str, list[str]] = {}
    for rec in records:
        for need in dict.fromkeys(rec.needs or ()):
            dependents.setdefault(need, []).append(rec.key)
    todo = [n for n in dependents if n not in have and key_digest(n) in damaged]
    behind: set[str] = set()
    while todo:
        for dep in dependents.get(todo.pop(), ()):
            if dep not in behind:
                behind.add(dep)
                todo.append(dep)
    return behind


_AFTER_DAMAGE = "once the damaged record file named above is repaired or dropped"


def dependency_invariants(
    s: Session,
    records: Sequence[TaskState],
    found: Found,
    fix: bool,
    damaged: frozenset[str] = frozenset(),
) -> None:
    """Escaped and orphaned blocks: problems, or repaired with --fix. A record
    whose transitive needs reach a `damaged` record file is no orphaned block
    (that record may be the failure), and an escaped one is not repaired
    (the walk would read that file): a problem until it is repaired."""
    from ledger_cli.engine import invariants

    behind = _behind_damage(records, damaged)
    escaped = invariants.find_escaped_blocks(records)
    orphaned = [o for o in invariants.find_orphaned_blocks(records) if o.key not in behind]
    if fix and behind:
        for e in escaped:
            if e.key in behind:
                found.problems.append(
                    f"record {shown(e.key)}: escaped block: {e.status} while {shown(e.failure)} "
                    f"in its transitive needs failed (--fix blocks it {_AFTER_DAMAGE})"
                )
        escaped = [e for e in escaped if e.key not in behind]
    if not escaped and not orphaned:
        return
    if not fix:
        for e in escaped:
            found.problems.append(
                f"record {shown(e.key)}: escaped block: {e.status} while {shown(e.failure)} "
                "in its transitive needs failed (--fix blocks it)"
            )
        for o in orphaned:
            found.problems.append(
                f"record {shown(o.key)}: orphaned block: blocked by {shown(o.blocked_by)} while "
                "nothing in its transitive needs failed (--fix un-blocks it)"
            )
        return
    from ledger_cli.engine.core import Core

    core = Core(s.store, s.recorder)  # the engine's walks, events into this session's history
    now = s.blocks.now = s.now()

    # Many repairs at once (a crash between the blocks of a long walk, a
    # store edited by hand) commit in short blocks (cli/blockwrites.py); each
    # repair reads its record again, so a block may land any time after the scan.
    def block(e: invariants.EscapedBlock) -> str | None:
        if not invariants.fix_escaped_block(core, s.actor, now, e):
            return None
        rec = s.load(e.key)
        return None if rec is None else f"blocked {shown(e.key)} by {shown(rec.blocked_by)}"

    def unblock(o: invariants.OrphanedBlock) -> str | None:
        done = invariants.fix_orphaned_block(core, s.actor, now, o)
        return f"un-blocked {shown(o.key)}" if done else None

    from ledger_cli.cli.output import one_line
    from ledger_cli.errors import StoreError

    def each(run: Callable[[], list[str | None]]) -> None:
        try:
            lines = run()
        except StoreError as exc:  # its block rolled back; doctor goes on
            found.problems.append(f"{one_line(str(exc))} (a block's repair stopped there)")
            return
        found.fixed.extend(line for line in lines if line is not None)

    each(lambda: s.blocks.each(escaped, block))
    each(lambda: s.blocks.each(orphaned, unblock))


def history_coverage(
    records: Iterable[TaskState],
    history: Iterable[HistoryEntry],
    found: Found,
    pruned: frozenset[str] = frozenset(),
) -> None:
    """A note naming the records whose latest write has no history line at or
    after it (written by the Go service or another program); a `pruned`
    record's history was dropped by `ledger prune` (docs/design.md §6.4)."""
    from ledger_cli.cli.commands.doctor.lost import DROPPED
    from ledger_cli.engine.instant import Instant

    parsed: dict[str, Instant | None] = {}
    latest: dict[str, Instant] = {}
    cut = False  # lines lost with a damaged history (a key-less ledger.dropped line)
    for entry in history:
        cut = cut or (entry.event == DROPPED and not entry.key)
        if entry.time not in parsed:
            try:
                parsed[entry.time] = Instant.parse(entry.time)
            except ValueError:
                parsed[entry.time] = None
        at = parsed[entry.time]
        if at is not None and (entry.key not in latest or latest[entry.key] < at):
            latest[entry.key] = at
    missing: list[str] = []
    for rec in records:
        if rec.key in pruned:
            continue
        at = latest.get(rec.key)
        if at is None or at < rec.updated_at:
            missing.append(rec.key)
    if not missing:
        return
    named = ", ".join(shown(k) for k in missing[:MAX_NAMED])
    more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
    found.notes.append(
        f"{len(missing)} record(s) whose latest write has no history line: {named}{more} "
        "(written by another program, such as the Go service, which keeps no history"
        + (", or lost with part of the history: see its ledger.dropped line" if cut else "")
        + "; ledger log is incomplete for them)"
    )


def check_needs(
    records: list[TaskState],
    found: Findings,
    gone: dict[str, str] | None = None,
    pruned: frozenset[str] = frozenset(),
    damaged: frozenset[str] = frozenset(),
) -> None:
    """A note per need naming no record; `gone`: why a key has none (lost,
    dropped). A `pruned` key is a record still (the listings leave it out).
    `damaged`: the file names (digests) of the record files that do not
    read, reported as problems: a need filed there was admitted."""
    keys = {rec.key for rec in records} | pruned
    if damaged:
        from ledger_cli.stores.jsonfile.records import key_digest
    for rec in records:
        for need in dict.fromkeys(rec.needs or ()):
            if need not in keys:
                why = (gone or {}).get(need, "was never admitted")
                if damaged and key_digest(need) in damaged:
                    why = "has a damaged record file (named above)"
                found.notes.append(f"{rec.key}: needs {need}, which {why}")
