"""The graph as a Mermaid `flowchart` (GitHub and GitLab render it in Markdown).

Node ids are generated (`n0`, `n1`…), one per key; the key only appears
inside a quoted label, as every view shows it (a control or format character
as its escape: `\x1b`, `\n`, `\u202e`, never a line break or an override),
where every character but a few plain ones is a numeric entity (`#34;` for
`"`), so no key can close the label, start an edge or inject markup (`<` is
`#60;`), nor be drawn as a Font Awesome icon: Mermaid draws `fa:fa-bomb`
(and `fab:`, `fas:`…) anywhere in a label as one, so `:` is `#58;` too.
"""

from __future__ import annotations

from ledger_cli.cli.graph.model import BLOCKING_COLOUR, MISSING, STATUS_COLOURS, Graph

PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,/+@=-")


def label(text: str) -> str:
    """`text` as shown (`escaped`), everything outside PLAIN as a Mermaid
    entity code `#N;`: an entity for ESC or LF would draw the character."""
    from ledger_cli.cli.escapes import escaped

    return "".join(c if c in PLAIN else f"#{ord(c)};" for c in escaped(text))


def to_mermaid(g: Graph) -> str:
    """`flowchart LR`: one node per key (label: key, then status), the
    classes colouring them by status, blocking edges thick (`==>`) and red,
    edges from a missing need dotted (`-.->`)."""
    ids = {n.key: f"n{i}" for i, n in enumerate(g.nodes)}
    lines = ["flowchart LR"]
    for n in g.nodes:
        lines.append(f'  {ids[n.key]}["{label(n.key)}<br/>{label(n.status)}"]')
    missing = {n.key for n in g.nodes if n.missing}
    blocking: list[int] = []
    for i, e in enumerate(g.edges):
        arrow = "==>" if e.blocking else "-.->" if e.source in missing else "-->"
        if e.blocking:
            blocking.append(i)
        lines.append(f"  {ids[e.source]} {arrow} {ids[e.target]}")
    for status, colour in STATUS_COLOURS.items():
        extra = ",stroke-dasharray:4 3" if status == MISSING else ""
        stroke = BLOCKING_COLOUR if status == "failed" else "#333333"
        lines.append(f"  classDef {status} fill:{colour},stroke:{stroke}{extra}")
    by_status: dict[str, list[str]] = {}
    for n in g.nodes:
        cls = n.status if n.status in STATUS_COLOURS else "pending"
        by_status.setdefault(cls, []).append(ids[n.key])
    for status, members in by_status.items():
        lines.append(f"  class {','.join(members)} {status}")
    if blocking:
        lines.append(
            f"  linkStyle {','.join(map(str, blocking))}"
            f" stroke:{BLOCKING_COLOUR},stroke-width:3px,stroke-dasharray:6 3"
        )
    return "\n".join(lines) + "\n"
