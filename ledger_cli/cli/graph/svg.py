"""The graph as a standalone SVG document, drawn without Graphviz.

Every colour is an attribute (no `<style>`, no script), so a page with a
strict Content-Security-Policy can embed it; every key is XML-escaped text.
Node groups carry `class="node status-STATUS"` and `data-key="KEY"`, edges
`data-from` and `data-to`: the key's `identifier`, one per key (an ESC is
`\\x1b`, the four characters `\\x1b` are `\\\\x1b`), as DOT's node IDs.
"""

from __future__ import annotations

from xml.sax import saxutils

from ledger_cli.cli.escapes import escaped, identifier
from ledger_cli.cli.graph import layout
from ledger_cli.cli.graph.model import BLOCKING_COLOUR, EDGE_COLOUR, Graph, fill

MAX_NODES = 2000
"""Above this the picture is not drawn (`TooLargeError`): use `--format dot`."""


class TooLargeError(ValueError):
    """The graph has more than MAX_NODES nodes."""


def escape(text: str) -> str:
    """A key (or status) as drawn: each control, format character or
    noncharacter as its escape (`\\x1b`, `\\ufffe`: `escaped`), as the
    terminal views show it: XML 1.0 holds no ESC or other control at all (nor
    a lone surrogate, U+FFFE or U+FFFF), and a key a Go service stored may
    carry one."""
    return saxutils.escape(escaped(text))


def key_attr(key: str) -> str:
    """A key as a quoted XML attribute value, one per key (`identifier`: the
    drawn text, `escape`'s, is the same for an ESC and the text `\\x1b`)."""
    return saxutils.quoteattr(identifier(key))


def _num(v: float) -> str:
    return f"{v:.1f}".removesuffix(".0")


def to_svg(g: Graph) -> str:
    """The picture: needs on the left, what needs them to the right; a
    failure's blocking edges red and dashed; a missing need dashed."""
    if len(g.nodes) > MAX_NODES:
        raise TooLargeError(
            f"ledger: the graph has {len(g.nodes)} nodes; svg draws at most {MAX_NODES}"
            " (use --format dot, or name KEYs to draw part of it)"
        )
    keys = [n.key for n in g.nodes]
    labels = {k: layout.label(k) for k in keys}
    placed = layout.arrange(keys, [(e.source, e.target) for e in g.edges])
    w, h = _num(placed.width), _num(placed.height)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}"'
        f' viewBox="0 0 {w} {h}" role="img" aria-label="ledger graph">',
        "<defs>",
        _marker("arrow", EDGE_COLOUR),
        _marker("arrow-blocking", BLOCKING_COLOUR),
        "</defs>",
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        '<g class="edges">',
    ]
    for e in g.edges:
        a, b = placed.boxes[e.source], placed.boxes[e.target]
        x1, y1 = a.x + a.width, a.y + a.height / 2
        x2, y2 = b.x, b.y + b.height / 2
        if x2 <= x1:  # an edge of a cycle runs back: loop round the right-hand side
            x2 = b.x + b.width
            bend = layout.H_GAP / 2 + abs(x1 - x2) / 4
            d = f"M{_num(x1)},{_num(y1)} " + _curve(x1, y1, x1 + bend, x2 + bend, x2, y2)
        else:  # through the lane kept in each layer it crosses, if any
            parts = [f"M{_num(x1)},{_num(y1)}"]
            for enter, leave, y in placed.routes.get((e.source, e.target), ()):
                mid = (x1 + enter) / 2
                parts.append(_curve(x1, y1, mid, mid, enter, y))
                parts.append(f"L{_num(leave)},{_num(y)}")
                x1, y1 = leave, y
            mid = (x1 + x2) / 2
            parts.append(_curve(x1, y1, mid, mid, x2, y2))
            d = " ".join(parts)
        if e.blocking:
            style = (
                f'stroke="{BLOCKING_COLOUR}" stroke-width="2.5" stroke-dasharray="6 3"'
                ' marker-end="url(#arrow-blocking)"'
            )
        else:
            style = f'stroke="{EDGE_COLOUR}" stroke-width="1.2" marker-end="url(#arrow)"'
        cls = "edge blocking" if e.blocking else "edge"
        out.append(
            f'<path class="{cls}" data-from={key_attr(e.source)} data-to={key_attr(e.target)}'
            f' d="{d}" fill="none" {style}/>'
        )
    out.append("</g>")
    out.append('<g class="nodes">')
    for n in g.nodes:
        box = placed.boxes[n.key]
        dash = ' stroke-dasharray="4 3"' if n.missing else ""
        stroke = BLOCKING_COLOUR if n.status == "failed" else "#333333"
        cx = _num(box.x + box.width / 2)
        out.append(
            f'<g class="node status-{escape(n.status)}" data-key={key_attr(n.key)}>'
            f"<title>{escape(n.key)} ({escape(n.status)})</title>"
            f'<rect x="{_num(box.x)}" y="{_num(box.y)}" width="{_num(box.width)}"'
            f' height="{_num(box.height)}" rx="6" fill="{fill(n.status)}" stroke="{stroke}"{dash}/>'
            f'<text x="{cx}" y="{_num(box.y + 17)}" text-anchor="middle"'
            f' font-family="monospace" font-size="12" fill="#111111">{escape(labels[n.key])}</text>'
            f'<text x="{cx}" y="{_num(box.y + 32)}" text-anchor="middle"'
            f' font-family="monospace" font-size="10" fill="#444444">{escape(n.status)}</text>'
            "</g>"
        )
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _curve(x1: float, y1: float, c1: float, c2: float, x2: float, y2: float) -> str:
    """A cubic curve on to (x2, y2) from the current point (x1, y1), leaving
    and arriving level (control points at x c1 and c2)."""
    return f"C{_num(c1)},{_num(y1)} {_num(c2)},{_num(y2)} {_num(x2)},{_num(y2)}"


def _marker(ident: str, colour: str) -> str:
    return (
        f'<marker id="{ident}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9"'
        f' markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
    )
