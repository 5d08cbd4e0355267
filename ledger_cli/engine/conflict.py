"""The outcome of an admission (docs/design.md §8.4): admitted, duplicate, stale or conflict.

`Ledger.admit` keeps Go's bool. This module names what a `False` meant, and it
judges that from the record that made the admit a no-op (the one the engine
loaded in the same attempt that decided not to write: `admission.admit`'s
`seen`), never from a later read. A record at a given sequence never changes
its task or needs (only a rebase to a higher sequence does, and prune, which
empties both), so a racing writer cannot turn a conflict into a duplicate or
back after the fact: a later writer can only add a higher sequence, which a
re-read would have mistaken for this admit's own outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine import admission
from ledger_cli.engine.record import check_priority, check_queue, check_sequence, is_terminal

if TYPE_CHECKING:
    from typing import Any

    from ledger_cli.engine.core import Core
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.schedule import Schedule

ADMITTED = "admitted"
DUPLICATE = "duplicate"
STALE = "stale"
CONFLICT = "conflict"


class Outcome:
    """What an admit did: `word` (one of the four), the record it wrote or
    compared against (`record`; None only when an admitted record could not be
    read back), and for a conflict what differs (`differs`: "task", "needs",
    "queue", or several)."""

    __slots__ = ("differs", "record", "word")

    def __init__(self, word: str, record: TaskState | None, differs: tuple[str, ...] = ()) -> None:
        self.word = word
        self.record = record
        self.differs = differs

    @property
    def admitted(self) -> bool:
        return self.word == ADMITTED

    def message(self, key: str) -> str:
        """The stderr line of a conflict."""
        seq = self.record.sequence if self.record is not None else 0
        words = {"task": "a different task", "needs": "different needs"}
        words["queue"] = "a different queue"
        what = " and ".join(words[d] for d in self.differs) or words["task"]
        return f"ledger: {key} is already admitted at sequence {seq} with {what}"


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: objects regardless of member order, numbers by
    value (`1` and `1.0` are one number), `true` never the number 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            return False
        return all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is b
    return type(a) is type(b) and bool(a == b)


def classify(
    core: Core,
    cur: TaskState,
    seq: int,
    task: Any,
    needs: tuple[str, ...] | None,
    queue: str = "default",
) -> Outcome:
    """The outcome of an admit that `cur` (the stored record) made a no-op; a
    different `queue` at the same sequence is a conflict too (docs/design.md §8.7: only
    a rebase moves a task to another queue)."""
    if cur.sequence > seq:
        return Outcome(STALE, cur)
    if cur.sequence < seq:
        # Only a finished record refuses a rebase (Go: a no-op).
        return Outcome(DUPLICATE, cur)
    differs: list[str] = []
    if not json_equal(cur.task, task):
        differs.append("task")
    if tuple(cur.needs or ()) != tuple(needs or ()):
        differs.append("needs")
    from ledger_cli.engine import queues

    if queues.of(core.store, cur.key) != queue:
        differs.append("queue")
    if not differs:
        return Outcome(DUPLICATE, cur)
    if is_terminal(cur.status) and cur.task is None and cur.needs is None and _pruned(core, cur):
        return Outcome(DUPLICATE, cur)  # a pruned record has nothing left to compare
    return Outcome(CONFLICT, cur, tuple(differs))


def _pruned(core: Core, cur: TaskState) -> bool:
    from ledger_cli.engine.prune import is_pruned

    return is_pruned(core.store, cur.key)


def _refuse_cycle(core: Core, key: str, seq: int, needs: tuple[str, ...]) -> None:
    """CycleError when this admit would write needs that close a cycle (an
    extension beyond the Go package: engine/cycles.py says why `Ledger.admit`
    does not check). An admit that will be a no-op (a finished record, a
    sequence not above the stored one) writes nothing and is not refused."""
    from ledger_cli.engine.cycles import cycle_error, would_close

    store = core.store
    cycle = would_close(store.load, key, needs, getattr(store, "dependents", None))
    if cycle is None:
        return
    cur = store.load(key)
    if cur is not None and admission.is_noop(cur, seq):
        return
    raise cycle_error(key, cycle)


def admit(
    core: Core,
    actor: str,
    key: str,
    seq: int,
    task: Any,
    now: Instant,
    needs: tuple[str, ...] | None,
    schedule: Schedule | None = None,
    queue: str = "default",
) -> Outcome:
    """`admission.admit`, and what it did. A write (insert or rebase) keeps
    `schedule` and `queue` as the key's (docs/design.md §8.1: a rebase without
    one clears it; with `Core.hold_leases`, a rebase of a live lease is not due
    before it ends); run it in a `store.batch()` so that all land together.
    The key, actor and needs (`admission.check_names`), the sequence,
    priority and queue are checked before any store is read (engine/record.py:
    ValidationError, exit 8, on every store)."""
    admission.check_names(actor, key, needs)
    seq = check_sequence(seq)
    queue = check_queue(queue)
    if schedule is not None:
        schedule = (schedule[0], check_priority(schedule[1]))
    if needs:
        _refuse_cycle(core, key, seq, needs)
    seen: list[TaskState] = []
    if admission.admit(core, actor, key, seq, task, now, needs, seen):
        from ledger_cli.engine import schedule as sched

        if core.hold_leases and seen:  # seen: the record the rebase replaced
            schedule = sched.wait_out(schedule, seen[-1], now)
            core.slot_kept(key, seen[-1], now)  # in its queue before the rebase
        if schedule is not None or sched.of(core.store, key) is not None:
            sched.put(core.store, key, schedule)
        from ledger_cli.engine import queues

        # like the schedule: a rebase without --queue moves the task back to default
        if queue != queues.DEFAULT or queues.of(core.store, key) != queues.DEFAULT:
            queues.put(core.store, key, queue)
        return Outcome(ADMITTED, core.store.load(key))
    return classify(core, seen[-1], seq, task, needs, queue)
