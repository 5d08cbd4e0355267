"""`ledger restore F|-`: insert every record of a snapshot, all or nothing per key."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.commands.admit import read_source
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import UINT64_MAX, InputError
from ledger_cli.cli.numberlimit import number_max as _limit
from ledger_cli.cli.numberlimit import why as _on

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.errors import ValidationError


def _check_records(tasks: tuple[TaskState, ...], limit: int = UINT64_MAX) -> None:
    """Every key a restored record names (its own, its needs, its blocker) must be one
    the command line can address (docs/design.md §5.2), its sequence one the store
    holds (`limit`: SQLite's INTEGER is signed), and its fence must leave room for a
    next claim: ValidationError (exit 8) otherwise. A key may appear once:
    RestoreConflictError (exit 8) naming both entries otherwise."""
    from ledger_cli.cli.inputs import validate_key
    from ledger_cli.engine.record import go_quote
    from ledger_cli.errors import RestoreConflictError, ValidationError

    first: dict[str, int] = {}
    for i, rec in enumerate(tasks):
        if first.setdefault(rec.key, i) != i:
            raise RestoreConflictError(
                f"ledger: restore: key {go_quote(rec.key)} appears twice in the snapshot "
                f"(entries {first[rec.key]} and {i})"
            )
        if rec.fence >= limit:  # its next fence would not fit (Go's would wrap to 0)
            raise ValidationError(
                f"ledger: snapshot entry {i}: Fence {rec.fence} leaves no fence for the "
                f"task's next claim{_on(limit)}"
            )
        for name, at in (
            ("CreatedAt", rec.created_at),
            ("UpdatedAt", rec.updated_at),
            ("LeaseUntil", rec.lease_until),
        ):
            if abs(at.offset_seconds) >= 86_400:  # +23:60, +24:00: Go's encoder refuses it
                raise ValidationError(
                    f"ledger: snapshot entry {i}: {name} has a UTC offset of 24 hours"
                    " or more (at most ±23:59)"
                )
        if rec.sequence > limit:
            raise ValidationError(
                f"ledger: snapshot entry {i}: Sequence {rec.sequence} is more than this "
                f"store holds{_on(limit)}"
            )
        named = [("key", rec.key), *(("need", n) for n in rec.needs or ())]
        if rec.blocked_by:
            named.append(("blocked-by key", rec.blocked_by))
        for what, key in named:
            try:
                validate_key(key, what)
            except InputError as exc:
                raise ValidationError(output.within(f"snapshot entry {i}", str(exc))) from None


def _prefixed_once(exc: ValidationError) -> ValidationError:
    """Go's Snapshot.Validate text, `ledger: snapshot entry I: ledger: task …`
    (engine/snapshot.py keeps it to the letter), as every error line reads:
    `ledger:` once, as `output.at_line` makes a batch line's."""
    head, sep, rest = str(exc).partition(": ledger: ")
    return type(exc)(f"{head}: {rest}") if sep else exc


def _pruned_forms(tasks: tuple[TaskState, ...], marked: frozenset[str]) -> tuple[TaskState, ...]:
    """The snapshot's records, each one marked `"Pruned":true` in its pruned form
    (docs/design.md §6.4); a marked record that is not finished is refused
    (ValidationError, exit 8)."""
    from ledger_cli.engine.prune import PRUNABLE, pruned_form
    from ledger_cli.errors import ValidationError

    if not marked:
        return tasks
    out = []
    for i, rec in enumerate(tasks):
        if rec.key in marked:
            if rec.status not in PRUNABLE:
                raise ValidationError(
                    f"ledger: snapshot entry {i}: a pruned record is completed or failed,"
                    f" not {rec.status}"
                )
            rec = pruned_form(rec)
        out.append(rec)
    return tuple(out)


def _refuse_cycle(s: Session, tasks: tuple[TaskState, ...]) -> None:
    """A snapshot whose needs close a cycle (among its records, or with the
    store's) is refused before anything is written: exit 8 (engine/cycles.py)."""
    from ledger_cli.engine.cycles import describe, restored_cycle
    from ledger_cli.errors import CycleError

    cycle = restored_cycle(s.load, tasks)
    if cycle is not None:
        raise CycleError(
            f"ledger: restore: the snapshot's needs close a cycle: {describe(cycle)}", cycle=cycle
        )


def restore(settings: Settings, source: str) -> int:
    """Insert every record of a snapshot.

    Every key is checked first, and the restore is refused before writing
    anything when one holds a record other than the snapshot's (the engine's
    Restore would stop halfway). A key that already holds exactly the
    snapshot's record counts as restored and is left alone, so the same
    restore run again after one cut short finishes it (restore_held.py).
    Then the records are inserted in snapshot order in short blocks (docs/design.md §5.4
    "Short lock holds"), each key checked again inside its block; a key that
    another writer took in between stops the restore with exit 8, and the
    message says exactly what landed: the snapshot's first N records. A
    store failure on the way (exit 9) says so too, and that running the
    same restore again finishes it.
    """
    from ledger_cli.cli.chunks import chunked, gap_for
    from ledger_cli.cli.commands.restore_held import Held
    from ledger_cli.cli.inputs import MAX_INPUT_BYTES
    from ledger_cli.engine.history import history_bounds
    from ledger_cli.engine.snapshot import Snapshot
    from ledger_cli.errors import RestoreConflictError, StoreError, ValidationError

    data = read_source(
        source, "snapshot", MAX_INPUT_BYTES, "restore it in parts (split its Tasks array)"
    )
    try:
        snap = Snapshot.decode(data)
    except ValidationError as exc:
        raise _prefixed_once(exc) from None
    from ledger_cli.engine import prune, queues, schedule, wireext

    extensions = wireext.decode(data)
    queued = wireext.decode_queues(data)
    marked = wireext.decode_pruned(data)
    _check_records(snap.tasks or (), _limit(settings))
    tasks = _pruned_forms(snap.tasks or (), marked)
    with Session(settings) as s:
        now = s.now()
        # Damage its commit would refuse stops it before its first file.
        getattr(s.store, "refuse_damage", lambda: None)()
        bounds = history_bounds(s.store, (rec.key for rec in tasks))
        held = Held(s.store, extensions, queued, marked, bounds)
        there: set[str] = set()  # the keys an earlier run of this restore filled
        for rec in tasks:
            cur = s.load(rec.key)
            if cur is not None:
                if fields := held.differs(cur, rec):
                    raise RestoreConflictError(_other(rec.key, fields))
                there.add(rec.key)
        _refuse_cycle(s, tasks)
        landed = already = 0
        block_records: list[TaskState] = []
        block_pruned: list[TaskState] = []
        block_there: list[TaskState] = []

        def sides(rec: TaskState) -> None:
            if rec.key in extensions:  # docs/design.md §8.1: the extra members, in the same block
                schedule.put(s.store, rec.key, extensions[rec.key])
            if rec.key in queued:  # the task's queue (docs/design.md §8.7), in the same block
                queues.put(s.store, rec.key, queued[rec.key])

        @contextlib.contextmanager
        def block() -> Iterator[None]:
            nonlocal landed, already
            block_records.clear()
            block_pruned.clear()
            block_there.clear()
            with s.store.batch():
                yield
                # The block's pruned records go in together, straight into the pruned
                # form (docs/design.md §6.4); like a prune, they leave no history line.
                taken = prune.restore(s.store, block_pruned)
                if taken is not None:
                    raise RestoreConflictError(_landed(taken, landed, already, tasks))
                _append_restored(s, now, block_records)
            landed += len(block_records) + len(block_pruned) + len(block_there)
            already += len(block_there)
            output.note_committed()  # a failed stdout's line says so (exit 74)

        def insert(rec: TaskState) -> None:
            if rec.key in there:  # restored already: a write since is a worker's, not a conflict
                block_there.append(rec)
                return
            # Go's Restore step (an insert-if-absent), after a re-check under the lock.
            cur = s.load(rec.key)
            if cur is not None:
                if held.differs(cur, rec):
                    raise RestoreConflictError(_landed(rec.key, landed, already, tasks))
                block_there.append(rec)  # restored by an earlier run of this restore
                return
            # Above every fence the key's history shows (restore_held.py): a
            # lost record's holder stays fenced off.
            rec = held.as_inserted(rec)
            if rec.key in marked:
                # Its side entries first: the JSON store's pruned lines are durable
                # at once, so a crash between leaves nothing a re-run would refuse.
                sides(rec)
                block_pruned.append(rec)
                return
            if not s.store.compare_and_swap(rec.key, None, rec):
                raise RestoreConflictError(_landed(rec.key, landed, already, tasks))
            sides(rec)
            block_records.append(rec)

        # Restoring a lost record (its file gone, its key free) is what
        # `doctor` tells the operator to do: the JSON store lets this command,
        # and no other, fill such a key.
        refilling = getattr(s.store, "refilling", contextlib.nullcontext)
        try:
            with refilling():
                chunked(tasks, block, insert, gap=gap_for(s.store))
        except StoreError as exc:
            exc.detail += _stopped(landed, already, tasks)
            raise
        if not tasks:  # the store is there afterwards, as after any restore
            getattr(s.store, "create", lambda: None)()
    if settings.json:
        output.json_line({"restored": len(tasks), "already_there": already})
    elif already:
        output.line(f"restored {output.counted(len(tasks), 'record')} ({already} already there)")
    else:
        output.line(f"restored {output.counted(len(tasks), 'record')}")
    return 0


def _taken(key: str) -> str:
    from ledger_cli.engine.record import go_quote

    return f"ledger: restore: key {go_quote(key)} already has a record"


def _other(key: str, fields: list[str]) -> str:
    """The refusal before anything is written: `key` holds another record."""
    return (
        f"{_taken(key)} other than the snapshot's (its {', '.join(fields)} "
        f"{'differs' if len(fields) == 1 else 'differ'}); nothing was restored"
    )


def _landed(key: str, landed: int, already: int, tasks: tuple[TaskState, ...]) -> str:
    """The refusal when another writer took `key` during the restore: what landed."""
    head = f"{_taken(key)} (another writer took it during the restore); "
    if landed == 0:
        return head + f"nothing was restored (0 of {output.counted(len(tasks), 'record')})"
    return head + _prefix(landed, already, tasks) + "; none after them was written"


def _prefix(landed: int, already: int, tasks: tuple[TaskState, ...]) -> str:
    """`restored N of M records: the snapshot's first N, keys … through …`."""
    from ledger_cli.engine.record import go_quote

    first, last = go_quote(tasks[0].key), go_quote(tasks[landed - 1].key)
    there = f" ({already} of them already there)" if already else ""
    return (
        f"restored {landed} of {len(tasks)} records{there}: the snapshot's first {landed}, "
        f"keys {first} through {last}"
    )


def _stopped(landed: int, already: int, tasks: tuple[TaskState, ...]) -> str:
    """What a store failure during the writes (exit 9) leaves, and what to do."""
    if landed == 0:
        done = "restore stopped before its first block was committed"
    else:
        done = f"restore stopped: {_prefix(landed, already, tasks)}"
    return f"; {done}; run the same restore again to finish it (records already there are skipped)"


def _append_restored(s: Session, now: Instant, records: list[TaskState]) -> None:
    from ledger_cli.engine.history import HistoryEntry

    append = getattr(s.store, "append_history", None)
    if append is None or not records:
        return
    when = str(now)
    append(
        [
            HistoryEntry(
                time=when,
                actor=s.actor,
                event="ledger.restored",
                key=rec.key,
                fence=rec.fence,
                data=f"key {rec.key} restored from a snapshot",
            )
            for rec in records
        ]
    )
