"""A small layered layout (Sugiyama-style) for the SVG picture.

1. Break cycles: the edges a depth-first search finds going back are ignored.
2. Layer by longest path: a node sits one layer right of its deepest need.
3. Order each layer by the barycentre of its neighbours in the layer before
   (then after), a few sweeps down and up, to reduce crossings.
4. Place: layers are columns as wide as their widest label, nodes are stacked
   in their order with a fixed gap, so boxes never overlap; a wide graph just
   gets a taller or wider canvas.
"""

from __future__ import annotations

from dataclasses import dataclass

SWEEPS = 4
"""Barycentre sweeps (down then up) over the layers."""
CHAR_WIDTH = 7.2
"""Advance of one character of the 12px monospace font."""
LABEL_CHARS = 40
"""Longer keys are cut (with …) in the box; the full key is in its tooltip."""
NODE_HEIGHT = 40.0
PAD_X = 10.0
V_GAP = 14.0
H_GAP = 60.0
MARGIN = 20.0


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Layout:
    boxes: dict[str, Box]
    width: float
    height: float


def label(key: str) -> str:
    """The key as shown in its box: at most LABEL_CHARS characters."""
    return key if len(key) <= LABEL_CHARS else key[: LABEL_CHARS - 1] + "…"


def box_width(text: str) -> float:
    return max(len(text), 9) * CHAR_WIDTH + 2 * PAD_X


def layers(nodes: list[str], edges: list[tuple[str, str]]) -> list[list[str]]:
    """The nodes by layer (longest path from a source), each layer ordered to
    reduce crossings. `edges` run from a need to what needs it."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        if a != b:
            succ[a].append(b)
    dag = _acyclic(nodes, succ)
    pred: dict[str, list[str]] = {n: [] for n in nodes}
    for a, outs in dag.items():
        for b in outs:
            pred[b].append(a)
    rank: dict[str, int] = {}
    for n in _topological(nodes, dag, pred):
        rank[n] = max((rank[p] + 1 for p in pred[n]), default=0)
    out: list[list[str]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for n in nodes:
        out[rank[n]].append(n)
    _sweep(out, dag, pred)
    return out


def place(ordered: list[list[str]], labels: dict[str, str]) -> Layout:
    """Boxes for the layered nodes: column by layer, stacked in layer order,
    each layer centred vertically on the tallest."""
    tallest = max((len(layer) for layer in ordered), default=0)
    full = tallest * NODE_HEIGHT + max(tallest - 1, 0) * V_GAP
    boxes: dict[str, Box] = {}
    x = MARGIN
    for layer in ordered:
        width = max((box_width(labels[n]) for n in layer), default=0.0)
        used = len(layer) * NODE_HEIGHT + max(len(layer) - 1, 0) * V_GAP
        y = MARGIN + (full - used) / 2
        for n in layer:
            boxes[n] = Box(x, y, width, NODE_HEIGHT)
            y += NODE_HEIGHT + V_GAP
        x += width + H_GAP
    width = max(x - H_GAP + MARGIN, 2 * MARGIN)
    return Layout(boxes, width, full + 2 * MARGIN)


def _acyclic(nodes: list[str], succ: dict[str, list[str]]) -> dict[str, list[str]]:
    """`succ` without the back edges of an iterative depth-first search."""
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(nodes, white)
    dag: dict[str, list[str]] = {n: [] for n in nodes}
    for root in nodes:
        if colour[root] != white:
            continue
        colour[root] = grey
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            n, i = stack[-1]
            if i == len(succ[n]):
                colour[n] = black
                stack.pop()
                continue
            stack[-1] = (n, i + 1)
            m = succ[n][i]
            if colour[m] == grey:
                continue  # a back edge closes a cycle: leave it out of the layering
            dag[n].append(m)
            if colour[m] == white:
                colour[m] = grey
                stack.append((m, 0))
    return dag


def _topological(
    nodes: list[str], dag: dict[str, list[str]], pred: dict[str, list[str]]
) -> list[str]:
    waiting = {n: len(pred[n]) for n in nodes}
    ready = [n for n in nodes if waiting[n] == 0]
    order: list[str] = []
    while ready:
        n = ready.pop()
        order.append(n)
        for m in dag[n]:
            waiting[m] -= 1
            if waiting[m] == 0:
                ready.append(m)
    return order


def _sweep(
    ordered: list[list[str]], succ: dict[str, list[str]], pred: dict[str, list[str]]
) -> None:
    """Reorder each layer in place by the mean position of its neighbours in
    the layer swept from (a node without any keeps its place)."""
    pos = {n: i for layer in ordered for i, n in enumerate(layer)}

    def by(layer: list[str], nbrs: dict[str, list[str]]) -> None:
        def centre(n: str) -> float:
            near = nbrs[n]
            return sum(pos[m] for m in near) / len(near) if near else float(pos[n])

        layer.sort(key=centre)  # stable: ties keep their order
        for i, n in enumerate(layer):
            pos[n] = i

    for _ in range(SWEEPS):
        for layer in ordered[1:]:
            by(layer, pred)
        for layer in reversed(ordered[:-1]):
            by(layer, succ)
