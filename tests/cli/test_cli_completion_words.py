"""completion_words: bash's words put back together and unquoted, and each
candidate quoted so that bash reads back exactly the candidate (docs/design.md
§6.8). The quoting is checked against bash itself; the words as bash splits
them at COMP_WORDBREAKS are those recorded from bash 5.2 (tests/cli/
test_completion_shells.py types the same lines in a real terminal).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_cli.cli.completion_words import BashLine, bash_line, dequote, quoted, split_raw


@pytest.mark.parametrize(
    ("words", "cword", "line", "expected"),
    [
        # COMP_WORDS as bash 5.2 made them for each line.
        (["ledger", "state", "sp"], 2, "ledger state sp", (["state"], "sp", "", "")),
        (["ledger", "state", "'sp"], 2, "ledger state 'sp", (["state"], "sp", "", "'")),
        (["ledger", "state", 'x"sp a'], 2, 'ledger state x"sp a', (["state"], "xsp a", "x", '"')),
        (["ledger", "state", "'sp a'"], 2, "ledger state 'sp a'", (["state"], "sp a", "", "")),
        (["ledger", "state", "sp\\ a"], 2, "ledger state sp\\ a", (["state"], "sp a", "", "")),
        (["ledger", "state", "col", ":"], 3, "ledger state col:", (["state"], "col:", "col:", "")),
        (["ledger", "state", "col", ":", "o"], 4, None, (["state"], "col:o", "col:", "")),
        (["ledger", "state", "'a:b"], 2, "ledger state 'a:b", (["state"], "a:b", "", "'")),
        (
            ["ledger", "--store", "sqlite", ":", "///x.db", "claim", "t0"],
            6,
            "ledger --store sqlite:///x.db claim t0",
            (["--store", "sqlite:///x.db", "claim"], "t0", "", ""),
        ),
        (
            ["ledger", "--store", "sqlite", ":", "///x.db", "claim", "t0"],
            6,
            None,  # typed by hand, or typer's own script: no COMP_LINE
            (["--store", "sqlite:///x.db", "claim"], "t0", "", ""),
        ),
        (
            ["ledger", "list", "--status", "=", "c"],
            4,
            "ledger list --status=c",
            (["list"], "--status=c", "--status=", ""),
        ),
        (  # spaces around the `:` on the line: three words
            ["ledger", "admit", "a", ":", "b"],
            4,
            "ledger admit a : b",
            (["admit", "a", ":"], "b", "", ""),
        ),
        (["ledger", "state", ""], 2, "ledger state ", (["state"], "", "", "")),
        (["ledger", "state"], 2, None, (["state"], "", "", "")),
    ],
)
def test_bash_words(
    words: list[str], cword: int, line: str | None, expected: tuple[list[str], str, str, str]
) -> None:
    got = bash_line("\n".join(words), cword, line)
    assert (got.args, got.incomplete, got.kept, got.quote) == expected


def test_words_typed_by_hand_are_split_at_whitespace() -> None:
    assert split_raw("ledger state 'sp a' b\\ c \"d e") == [
        "ledger",
        "state",
        "'sp a'",
        "b\\ c",
        '"d e',
    ]
    got = bash_line("ledger --store sqlite : ///tmp/x.db claim t014", 6)
    assert (got.args, got.incomplete) == (["--store", "sqlite:///tmp/x.db", "claim"], "t014")


def test_dequote_marks_the_quote_left_open() -> None:
    assert dequote("'sp a") == ("sp a", 0)
    assert dequote('x"a\\$b') == ("xa$b", 1)
    assert dequote("'a'\\''b'") == ("a'b", -1)
    assert dequote("ab\\") == ("ab", -1)


def test_reply_is_the_rest_of_the_candidate_quoted_for_its_spot() -> None:
    assert BashLine([], "col:o", "col:", "").reply("col:on") == "on"
    assert BashLine([], "sp", "", "").reply("sp ace") == "sp\\ ace"
    assert BashLine([], "sq", "", "'").reply("sq'uote") == "sq'\\''uote"
    assert BashLine([], "ti", "", "'").reply("tick'") == "tick'\\'''"
    assert BashLine([], "do", "", '"').reply("dol$ar") == "dol\\$ar"
    assert BashLine([], "--status=c", "--status=", "").reply("claimed") == "claimed"


def _read_back(words: list[str]) -> list[str]:
    """What bash makes of each word (NUL-separated, one bash for them all)."""
    script = "printf '%s\\0' " + " ".join(words)
    res = subprocess.run(["bash", "-c", script], capture_output=True, check=True, timeout=60)
    return res.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(st.characters(codec="utf-8").filter(str.isprintable), min_size=1, max_size=12),
        min_size=1,
        max_size=20,
    )
)
def test_bash_reads_back_each_candidate_exactly(candidates: list[str]) -> None:
    # As readline inserts it: after the open quote typed, and closed by
    # readline unless the inserted text ends in the quote.
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    for quote in ("", "'", '"'):
        words = []
        for text in candidates:
            out = quoted(text, quote)
            words.append(quote + out + (quote if quote and not out.endswith(quote) else ""))
        assert _read_back(words) == candidates
