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


def go_store(path: Path, keys: list[str]) -> str:
    """A SQLite store a Go service wrote `keys` to (pending): keys the
    command line refuses (ESC, LF, CR)."""
    import contextlib

    from tests.go_support import go_db, go_row

    with contextlib.closing(go_db(path)) as conn:
        for key in keys:
            go_row(conn, key=key, status="pending")
        conn.commit()
    return f"sqlite:///{path}"


def graph_of(store: str, *args: str) -> str:
    done = run_ledger(store, "graph", *args)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


CONTROLS = ["k\x1b", "k\\x1b", "lf\nx", "lf\\nx", "cr\rx", "cr\\rx"]
"""A key holding a control, and one holding the text of its escape."""


def test_a_control_and_the_text_of_its_escape_are_two_nodes(tmp_path: Path) -> None:
    """An ESC and the four characters `\\x1b` were one node (`"k\\\\x1b"`):
    each key is its own node, and each label shows the escape as text (a
    key's LF never breaks its label: only the status is on a line of its own)."""
    store = go_store(tmp_path / "go.db", CONTROLS)
    nodes = {}
    for line in render(graph_of(store), "plain").splitlines():
        if line.startswith("node "):
            fields = [m[2] if m[1] is None else m[1] for m in PLAIN_FIELD.finditer(line)]
            nodes[fields[1]] = unquote(fields[6])
    assert len(nodes) == len(CONTROLS), nodes
    shown = sorted(label.split("\n") for label in nodes.values())
    assert shown == [[text, "pending"] for text in sorted(["k\\x1b", "lf\\nx", "cr\\rx"] * 2)]


def test_mermaid_labels_show_controls_as_escapes(tmp_path: Path) -> None:
    """An entity for ESC, LF or CR would draw the character itself."""
    text = graph_of(go_store(tmp_path / "go.db", CONTROLS), "--format", "mermaid")
    assert not re.search(r"#(27|10|13);", text), text
    nodes = re.findall(r'^  n\d+\["(.*)<br/>pending"\]$', text, re.MULTILINE)
    assert sorted(nodes) == sorted(["k#92;x1b", "lf#92;nx", "cr#92;rx"] * 2)


SPILLED = {"escapes": ["esc\x1b[31mred", "rlo\u202egnp.exe"], "wide": ["日本語のキーの名前"]}


@pytest.mark.parametrize("keys", SPILLED.values(), ids=SPILLED.keys())
def test_svg_boxes_hold_the_text_they_show(tmp_path: Path, keys: list[str]) -> None:
    """A box is as wide as its text as drawn: an ESC is drawn as four
    characters (`\\x1b`), a wide character takes two columns."""
    from unicodedata import east_asian_width

    from ledger_cli.cli.graph import layout

    root = ET.fromstring(graph_of(go_store(tmp_path / "go.db", keys), "--format", "svg"))
    boxes = 0
    for node in root.iter(f"{SVG}g"):
        if "node" not in (node.get("class") or "").split():
            continue
        rect = node.find(f"{SVG}rect")
        text = node.find(f"{SVG}text")
        assert rect is not None and text is not None and text.text
        wide = sum(2 if east_asian_width(c) in "WF" else 1 for c in text.text)
        assert float(rect.get("width", "0")) >= wide * layout.CHAR_WIDTH, text.text
        boxes += 1
    assert boxes == len(keys)


def test_svg_data_keys_are_one_per_key(tmp_path: Path) -> None:
    """`data-key`, `data-from` and `data-to` were the drawn text, where an ESC
    and the four characters `\\x1b` look the same: each key has its own,
    written as DOT's node IDs write it (each backslash of the key doubled)."""
    import contextlib
    import json

    from tests.go_support import go_db, go_row

    store = go_store(tmp_path / "go.db", CONTROLS)
    with contextlib.closing(go_db(tmp_path / "go.db")) as conn:
        go_row(conn, key="after", status="pending", needs=json.dumps(["k\x1b", "k\\x1b"]))
        conn.commit()
    root = ET.fromstring(graph_of(store, "--format", "svg"))
    nodes = [g for g in root.iter(f"{SVG}g") if "node" in (g.get("class") or "").split()]
    ids = ["k\\x1b", "k\\\\x1b", "lf\\nx", "lf\\\\nx", "cr\\rx", "cr\\\\rx", "after"]
    assert sorted(g.get("data-key") or "" for g in nodes) == sorted(ids)
    edges = {(p.get("data-from"), p.get("data-to")) for p in root.iter(f"{SVG}path")}
    assert {("k\\x1b", "after"), ("k\\\\x1b", "after")} <= edges
    # What is drawn is still the key as every view shows it.
    titles = sorted(t.text or "" for g in nodes for t in g.iter(f"{SVG}title"))
    assert titles[-2:] == ["lf\\nx (pending)"] * 2


NONCHARACTERS = ["nc-\ufffe", "nc-\uffff", "nc-\ufdd0", "nc-\U0010fffe"]
"""Keys the command line takes (valid UTF-8, no control) holding Unicode's
noncharacters: U+FFFE and U+FFFF are no characters of XML 1.0."""
XML_CHARS = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*")


def test_svg_of_keys_holding_noncharacters_is_xml(tmp_path: Path) -> None:
    """Drawn raw, U+FFFE made the document unreadable by any XML parser:
    each noncharacter is drawn as its escape (`\\ufffe`), as a control is."""
    store = tmp_path / "store"
    for key in NONCHARACTERS:
        assert run_ledger(store, "admit", key).returncode == 0
    text = graph_of(str(store), "--format", "svg")
    root = ET.fromstring(text)
    assert XML_CHARS.fullmatch(text)
    drawn = {t.text for t in root.iter(f"{SVG}text")}
    assert {"nc-\\ufffe", "nc-\\uffff", "nc-\\ufdd0", "nc-\\U0010fffe"} <= drawn
    assert {g.get("data-key") for g in root.iter(f"{SVG}g")} >= {"nc-\\ufffe", "nc-\\uffff"}


NOT_UTF8 = "sur\udc80<b>"
"""A key whose byte 0x80 is not UTF-8 (a Go service or the library stored it;
the command line refuses it), read back as a lone surrogate."""


def test_a_byte_that_is_not_utf8_is_drawn_as_u_fffd(tmp_path: Path) -> None:
    """Every format drew Python's escape (`sur\\udc80<b>`) where `list` and
    the web view's tables show U+FFFD (docs/guide.md); the graph on the web
    view's `/` too. A DOT node ID and an SVG `data-key` still name the key
    one to one (`identifier`)."""
    from tests.go_support import go_db, go_row
    from tests.web_support import served

    # The key as the Go service writes it (the library refuses it: not Unicode).
    conn = go_db(tmp_path / "x.db")
    with conn:
        go_row(conn, key=NOT_UTF8.encode("utf-8", "surrogateescape"), status="pending")
    conn.close()
    store = f"sqlite:{tmp_path / 'x.db'}"
    assert "sur\ufffd<b>" in run_ledger(store, "list").stdout
    dot = graph_of(store)
    assert 'label="sur\ufffd<b>\\npending"' in dot, dot
    mermaid = graph_of(store, "--format", "mermaid")
    assert '["sur#65533;#60;b#62;<br/>pending"]' in mermaid, mermaid
    svg = graph_of(store, "--format", "svg")
    root = ET.fromstring(svg)
    assert "sur\ufffd<b>" in {t.text for t in root.iter(f"{SVG}text")}
    assert "sur\ufffd<b> (pending)" in {t.text for t in root.iter(f"{SVG}title")}
    with served(store) as web:
        page = web.get("/").text
    assert "sur\ufffd&lt;b&gt;" in page and "sur\\udc80&lt;b&gt; (" not in page
    for text in (dot, mermaid, svg):
        assert "\\udc80" not in text.replace('"sur\\udc80<b>" [', "").replace(
            'data-key="sur\\udc80&lt;b&gt;"', ""
        ), text
