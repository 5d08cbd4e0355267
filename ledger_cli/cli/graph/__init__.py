"""`ledger graph`: the graph of needs, drawn for Graphviz, Mermaid or as SVG.

- model.py: `collect(store, keys) -> Graph` (nodes, edges, `--json` shape);
- dot.py: `to_dot(graph)`, Graphviz DOT text;
- mermaid.py: `to_mermaid(graph)`, a Mermaid `flowchart`;
- layout.py: the layered layout `svg.py` draws (no Graphviz needed);
- svg.py: `to_svg(graph)`, a standalone SVG document (also `ledger serve`'s picture).
"""
