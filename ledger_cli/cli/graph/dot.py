"""The graph as Graphviz DOT: `ledger graph | dot -Tsvg > graph.svg`."""

from __future__ import annotations

from ledger_cli.cli.graph.model import BLOCKING_COLOUR, EDGE_COLOUR, Graph, fill


def _dot_text(text: str) -> str:
    """`text` inside a DOT double-quoted string: quotes escaped, backslashes
    doubled (so a key ending in one cannot escape the closing quote, and a
    label shows it once instead of reading `\\N` or `\\l` as an escape),
    and `&` as `&amp;`: Graphviz decodes HTML entities in labels (and its SVG
    keeps an ID's entities as markup), so a key `x&#8238;y` would otherwise
    be drawn as a right-to-left override."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")


def node_id(key: str) -> str:
    """A node's ID, one per key (`dot -Tplain`'s node names, `dot -Tsvg`'s
    titles): the key's `identifier` (every backslash doubled, each character
    that is not printable as its escape with a single backslash, so an ESC,
    `k\\x1b`, and the four characters `\\x1b`, `k\\\\x1b`, stay two nodes,
    as CR and LF do), then its quotes escaped and each `&` as `&amp;`.
    No control reaches Graphviz (it would copy it into its SVG, which XML
    cannot hold)."""
    from ledger_cli.cli.escapes import identifier

    body = identifier(key)  # its backslashes doubled already: `_dot_text`'s other two
    return '"' + body.replace('"', '\\"').replace("&", "&amp;") + '"'


def node_label(key: str, status: str) -> str:
    """A node's label: the key as every view shows it (`escaped`: a control
    or format character as its escape, `\\x1b`, `\\u202e`, a line break as
    `\\n`, drawn as those characters, never as a break or an override),
    then a line break and the status."""
    from ledger_cli.cli.escapes import escaped

    return f'"{_dot_text(escaped(key))}\\n{_dot_text(escaped(status))}"'


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
        label = node_label(n.key, n.status)
        attrs = f'label={label}, fillcolor="{fill(n.status)}", style={style}{colour}'
        lines.append(f"  {node_id(n.key)} [{attrs}];")
    for e in g.edges:
        attrs = (
            f' [color="{BLOCKING_COLOUR}", style="bold,dashed", penwidth=2]' if e.blocking else ""
        )
        lines.append(f"  {node_id(e.source)} -> {node_id(e.target)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"
