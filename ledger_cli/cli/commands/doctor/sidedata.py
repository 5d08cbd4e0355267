"""`ledger doctor`'s check of the side data a store keeps beside its records:
the pause (docs/design.md §8.3), the schedules (§8.1), the queues, the
limits and the revoked leases (§8.7), each read as the commands read them,
so that what makes a command exit 9 makes `doctor` exit 9 too, with the same
line.

A priority outside -1000..1000 (written by the library before it checked)
is a note: the JSON store's ready index orders it as the nearest end of the
range, so `--fix` rebuilds that index whole.

`--fix` leaves them as they are: each is the only copy of what it says (no
derived index to rebuild from the records), so the line says what the user
can do instead (`ledger resume`, `ledger limit`, repair or remove it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.cli.commands.doctor.findings import Findings

READS = ("read_pause", "schedules", "queues", "limits", "revoked_leases")
"""The store methods that read each kind whole (a store without one keeps none)."""


def check_side_data(store: object, found: Findings) -> None:
    """A problem for each kind of side data that does not read."""
    for name in READS:
        read: Callable[[], object] | None = getattr(store, name, None)
        if read is None:
            continue
        try:
            got = read()
        except StoreError as exc:
            found.problems.append(output.one_line(str(exc)))
            continue
        if name == "schedules" and isinstance(got, dict):
            _note_priorities(got, found)


def _note_priorities(schedules: dict[str, tuple[object, object]], found: Findings) -> None:
    """A note per priority outside -1000..1000 (docs/design.md §8.2), which the
    library wrote before it checked: the task still runs, ordered as the
    nearest end of the range on a JSON store; an admission at a higher
    sequence sets another."""
    for key, (_, priority) in sorted(schedules.items()):
        if type(priority) is int and not -1000 <= priority <= 1000:
            near = min(max(priority, -1000), 1000)
            found.notes.append(
                output.one_line(
                    f"{key}: priority {priority} is outside -1000..1000 (written before the"
                    f" library checked it; ordered as {near} by a JSON store's ready index;"
                    " admit it again at a higher --seq to set another)"
                )
            )
