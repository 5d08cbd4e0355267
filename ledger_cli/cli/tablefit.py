"""`list`'s (and `watch`'s) table fitted to the window it is drawn in
(docs/design.md §6.6): each column is given a width of its own, and the
columns a narrow window cannot hold are left out, least needed first, so
the key always shows, folded over lines, and no column is cut to `…`.

rich alone would squeeze every column at once: on a 20-column terminal the
key became a lone `…` and the headers were stacked a letter a line. The
widths are chosen when the table is drawn, from the console's width, so the
same renderable fits `list` on a terminal, `watch` as its window is resized,
and a pipe (as wide as the content: nothing is left out).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ledger_cli.cli.wholefold import Folded

FLOORS: dict[str, int] = {"key": 10, "owner": 8, "blocked by": 8, "needs": 5}
"""The narrowest a column of names (folded) or of needs (cut) is drawn;
content narrower than its floor is drawn as wide as it is. Every other
column is as wide as its widest cell, never cut."""

DROP_ORDER = (
    "needs",
    "not before",
    "prio",
    "fence",
    "blocked by",
    "updated",
    "lease left",
    "owner",
    "seq",
    "status",
)
"""The columns left out, in this order, while the table does not fit (the
key never is: `ledger state KEY` shows the rest)."""

GAP = 2
"""The cells between two columns (a padding and the rule's blank)."""

GIVE_ORDER = ("key", "owner", "blocked by", "needs")
"""Who gets the room left over, up to its widest cell, in this order (after
the key, the headers of several words are put back on one line)."""


class Column:
    __slots__ = ("cells", "header", "justify", "overflow")

    def __init__(self, header: str, justify: str, overflow: str) -> None:
        self.header = header
        self.justify = justify
        self.overflow = overflow
        self.cells: list[Text] = []

    def widest(self) -> int:
        return max((cell.cell_len for cell in self.cells), default=0)

    def cell(self, row: int) -> RenderableType:
        """Its cell in `row`; a name of a folded column folded whole (wholefold.py)."""
        cell = self.cells[row]
        return Folded(cell) if self.overflow == "fold" else cell

    def natural(self) -> int:
        """Its widest cell or header, on one line."""
        return max(self.widest(), len(self.header))

    def floor(self) -> int:
        """The narrowest it is drawn: a header of several words may go over
        lines; a name or a list down to its floor."""
        head = max(len(word) for word in self.header.split())
        least = FLOORS.get(self.header)
        if least is None:
            return max(self.widest(), head)
        return min(self.natural(), max(least, head))


class FittedTable:
    """The rows of `list`'s table, drawn at the width of the console."""

    def __init__(self, columns: Sequence[Column], header_style: str = "bold") -> None:
        self.columns = list(columns)
        self.header_style = header_style

    def add_row(self, *cells: Text) -> None:
        for column, cell in zip(self.columns, cells, strict=True):
            column.cells.append(cell)

    def widths(self, width: int) -> dict[str, int]:
        """The columns shown at `width` cells, each with its width."""
        shown = list(self.columns)
        drops = iter(DROP_ORDER)
        while len(shown) > 1 and _total([c.floor() for c in shown]) > width:
            name = next(drops, None)
            if name is None:
                break
            shown = [c for c in shown if c.header != name]
        widths = {c.header: c.floor() for c in shown}
        room = width - _total(list(widths.values()))
        if room < 0:  # a key alone, wider than the window: as wide as the window
            widths[shown[0].header] = max(1, width)
            return widths
        # The key whole first, then each header of several words on one
        # line, then the other names and the needs.
        extras = [c for c in shown if c.header not in FLOORS]
        order = [c for n in GIVE_ORDER for c in shown if c.header == n]
        for column in [*order[:1], *extras, *order[1:]]:
            more = min(room, column.natural() - widths[column.header])
            widths[column.header] += more
            room -= more
        return widths

    def table(self, width: int) -> Table:
        widths = self.widths(width)
        table = Table(
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 1),
            collapse_padding=True,
            header_style=self.header_style,
        )
        shown = [c for c in self.columns if c.header in widths]
        for column in shown:
            table.add_column(
                column.header,
                justify=column.justify,  # type: ignore[arg-type]
                overflow=column.overflow,  # type: ignore[arg-type]
                width=widths[column.header],
            )
        for i in range(len(shown[0].cells) if shown else 0):
            table.add_row(*(column.cell(i) for column in shown))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        least = self.columns[0].floor() if self.columns else 0
        most = _total([c.natural() for c in self.columns])
        return Measurement(min(least, most), most).with_maximum(options.max_width)


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + GAP * max(len(widths) - 1, 0)
