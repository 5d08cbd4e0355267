"""The queues one `claim --next` may claim from (docs/design.md §8.7): a module of its
own, so the Ready rule (engine/ready.py) and the queues (engine/queues.py)
each import it without importing each other."""

from __future__ import annotations


class Filter:
    """The queues one `claim --next` may claim from: `wanted` (None: every
    queue) less `skip` (those at their limit). A store with `filters_queues`
    reads only the admitted queues' tasks (`ready_candidates(now, filter)`).
    (A plain class: dataclasses imports inspect, too heavy for the hot path.)"""

    __slots__ = ("skip", "wanted")

    def __init__(self, wanted: frozenset[str] | None, skip: frozenset[str]) -> None:
        self.wanted = wanted
        self.skip = skip

    def admits(self, queue: str) -> bool:
        return (self.wanted is None or queue in self.wanted) and queue not in self.skip
