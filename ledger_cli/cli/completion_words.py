"""The words of the line being completed, as the shell hands them over, and each
candidate as the shell must insert it (docs/design.md §6.8; the scripts are in
shell_completion.py, the protocol of each shell in completion_shells.py).

bash gives the words as readline split them: at whitespace and at every
character of COMP_WORDBREAKS, so `--store sqlite:///x.db` arrives as
`--store`, `sqlite`, `:`, `///x.db`. `bash_line` puts the words split at `:`,
`=` and `@` back together, as bash-completion's `_get_comp_words_by_ref -n =:`
does (from COMP_LINE when the script passes it, else by taking such a word to
touch its neighbours), and removes the quoting (`sp\\ a`, `'sp a`, `"dol\\$`).

bash inserts a candidate as it is, in place of the text readline took for the
word (after the last `:`, `=` or `@`; after an opening quote left open), so
`BashLine.reply` gives the rest of the candidate quoted for that spot: with
backslashes (as `printf %q`), or, inside an open quote, as that quote needs,
closed again when the candidate ends in the quote character.
"""

from __future__ import annotations

import dataclasses
import itertools

BREAKS = frozenset(":=@")
"""COMP_WORDBREAKS characters that are not shell syntax: a word split at one is put back."""

_BACKSLASHED = frozenset(" \t\n!\"#$&'()*,;<>?[\\]^`{|}~")
"""What `printf %q` escapes with a backslash (a printable candidate holds no other)."""

_IN_DOUBLE = frozenset('"\\$`')


def split_raw(text: str) -> list[str]:
    """Shell words at unquoted whitespace, each kept as typed (quotes, backslashes)."""
    words: list[str] = []
    word: list[str] = []
    started = False
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if not quote and ch in " \t\n":
            if started:
                words.append("".join(word))
                word, started = [], False
            i += 1
            continue
        started = True
        word.append(ch)
        if ch == "\\" and quote != "'" and i + 1 < len(text):
            word.append(text[i + 1])
            i += 2
            continue
        if not quote and ch in "'\"":
            quote = ch
        elif ch == quote:
            quote = ""
        i += 1
    if started:
        words.append("".join(word))
    return words


def dequote(raw: str) -> tuple[str, int]:
    """The value of a shell word as typed, and where its quote left open
    starts (-1: none). A trailing lone backslash is dropped."""
    out: list[str] = []
    quote, opened = "", -1
    i = 0
    while i < len(raw):
        ch = raw[i]
        if not quote:
            if ch == "\\":
                out.append(raw[i + 1 : i + 2])
                i += 2
                continue
            if ch in "'\"":
                quote, opened = ch, i
            else:
                out.append(ch)
        elif ch == quote:
            quote, opened = "", -1
        elif quote == '"' and ch == "\\" and raw[i + 1 : i + 2] in _IN_DOUBLE | {"\n"}:
            out.append(raw[i + 1 : i + 2])
            i += 2
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out), opened


def value_of(raw: str) -> str:
    return dequote(raw)[0]


def _is_break(word: str) -> bool:
    return bool(word) and set(word) <= BREAKS


def _touching(words: list[str], line: str | None) -> list[bool]:
    """For each word, whether it follows the one before with no whitespace
    between: read off COMP_LINE, or (no line, or one that does not hold the
    words) assumed for every non-empty word."""
    guess = [i > 0 and bool(w) and bool(words[i - 1]) for i, w in enumerate(words)]
    if line is None:
        return guess
    touching: list[bool] = []
    pos = 0
    for i, word in enumerate(words):
        if not word:  # the empty word being completed, after whitespace
            touching.append(False)
            continue
        at = line.find(word, pos)
        if at < 0 or line[pos:at].strip():
            return guess
        touching.append(i > 0 and at == pos)
        pos = at + len(word)
    return touching


@dataclasses.dataclass(frozen=True)
class BashLine:
    args: list[str]
    """The words before the one completed (without the command), unquoted."""
    incomplete: str
    """The word completed, unquoted, up to the cursor's word."""
    kept: str
    """The start of `incomplete` that bash keeps (before the text it replaces)."""
    quote: str
    """The quote the replaced text is in: "", "'" or '"'."""

    def reply(self, candidate: str) -> str:
        """`candidate` as bash must insert it in place of the replaced text."""
        rest = candidate[len(self.kept) :] if candidate.startswith(self.kept) else candidate
        return quoted(rest, self.quote)


def quoted(text: str, quote: str = "") -> str:
    """`text` quoted for bash: with backslashes, or inside the open `quote`.
    Inside a quote, readline adds the closing quote unless the text ends in
    one, so text that does end in one gets it closed here."""
    if quote == "'":
        out = text.replace("'", "'\\''")
    elif quote == '"':
        # `!` leaves the quotes: history expansion does not stop at a backslash inside them.
        out = "".join(
            '"\\!"' if ch == "!" else "\\" + ch if ch in _IN_DOUBLE else ch for ch in text
        )
    else:
        return "".join("\\" + ch if ch in _BACKSLASHED else ch for ch in text)
    return out + quote if out.endswith(quote) else out


def bash_line(comp_words: str, cword: int, comp_line: str | None = None) -> BashLine:
    """The line from COMP_WORDS (the words joined by newlines, as the script
    passes them, or by spaces, as typed by hand), COMP_CWORD and COMP_LINE."""
    words = comp_words.split("\n") if "\n" in comp_words else split_raw(comp_words)
    cword = max(cword, 1)
    words += [""] * (cword + 1 - len(words))
    touching = _touching(words, comp_line)
    starts = [0]  # the index of each reassembled word's first piece
    for i in range(1, cword + 1):
        joined = i >= 2 and touching[i] and (_is_break(words[i]) or _is_break(words[i - 1]))
        if not joined:
            starts.append(i)
    first = starts[-1]
    args = [value_of("".join(words[a:b])) for a, b in itertools.pairwise(starts[1:])]
    current = words[cword]
    if _is_break(current):  # readline's text starts after it: nothing typed yet
        before, fragment = "".join(words[first : cword + 1]), ""
    else:
        before, fragment = "".join(words[first:cword]), current
    kept = value_of(before)
    opened = dequote(fragment)[1]
    quote = ""
    if opened >= 0:  # readline's text starts after the quote left open
        kept += value_of(fragment[:opened])
        quote = fragment[opened]
    return BashLine(args, value_of(before + fragment), kept, quote)
