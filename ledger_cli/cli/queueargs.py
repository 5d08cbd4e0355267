"""`--queue` values (docs/design.md §8.7; engine/queues.py): names follow the key rules
and are at most 64 bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli.inputs import InputError, validate_key
from ledger_cli.engine.queues import MAX_NAME_BYTES

if TYPE_CHECKING:
    from collections.abc import Iterable


def parse_queues(values: Iterable[str] | None) -> frozenset[str] | None:
    """`--queue a,b` (repeatable) as a set of names; None for every queue."""
    if not values:
        return None
    names: set[str] = set()
    for value in values:
        for name in value.split(","):
            names.add(validate_name(name.strip()))
    return frozenset(names)


def validate_name(name: str) -> str:
    """A queue name follows the key rules, is at most 64 bytes, and holds no
    comma and no space at its ends: `--queue a,b` names two queues, each
    stripped, so such a name could never be chosen."""
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InputError(f"ledger: a queue name is at most {MAX_NAME_BYTES} bytes", "bad_key")
    validate_key(name, "queue")
    if "," in name or name != name.strip():
        raise InputError(
            "ledger: a queue name has no comma and no space at its ends (--queue a,b names two)",
            "bad_key",
        )
    return name
