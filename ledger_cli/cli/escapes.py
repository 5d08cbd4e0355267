"""Untrusted text shown with its non-printable characters as escapes: the
terminal views (render.safe), the plain lines (output.shown, imported only
when a line needs it) and the graph's labels in every format (graph/svg.py,
graph/layout.py, graph/dot.py, graph/mermaid.py) draw keys, payloads and
output through it (docs/design.md §5.3); `identifier` names a key one to one
(the DOT node IDs, the SVG's `data-key`)."""

from __future__ import annotations

_SHOWN_AS_ESCAPES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Unicode categories drawn as escapes: controls (ESC, CR, LF, TAB, C1),
format characters (bidirectional overrides, zero-width characters), the line
and paragraph separators (U+2028, U+2029, which break a line) and lone
surrogates (which `escaped` draws as U+FFFD); and the 66 noncharacters
(`_noncharacter`: U+FDD0..U+FDEF and the last two of each plane, U+FFFE and
U+FFFF among them, which XML 1.0 cannot hold). Other characters
`str.isprintable` refuses are drawn as they are: space separators (no-break
space, U+3000), private-use and unassigned
characters (an emoji newer than this interpreter's Unicode tables)."""


def _noncharacter(ch: str) -> bool:
    """One of Unicode's noncharacters, never assigned (unlike an unassigned
    character, no newer Unicode draws it): U+FDD0..U+FDEF, U+FFFE, U+FFFF and
    their likes at the end of every plane."""
    code = ord(ch)
    return 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE


def escaped(text: str, keep: str = "", *, surrogates: bool = False) -> str:
    """`text` with each control or format character (ESC, a newline, a
    bidirectional override, a zero-width joiner: `_SHOWN_AS_ESCAPES`) and
    each noncharacter (U+FFFE) as its escape (`\\x1b`, `\\u202e`,
    `\\ufffe`), but those in `keep`. A lone surrogate (a byte that was not
    UTF-8) is U+FFFD, as every view shows it (docs/guide.md), or, with
    `surrogates`, left to the output, which shows it so. Without `keep`,
    what it returns holds only characters XML 1.0 allows."""
    if text.isprintable():
        return text
    from unicodedata import category

    def shown(ch: str) -> str:
        if ch.isprintable() or ch in keep:
            return ch
        if category(ch) not in _SHOWN_AS_ESCAPES and not _noncharacter(ch):
            return ch
        if "\ud800" <= ch <= "\udfff":  # a byte that was not UTF-8
            return ch if surrogates else "\ufffd"
        return ascii(ch)[1:-1]

    return "".join(shown(ch) for ch in text)


def identifier(text: str) -> str:
    """`text` written one to one, so that two keys never share it: each
    backslash doubled, then each character that is not printable as its
    escape with one backslash (`\\x1b`, `\\n`, `\\udcff`): an ESC and the
    four characters `\\x1b` (written `\\\\x1b`) stay apart, as CR and LF
    do. The result is printable, and holds only characters XML 1.0 allows."""
    body = text.replace("\\", "\\\\")
    if body.isprintable():
        return body
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in body)
