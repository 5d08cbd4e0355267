"""The graph of needs read from a store: one node per record (and one per need
that has no record), one edge from each need to the task that needs it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger_cli.errors import NoKeyError

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

MISSING = "missing"
"""The status shown for a need that has no record."""

STATUS_COLOURS: dict[str, str] = {
    "completed": "#b7e4c7",
    "failed": "#f4a6a6",
    "blocked": "#fcd29f",
    "claimed": "#a9cdf5",
    "pending": "#f2f2f2",
    MISSING: "#ffffff",
}
"""Fill colour by status, shared by every format: completed green, failed
red, blocked orange, claimed blue, pending neutral, missing white."""

BLOCKING_COLOUR = "#c0392b"
EDGE_COLOUR = "#555555"


def fill(status: str) -> str:
    """The fill colour of a node (an unknown status is drawn neutral)."""
    return STATUS_COLOURS.get(status, STATUS_COLOURS["pending"])


@dataclass(frozen=True)
class Node:
    key: str
    status: str
    missing: bool = False


@dataclass(frozen=True)
class Edge:
    source: str
    """The need."""
    target: str
    """The task that needs it (it runs after `source`)."""
    blocking: bool
    """A failure (or a task it blocked) blocking `target`."""


@dataclass(frozen=True)
class Graph:
    nodes: list[Node]
    edges: list[Edge]

    def to_obj(self) -> dict[str, Any]:
        """The `ledger --json graph` shape."""
        return {
            "nodes": [{"key": n.key, "status": n.status} for n in self.nodes],
            "edges": [
                {"from": e.source, "to": e.target, "blocking": e.blocking} for e in self.edges
            ],
        }


def collect(store: Store, keys: Sequence[str] = ()) -> Graph:
    """The graph of every record but the pruned ones (a pruned need is drawn:
    its record is kept, with its status), or with `keys` only those keys, their
    ancestors (what they need, transitively) and their descendants (what needs
    them). A key never admitted that a record needs is drawn as the whole
    graph draws it, missing, with what needs it; NoKeyError for a key that
    is neither a record nor a need. Nodes and edges are
    sorted by key, so the output is stable."""
    from ledger_cli.engine.prune import visible

    records: dict[str, TaskState] = {rec.key: rec for rec in visible(store)}
    absent = {n for rec in records.values() for n in rec.needs or () if n not in records}
    for key in sorted(absent.union(keys).difference(records)):
        found = store.load(key)  # a pruned record is still what it was: drawn with its status
        if found is not None:
            records[key] = found
        elif key in keys and key not in absent:  # nobody's need either: nothing to draw
            raise NoKeyError(key=key)
    if keys:
        chosen = _around(records, keys)
    else:
        chosen = set(records)
        for rec in records.values():
            chosen.update(rec.needs or ())
    nodes = [
        Node(k, records[k].status) if k in records else Node(k, MISSING, missing=True)
        for k in sorted(chosen)
    ]
    edges: list[Edge] = []
    for key in sorted(k for k in chosen if k in records):
        rec = records[key]
        for need in sorted(set(rec.needs or ())):
            if need not in chosen:
                continue
            source = records.get(need)
            blocking = (
                rec.status == "blocked"
                and source is not None
                and source.status in ("failed", "blocked")
            )
            edges.append(Edge(need, key, blocking))
    edges.sort(key=lambda e: (e.source, e.target))
    return Graph(nodes, edges)


def _around(records: dict[str, TaskState], keys: Sequence[str]) -> set[str]:
    """`keys`, everything they need and everything that needs them."""
    needed_by: dict[str, list[str]] = {}
    for rec in records.values():
        for need in rec.needs or ():
            needed_by.setdefault(need, []).append(rec.key)

    def walk(step: Callable[[str], Iterable[str]]) -> set[str]:
        seen = set(keys)
        stack = list(keys)
        while stack:
            for nxt in step(stack.pop()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    up = walk(lambda k: (records[k].needs or ()) if k in records else ())
    down = walk(lambda k: needed_by.get(k, ()))
    return up | down
