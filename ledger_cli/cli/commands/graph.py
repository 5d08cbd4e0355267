"""`ledger graph [KEY…] [--format dot|mermaid|svg]`: the graph of needs on stdout."""

from __future__ import annotations

from collections.abc import Sequence

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError
from ledger_cli.engine.record import go_quote

FORMATS = ("dot", "mermaid", "svg")


def graph(settings: Settings, keys: Sequence[str] | None = None, fmt: str = "dot") -> int:
    """Print the graph of every task, or of KEYs with their ancestors and
    descendants: DOT (default), Mermaid, SVG, or `--json`."""
    if fmt not in FORMATS:
        raise InputError(f"ledger: --format must be dot, mermaid or svg, not {go_quote(fmt)}")
    keys = keys or ()  # any key a store holds (docs/design.md §5.2): one it does not exits 3
    from ledger_cli.cli.graph import model

    with Session(settings, reads=True) as s:
        g = model.collect(s.store, list(dict.fromkeys(keys)))
    if settings.json:
        output.json_line(g.to_obj())
        return 0
    if fmt == "svg":
        from ledger_cli.cli.graph import svg

        try:
            text = svg.to_svg(g)
        except svg.TooLargeError as exc:
            raise InputError(str(exc)) from None
    elif fmt == "mermaid":
        from ledger_cli.cli.graph.mermaid import to_mermaid

        text = to_mermaid(g)
    else:
        from ledger_cli.cli.graph.dot import to_dot

        text = to_dot(g)
    output.raw(text.removesuffix("\n"))  # each format escapes what it holds
    return 0
