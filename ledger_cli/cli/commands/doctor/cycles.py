"""`ledger doctor`: cycles of needs already in a store (a problem, exit 9).

`admit` refuses a cycle (engine/cycles.py), but two admits racing on
different processes, a Go writer, or a store older than that check can hold
one: none of its tasks is ever ready. Each strongly connected group of
records that are not completed is named once, by a shortest cycle through
its smallest key. `--fix` changes nothing: which task to drop or re-admit
is the operator's choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.engine.record import TaskState


def check_cycles(records: list[TaskState], found: Findings) -> None:
    from ledger_cli.engine.cycles import describe, find_cycles

    for cycle in find_cycles({rec.key: rec for rec in records}):
        found.problems.append(
            output.clip(
                f"a cycle of needs: {describe(cycle)} (none of them is ever ready: "
                f"`ledger cancel` one of them, or admit one again at a higher --seq "
                f"with other needs)"
            )
        )
