"""`ledger doctor`'s note of a record no claim can follow (docs/design.md §2.3):
one at the largest fence its store holds (Go's uint64: 2^64-1; SQLite's signed
INTEGER: 2^63-1), restored there by another writer or claimed up to it. Its
next claim's fence cannot be stored, so `claim --next` passes it over and
`claim KEY` refuses it (exit 8). A note, not a problem: the store is whole,
and the other tasks are handed out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.leases import next_fence_fits

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.engine.record import TaskState


def check_fences(
    store: object, records: Iterable[TaskState], found: Findings, pruned: frozenset[str]
) -> None:
    """A note per record (not pruned: it is never claimed again) at the store's
    largest fence."""
    for rec in records:
        if rec.key not in pruned and not next_fence_fits(store, rec):
            found.notes.append(
                f"{rec.key}: at fence {rec.fence}, the largest this store holds: no claim "
                "can follow it (claim --next passes it over; claim KEY refuses it)"
            )
