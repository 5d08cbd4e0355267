"""A small layered layout (Sugiyama-style) for the SVG picture.

1. Break cycles: the edges a depth-first search finds going back are left
   out of the layering (they are drawn looping back).
2. Layer by longest path: a node sits one layer right of its deepest need.
3. An edge spanning several layers gets a waypoint in each layer it crosses,
   ordered and spaced like a small node, so it runs in a lane of its own
   instead of through the boxes in between.
4. Order each layer by the barycentre of its neighbours in the layer before
   (then after), a few sweeps down and up, to reduce crossings.
5. Place: layers are columns as wide as their widest label, nodes are stacked
   in their order with a fixed gap, so boxes never overlap; a large graph gets
   a larger canvas rather than smaller text.
"""

from __future__ import annotations

from dataclasses import dataclass
from unicodedata import combining, east_asian_width

from ledger_cli.cli.escapes import escaped

SWEEPS = 4
"""Barycentre sweeps (down then up) over the layers."""
CHAR_WIDTH = 7.2
"""Advance of one character of the 12px monospace font."""
LABEL_CHARS = 40
"""Longer keys are cut (with …) in the box; the full key is in its tooltip."""
NODE_HEIGHT = 40.0
LANE_HEIGHT = 10.0
"""The height a waypoint of a long edge takes in its layer."""
PAD_X = 10.0
V_GAP = 14.0
H_GAP = 60.0
MARGIN = 20.0
MAX_WAYPOINTS = 10_000
"""Lane points of long edges in all, the shortest edges first: each is a node
of the sweeps and a point of the picture, so the rest (spanning the most
layers) are drawn across without lanes, and time and size stay bounded."""


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]
    """Each node's box, by key."""
    routes: dict[tuple[str, str], list[tuple[float, float, float]]]
    """The waypoints of each edge spanning several layers, by (need, task):
    (x entering the layer, x leaving it, y), left to right."""
    width: float
    height: float


def label(key: str) -> str:
    """The key as drawn in its box: as every view shows it (`escaped`: a
    control or format character as its escape, `\\x1b`, `\\u202e`), then cut
    to LABEL_CHARS characters. The box is sized from this text, never from
    the raw key (an ESC is one character, drawn as four)."""
    shown = escaped(key)
    return shown if len(shown) <= LABEL_CHARS else shown[: LABEL_CHARS - 1] + "…"


def columns(text: str) -> int:
    """The advances `text` takes in a monospace font: a wide (East Asian)
    character two, a combining mark none."""
    if text.isascii():
        return len(text)
    return sum(0 if combining(c) else 2 if east_asian_width(c) in ("W", "F") else 1 for c in text)


def box_width(text: str) -> float:
    """The width of the box drawn around `text` (a `label`)."""
    return max(columns(text), 9) * CHAR_WIDTH + 2 * PAD_X


def arrange(keys: list[str], edges: list[tuple[str, str]]) -> Layout:
    """The layout of `keys` with `edges` running from a need to what needs
    it (both endpoints in `keys`)."""
    index = {k: i for i, k in enumerate(keys)}
    n = len(keys)
    succ: list[list[int]] = [[] for _ in range(n)]
    for need, task in edges:
        if need != task:
            succ[index[need]].append(index[task])
    dag = _acyclic(succ)
    pred: list[list[int]] = [[] for _ in range(n)]
    for v, outs in enumerate(dag):
        for m in outs:
            pred[m].append(v)
    rank = [0] * n
    for v in _topological(dag, pred):
        rank[v] = max((rank[p] + 1 for p in pred[v]), default=0)
    # Waypoints: node ids n, n+1, … ; `chains` lists them per long edge.
    chains: dict[tuple[int, int], list[int]] = {}
    lsucc = [list(s) for s in dag]
    lpred = [list(p) for p in pred]
    long = [(a, b) for a in range(n) for b in dag[a] if rank[b] - rank[a] >= 2]
    laned = _within_budget(long, rank)
    for a, b in long:
        if (a, b) not in laned:
            continue
        chain = []
        prev = a
        for r in range(rank[a] + 1, rank[b]):
            w = len(rank)
            rank.append(r)
            lsucc.append([])
            lpred.append([prev])
            lsucc[prev].append(w)
            chain.append(w)
            prev = w
        lsucc[prev].append(b)
        lpred[b].append(prev)
        lsucc[a].remove(b)
        lpred[b].remove(a)
        chains[(a, b)] = chain
    ordered: list[list[int]] = [[] for _ in range(max(rank, default=-1) + 1)]
    for v in range(len(rank)):
        ordered[rank[v]].append(v)
    _sweep(ordered, lsucc, lpred)
    labels = [label(k) for k in keys]
    return _place(ordered, n, labels, keys, chains)


def _within_budget(long: list[tuple[int, int]], rank: list[int]) -> set[tuple[int, int]]:
    """The long edges that get lanes: all when their points fit MAX_WAYPOINTS,
    else the shortest first while they fit."""
    spans = sorted((rank[b] - rank[a] - 1, a, b) for a, b in long)
    budget, laned = MAX_WAYPOINTS, set()
    for points, a, b in spans:
        budget -= points
        if budget < 0:
            break
        laned.add((a, b))
    return laned


def _place(
    ordered: list[list[int]],
    n: int,
    labels: list[str],
    keys: list[str],
    chains: dict[tuple[int, int], list[int]],
) -> Layout:
    """Columns by layer, stacked in layer order, each centred on the tallest."""

    def height(v: int) -> float:
        return NODE_HEIGHT if v < n else LANE_HEIGHT

    def used(layer: list[int]) -> float:
        return sum(height(v) for v in layer) + max(len(layer) - 1, 0) * V_GAP

    full = max((used(layer) for layer in ordered), default=0.0)
    spots: dict[int, Box] = {}
    x = MARGIN
    for layer in ordered:
        width = max((box_width(labels[v]) for v in layer if v < n), default=0.0)
        y = MARGIN + (full - used(layer)) / 2
        for v in layer:
            spots[v] = Box(x, y, width, height(v))
            y += height(v) + V_GAP
        x += width + H_GAP
    routes = {
        (keys[a], keys[b]): [
            (spots[w].x, spots[w].x + spots[w].width, spots[w].y + LANE_HEIGHT / 2) for w in chain
        ]
        for (a, b), chain in chains.items()
    }
    boxes = {keys[v]: spots[v] for v in range(n)}
    return Layout(boxes, routes, max(x - H_GAP + MARGIN, 2 * MARGIN), full + 2 * MARGIN)


def _acyclic(succ: list[list[int]]) -> list[list[int]]:
    """`succ` without the back edges of an iterative depth-first search."""
    white, grey, black = 0, 1, 2
    colour = [white] * len(succ)
    dag: list[list[int]] = [[] for _ in succ]
    for root in range(len(succ)):
        if colour[root] != white:
            continue
        colour[root] = grey
        stack: list[tuple[int, int]] = [(root, 0)]
        while stack:
            v, i = stack[-1]
            if i == len(succ[v]):
                colour[v] = black
                stack.pop()
                continue
            stack[-1] = (v, i + 1)
            m = succ[v][i]
            if colour[m] == grey:
                continue  # a back edge closes a cycle: leave it out of the layering
            dag[v].append(m)
            if colour[m] == white:
                colour[m] = grey
                stack.append((m, 0))
    return dag


def _topological(dag: list[list[int]], pred: list[list[int]]) -> list[int]:
    waiting = [len(p) for p in pred]
    ready = [v for v in range(len(dag)) if waiting[v] == 0]
    order: list[int] = []
    while ready:
        v = ready.pop()
        order.append(v)
        for m in dag[v]:
            waiting[m] -= 1
            if waiting[m] == 0:
                ready.append(m)
    return order


def _sweep(ordered: list[list[int]], succ: list[list[int]], pred: list[list[int]]) -> None:
    """Reorder each layer in place by the mean position of its neighbours in
    the layer swept from (a node without any keeps its place)."""
    pos = {v: i for layer in ordered for i, v in enumerate(layer)}

    def by(layer: list[int], nbrs: list[list[int]]) -> None:
        def centre(v: int) -> float:
            near = nbrs[v]
            return sum(pos[m] for m in near) / len(near) if near else float(pos[v])

        layer.sort(key=centre)  # stable: ties keep their order
        for i, v in enumerate(layer):
            pos[v] = i

    for _ in range(SWEEPS):
        for layer in ordered[1:]:
            by(layer, pred)
        for layer in reversed(ordered[:-1]):
            by(layer, succ)
