"""`ledger graph`'s DOT read back by Graphviz: a key that looks like an HTML
entity or a DOT escape is drawn as stored, never decoded."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli.test_graph import need_dot
from tests.cli_support import run_ledger

SVG = "{http://www.w3.org/2000/svg}"
ENTITIES = ["a&amp;b", "x&#65;y", "r&#8238;l", "h&#x41;", "lone&", "&lt;b&gt;"]
BACKSLASHES = ["p\\N\\l", "g\\G\\E\\T\\H\\L", "trail\\", "n\\n\\r"]
PLAIN_FIELD = re.compile(r'"((?:[^"\\]|\\.)*)"|(\S+)')
PLAIN_ESCAPE = re.compile(r"\\(.)")


def unquote(field: str) -> str:
    """A `dot -Tplain` quoted field as text: `\\n` a line break, `\\X` X."""
    return PLAIN_ESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], field)


def render(text: str, fmt: str) -> str:
    done = subprocess.run(
        [need_dot(), f"-T{fmt}"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


@pytest.fixture
def dot_text(tmp_path: Path) -> str:
    store = tmp_path / "store"
    keys = ENTITIES + BACKSLASHES
    for i, key in enumerate(keys):
        needs = ["--needs", keys[i - 1]] if i else []
        done = run_ledger(store, "admit", key, *needs)
        assert done.returncode == 0, done.stderr
    done = run_ledger(store, "graph")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_plain_labels_show_each_key_as_stored(dot_text: str) -> None:
    labels = {}
    for line in render(dot_text, "plain").splitlines():
        if line.startswith("node "):
            fields = [m[2] if m[1] is None else m[1] for m in PLAIN_FIELD.finditer(line)]
            labels[unquote(fields[1])] = unquote(fields[6])
    shown = sorted(label.split("\n")[0] for label in labels.values())
    assert shown == sorted(ENTITIES + BACKSLASHES)
    assert all(label.endswith(("\npending", "\nblocked")) for label in labels.values())


def test_svg_texts_and_entity_titles_show_each_key_as_stored(dot_text: str) -> None:
    root = ET.fromstring(render(dot_text, "svg"))
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert set(ENTITIES + BACKSLASHES) <= texts
    titles = {t.text for t in root.iter(f"{SVG}title")}
    assert set(ENTITIES) <= titles  # a hover tooltip: no entity decoded either


def test_keys_a_go_service_stored_with_controls_stay_distinct_and_valid(tmp_path: Path) -> None:
    """Keys the command line refuses but a Go service may store (ESC, CR, LF):
    each is its own node in the DOT (CR and LF were both `\\n`, one node), no
    control reaches Graphviz's SVG or ours (XML 1.0 holds none of them)."""
    import contextlib

    from tests.go_support import go_db, go_row

    db = tmp_path / "go.db"
    keys = ["a\x1bb", "k\rx", "k\nx", "kx"]
    with contextlib.closing(go_db(db)) as conn:
        for key in keys:
            go_row(conn, key=key, status="pending")
        conn.commit()
    store = f"sqlite:///{db}"
    dot = run_ledger(store, "graph")
    assert dot.returncode == 0, dot.stderr
    nodes = [line for line in render(dot.stdout, "plain").splitlines() if line.startswith("node ")]
    assert len(nodes) == len(keys)
    ET.fromstring(render(dot.stdout, "svg"))  # well-formed
    ours = run_ledger(store, "graph", "--format", "svg")
    assert ours.returncode == 0, ours.stderr
    root = ET.fromstring(ours.stdout)
    assert "a\\x1bb" in {t.text for t in root.iter(f"{SVG}text")}
