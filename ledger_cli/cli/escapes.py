"""Untrusted text shown with its non-printable characters as escapes: the
terminal views (render.safe), the plain lines (output.shown, imported only
when a line needs it) and the graph's SVG (graph/svg.py) draw keys, payloads
and output through it (docs/design.md §5.3)."""

from __future__ import annotations


def escaped(text: str, keep: str = "", *, surrogates: bool = False) -> str:
    """`text` with each character that is not printable (a control, ESC, a
    bidirectional override, another format character) as its escape
    (`\\x1b`, `\\u202e`), but those in `keep` and, with `surrogates`, lone
    surrogates (bytes that were not UTF-8, left to the output)."""
    if text.isprintable():
        return text
    return "".join(
        ch
        if ch.isprintable() or ch in keep or (surrogates and "\ud800" <= ch <= "\udfff")
        else ascii(ch)[1:-1]
        for ch in text
    )
