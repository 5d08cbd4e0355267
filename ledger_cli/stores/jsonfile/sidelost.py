"""A key's queue or schedule file lost (docs/design.md §8.7, §8.1; docs/stores.md):
the ready index is the store's one other trace of them.

`queue/<digest>.json` and `schedule/<digest>.json` are primary data: a key
without one is in `default`, due at its CreatedAt with priority 0, so a file
deleted by hand, or lost by the file system, reads as that default, not as
damage. The ready index (readyindex.py) keeps every candidate (a pending or
claimed record whose needs are all completed) in its queue's partition,
ordered by its priority and due instant, added before the write that makes
it so: whenever a candidate's entry as its record and files give it (`entry_of`
in the partition of the queue its file names) is missing from the index,
something is damaged. When the index then holds another entry of the key that
only a lost file explains, that file is named:

- the key has no queue file, and an entry of it sits in another queue's
  partition: its queue file is lost (a legitimate stale entry there, left by
  a move to `default`, comes with the entry in `default`'s partition, added
  first);
- the key has no schedule file, and an entry of it is ordered with a
  priority other than 0 or due after its CreatedAt: its schedule file is lost
  (a schedule removed by a rebase comes with the entry of the new record).

What is not detected: a lost file of a task that is not a candidate (waiting
on a need, or finished) has no entry to tell (a waiting task becomes ready in
`default`, or due at once, when its need completes); nor one whose entries a
rebuild of the whole index (its manifest gone) wrote again from the files.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import readyindex
from ledger_cli.stores.jsonfile.layout import shown
from ledger_cli.stores.jsonfile.readyindex import DEFAULT_QUEUE, RANK, Entry, Schedule
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ledger_cli.engine.record import TaskState
    from ledger_cli.stores.jsonfile.readyindex import Load

LOST = "file is missing while the ready index"
"""The words of every line this module writes (`ledger doctor` finds its lines by them)."""


@dataclass(frozen=True)
class Lost:
    """What the ready index says a key's lost files held."""

    key: str
    queue: str | None
    """The queue the index has the key in (its queue file lost), or None."""
    schedule: tuple[int, int] | None
    """(due instant in unix ns, 0 when not after CreatedAt; priority) by which
    the index orders the key (its schedule file lost), or None."""


def _priority(entry: Entry) -> int:
    return 1000 - entry[0] // RANK


def _scheduled(rec: TaskState, entry: Entry) -> tuple[int, int] | None:
    """The schedule `entry` was ordered by, when it is one a schedule file gave."""
    priority, due = _priority(entry), readyindex.due_ns(entry)
    created = rec.created_at.unix_ns
    if priority == 0 and due <= created:
        return None
    return (due if due > created else 0, priority)


def suspect(rec: TaskState, part: str, entry: Entry, queue: str, sched: Schedule | None) -> bool:
    """Whether `entry`, met in `part`'s partition and stale by `rec` and its
    files (`queue`: its queue file's, `default` without one; `sched`: its
    schedule file's), may be the trace of a lost file (`judge` decides)."""
    if queue == DEFAULT_QUEUE and part != DEFAULT_QUEUE:
        return True
    return sched is None and part == queue and _scheduled(rec, entry) is not None


def judge(
    rec: TaskState, entries: Iterable[tuple[str, Entry]], queue: str, sched: Schedule | None
) -> Lost | None:
    """What the index's `entries` of a candidate (partition, entry) say its
    files lost, when the entry its record and files give is missing from the
    partition of `queue`; None: nothing they tell."""
    entries = sorted(entries)
    lost_queue = None
    if queue == DEFAULT_QUEUE:
        lost_queue = next((part for part, _ in entries if part != DEFAULT_QUEUE), None)
    home = queue if lost_queue is None else lost_queue
    schedule = None
    if sched is None:
        for part, entry in sorted(entries, key=lambda pe: pe[0] != home):
            if part == home or lost_queue is not None:
                schedule = _scheduled(rec, entry)
                if schedule is not None:
                    break
    if lost_queue is None and schedule is None:
        return None
    return Lost(rec.key, lost_queue, schedule)


def problems(root: str, lost: Lost) -> list[str]:
    """A line for each file `lost` names, with what the user can do."""
    from ledger_cli.engine.instant import Instant

    digest = key_digest(lost.key) or ""
    key = repr(lost.key)
    out = []
    if lost.queue is not None:
        path = shown(root, "queue", digest + ".json")
        out.append(
            f"{path}: the queue file of {key} is lost: the {LOST} has it in queue"
            f" {lost.queue!r} (restore the file from a backup, or admit {key} again at a"
            f" higher --seq with --queue; ledger doctor --fix --drop-damaged accepts the"
            " loss: the task goes to the default queue)"
        )
    if lost.schedule is not None:
        due, priority = lost.schedule
        when = f"not before {Instant.from_unix_ns(due)}, " if due else ""
        path = shown(root, "schedule", digest + ".json")
        out.append(
            f"{path}: the schedule file of {key} is lost: the {LOST} orders it"
            f" {when}priority {priority} (restore the file from a backup, or admit {key}"
            " again at a higher --seq with its --not-before and --priority; ledger doctor"
            " --fix --drop-damaged accepts the loss: the task is due at once, priority 0)"
        )
    return out


def refuse(
    root: str,
    root_fd: int,
    rec: TaskState,
    met: tuple[str, Entry],
    load: Load,
    queue: str,
    sched: Schedule | None,
) -> None:
    """`claim --next`'s walk met the stale entry `met` (partition, entry) of
    `rec`: StoreDamageError naming the lost file when it is the trace of one
    (`suspect`, then `judge`, for a candidate whose entry by its files the
    index misses), rather than drop it and hand the task out early, or from
    the wrong queue. Under the lock."""
    part, entry = met
    if not suspect(rec, part, entry, queue, sched) or not readyindex.is_candidate(rec, load):
        return
    expected = readyindex.entry_of(rec, sched)
    if expected is None:
        return
    with readyindex.opened(root, root_fd) as chunks:
        if chunks is None or chunks.holds(queue, [expected]):
            return
    lost = judge(rec, [met], queue, sched)
    if lost is not None:
        raise StoreDamageError(f"ledger: store: {problems(root, lost)[0]}")


def told(root: str, root_fd: int, missing: list[str], load: Load) -> dict[str, Lost]:
    """Under the lock: of the candidates `missing` from the index (their entry
    by their files is not in it), those whose other entries in it tell a lost
    queue or schedule file (`judge`). A read of the whole index: only when
    candidates are missing, which is damage already."""
    from ledger_cli.stores.jsonfile import queueread, schedulefile

    by_hex = {}
    for key in missing:
        with contextlib.suppress(UnicodeEncodeError):  # no entry can name it
            by_hex[key.encode("utf-8").hex()] = key
    entries: dict[str, list[tuple[str, Entry]]] = {}
    with readyindex.opened(root, root_fd) as chunks:
        if chunks is None:
            return {}
        for queue, held in chunks.by_queue().items():
            for entry in held:
                if entry[1] in by_hex:
                    entries.setdefault(by_hex[entry[1]], []).append((queue, entry))
    sched = schedulefile.reader(root)
    queue_of = queueread.reader(root)
    out: dict[str, Lost] = {}
    for key, found in entries.items():
        rec = load(key)
        if rec is None or not readyindex.is_candidate(rec, load):
            continue
        lost = judge(rec, found, queue_of(key), sched(key))
        if lost is not None:
            out[key] = lost
    return out


def lines(root: str, missing: list[str], lost: dict[str, Lost]) -> list[str]:
    """`ledger doctor`'s lines for the candidates `missing` from the index: the
    lost files of those `lost` names, a missing candidate for the others."""
    out: list[str] = []
    for key in missing:
        if key in lost:
            out += problems(root, lost[key])
        else:
            out.append(f"ready index: ready candidate {key!r} is missing")
    return out
