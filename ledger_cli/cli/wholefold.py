"""Keys and names folded over lines whole (docs/design.md §6.6): never cut
with `…`, never broken inside an escape.

rich cuts a cell to `…` (a table's default) or folds it at any cell, so two
long keys that differ at their end looked the same in `state`, and a key
folded in `list` could show `👧\\u20` on one line and `0d👦` on the next. A
`Folded` text is drawn at the width it is given: between words where a word
fits on a line, else between the pieces a key is shown as (a character with
its combining marks, or one escape of render.safe: `\\x1b`, `\\u200d`,
`\\U000e0001`, `\\n`). Only a piece wider than the whole line (an escape in
a column under ten cells) is folded inside.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

_PIECE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[ntr])|.", re.DOTALL)
"""One escape as escapes.escaped writes it (`ascii()`'s forms), or one character."""

_WORD = re.compile(r"\s*\S+\s*")
"""A word with the spaces after it (and, first on a line, before it), as rich splits."""


def pieces(text: str) -> list[str]:
    """`text` cut where a line may break inside a word: each escape whole,
    each character with the marks of no width that follow it."""
    out: list[str] = []
    for match in _PIECE.finditer(text):
        piece = match.group()
        if out and cell_len(piece) == 0:
            out[-1] += piece
        else:
            out.append(piece)
    return out


def line_starts(line: str, width: int) -> list[int]:
    """The offsets in `line` (no newline) where each of its lines after the
    first begins, folded at `width` cells."""
    starts: list[int] = []
    used = 0  # cells on the current line
    for match in _WORD.finditer(line):
        word = match.group()
        body = cell_len(word.rstrip())
        if used and used + body > width:  # the word on a line of its own
            starts.append(match.start())
            used = 0
        if used + body <= width:
            used += cell_len(word)
            continue
        at = match.start()  # wider than a line: folded between its pieces
        for piece in pieces(word):
            cells = cell_len(piece)
            if used and used + cells > width and not piece.isspace():
                starts.append(at)
                used = 0
            used += cells
            at += len(piece)
    return starts


def fold(text: Text, width: int) -> Text:
    """`text` with a newline wherever it is folded at `width` cells (its
    styles kept; each line's trailing spaces dropped)."""
    lines: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        for part in line.divide(line_starts(line.plain, max(width, 1))):
            part.rstrip()
            lines.append(part)
    folded = Text("\n").join(lines)
    folded.overflow = "fold"  # a piece wider than the line (only): cut inside, never `…`
    folded.no_wrap = False
    return folded


class Folded:
    """`text` (render.safe's) drawn folded whole at the width it is given:
    as a table's cell, a tree's label, a value in `state`'s panel."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield fold(self.text, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        most = max(cell_len(line) for line in plain.split("\n"))
        least = max((cell_len(p) for p in pieces(plain) if not p.isspace()), default=0)
        return Measurement(min(least, most), most).with_maximum(options.max_width)


class KeyPanel:
    """`state`'s panel: the key as its title when the title fits the width
    it is drawn at (rich would cut a wider title without a mark), else as
    its first row, `key`, folded whole like every other value."""

    def __init__(self, key: Text, rows: list[tuple[str, RenderableType]]) -> None:
        self.key = key
        self.rows = rows

    def panel(self, width: int) -> Panel:
        titled = self.key.cell_len + TITLE_FRAME <= width
        rows = self.rows if titled else [("key", Folded(self.key)), *self.rows]
        labels = max(len(name) for name, _ in rows)
        if width - PANEL_FRAME - labels - LABEL_GAP >= NARROWEST_VALUE:
            grid = Table.grid(padding=(0, LABEL_GAP))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column()
            for name, value in rows:
                grid.add_row(name, value)
        else:  # too narrow for a column of labels: each label over its value
            grid = Table.grid()
            grid.add_column()
            for name, value in rows:
                grid.add_row(Text(name, style="bold"))
                grid.add_row(Padding(value, (0, 0, 0, LABEL_GAP)))
        return Panel(grid, title=self.key if titled else None, title_align="left", expand=False)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.panel(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.panel(options.max_width))


TITLE_FRAME = 6
"""The cells a panel's title takes besides its text: the corner and the rule
before it, a blank each side, the rule and the corner after it."""

PANEL_FRAME = 4
"""The cells a panel takes besides its content: a border and a blank each side."""

LABEL_GAP = 2
"""The cells between a label and its value (or before a value under its label)."""

NARROWEST_VALUE = 20
"""The narrowest column of values beside the labels: a narrower window puts
each value under its label instead, so a key is not folded a few cells a line."""
