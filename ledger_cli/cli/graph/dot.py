"""The graph as Graphviz DOT: `ledger graph | dot -Tsvg > graph.svg`."""

from __future__ import annotations

from ledger_cli.cli.graph.model import BLOCKING_COLOUR, EDGE_COLOUR, Graph, fill


def quote(text: str) -> str:
    """A DOT double-quoted string: quotes escaped, backslashes doubled (so a
    key ending in one cannot escape the closing quote, and a label shows it
    once instead of reading `\\N` or `\\l` as an escape), line breaks (never
    in a valid key, but a damaged store is untrusted) as `\\n` and `\\r` (two
    distinct IDs), any other control as its escape, shown (`\\x1b`: Graphviz
    would copy it into its SVG, which XML cannot hold), and `&` as
    `&amp;`: Graphviz decodes HTML entities in labels (and its SVG keeps an
    ID's entities as markup), so a key `x&#8238;y` would otherwise be drawn
    as a right-to-left override. In a node ID (`dot -Tplain`'s node names)
    the doubled backslashes and `&amp;` stay as written, so distinct keys
    keep distinct IDs; in `dot -Tsvg`'s titles `&amp;` reads as `&`."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")
    body = body.replace("\r", "\\r").replace("\n", "\\n")
    if not body.isprintable():  # another control: its escape, shown (`\\x1b`)
        body = "".join(c if c.isprintable() else ascii(c)[1:-1].replace("\\", "\\\\") for c in body)
    return f'"{body}"'


def to_dot(g: Graph) -> str:
    """A `digraph`: needs on the left, what needs them on the right; each node
    labelled with its key and status and filled by status; a failure's
    blocking edges red, bold and dashed; a missing need dashed."""
    lines = [
        "digraph ledger {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=11];',
        f'  edge [color="{EDGE_COLOUR}"];',
    ]
    for n in g.nodes:
        style = '"rounded,filled,dashed"' if n.missing else '"rounded,filled"'
        colour = f', color="{BLOCKING_COLOUR}"' if n.status == "failed" else ""
        label = quote(f"{n.key}\n{n.status}")  # `\n` in a DOT label: a line break
        attrs = f'label={label}, fillcolor="{fill(n.status)}", style={style}{colour}'
        lines.append(f"  {quote(n.key)} [{attrs}];")
    for e in g.edges:
        attrs = (
            f' [color="{BLOCKING_COLOUR}", style="bold,dashed", penwidth=2]' if e.blocking else ""
        )
        lines.append(f"  {quote(e.source)} -> {quote(e.target)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"
