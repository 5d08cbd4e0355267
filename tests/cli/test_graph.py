"""`ledger graph`: DOT parsed by Graphviz, Mermaid checked line by line against
the flowchart subset it emits, SVG parsed as XML and its geometry checked, all
through the installed `ledger` in fresh processes."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ledger_cli.cli.graph import layout
from ledger_cli.cli.graph.model import Edge, Graph, Node
from ledger_cli.cli.graph.svg import MAX_NODES, to_svg
from tests.cli_support import run_ledger
from tests.sql_support import fresh_schema, in_ci, postgres_url, require_postgres

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = [
    "trail\\",
    'a"b',
    "<img src=x onerror=alert(1)>",
    "x --> y",
    "back\\slash",
    'q"]; click n0 "x',
]
COLOURS = {
    "completed": "#b7e4c7",
    "failed": "#f4a6a6",
    "blocked": "#fcd29f",
    "claimed": "#a9cdf5",
    "pending": "#f2f2f2",
    "missing": "#ffffff",
}


def admit_batch(store: str | Path, *records: dict[str, object]) -> None:
    lines = "".join(json.dumps(r) + "\n" for r in records)
    done = run_ledger(store, "admit", "--batch", "-", input=lines.encode())
    assert done.returncode == 0, done.stderr


def graph(store: Path, *args: str) -> str:
    done = run_ledger(store, "graph", *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def fill_pipeline(store: str | Path) -> None:
    """fetch (completed) → build (failed) → test → ship (both blocked), lint
    (claimed) → test, ghost (no record) → docs (pending), other alone."""
    admit_batch(
        store,
        {"key": "fetch"},
        {"key": "build", "needs": ["fetch"]},
        {"key": "lint"},
        {"key": "test", "needs": ["build", "lint"]},
        {"key": "ship", "needs": ["test"]},
        {"key": "docs", "needs": ["ghost"]},
        {"key": "other"},
    )
    for key, cmd in (("fetch", "true"), ("build", "false")):
        run_ledger(store, "run", key, "--owner", "w", "--lease", "1m", "--", cmd)
    done = run_ledger(store, "claim", "lint", "--owner", "w", "--lease", "1h")
    assert done.returncode == 0, done.stderr


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    fill_pipeline(store)
    return store


def test_json_nodes_edges_and_blocking(pipeline: Path) -> None:
    doc = json.loads(_json(pipeline))
    status = {n["key"]: n["status"] for n in doc["nodes"]}
    assert status == {
        "fetch": "completed",
        "build": "failed",
        "lint": "claimed",
        "test": "blocked",
        "ship": "blocked",
        "docs": "pending",
        "ghost": "missing",
        "other": "pending",
    }
    edges = {(e["from"], e["to"]): e["blocking"] for e in doc["edges"]}
    assert edges == {
        ("fetch", "build"): False,
        ("build", "test"): True,
        ("lint", "test"): False,
        ("test", "ship"): True,
        ("ghost", "docs"): False,
    }


def _json(store: str | Path, *keys: str) -> str:
    done = run_ledger(store, "--json", "graph", *keys)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_every_store_gives_the_same_graph(kind: str, pipeline: Path, tmp_path: Path) -> None:
    """The graph reads through each store's listing: SQLite and PostgreSQL
    give what the JSON directory store gives for the same history."""
    if kind == "sqlite":
        fill_pipeline(f"sqlite:{tmp_path / 'ledger.db'}")
        assert _json(f"sqlite:{tmp_path / 'ledger.db'}") == _json(pipeline)
        return
    require_postgres()
    with fresh_schema("ledger_graph") as info:
        schema = info.split("search_path=")[1].split()[0].strip("'")
        url = f"{postgres_url()}?options=-csearch_path%3D{schema}"
        fill_pipeline(url)
        assert _json(url) == _json(pipeline)
        assert _json(url, "lint") == _json(pipeline, "lint")


def test_a_pruned_need_keeps_its_status(pipeline: Path) -> None:
    """Prune keeps a record's key and status: the task needing it shows it."""
    done = run_ledger(
        pipeline,
        "--now",
        "2100-01-01T00:00:00Z",
        "prune",
        "--older-than",
        "1d",
        "--status",
        "completed",
    )
    assert done.returncode == 0, done.stderr
    listed = run_ledger(pipeline, "--json", "list")
    assert "fetch" not in {r["Key"] for r in json.loads(listed.stdout)}  # it is pruned
    doc = json.loads(_json(pipeline, "fetch"))
    assert {n["key"]: n["status"] for n in doc["nodes"]}["fetch"] == "completed"
    assert {"from": "fetch", "to": "build", "blocking": False} in doc["edges"]


def test_keys_keep_only_ancestors_and_descendants(pipeline: Path) -> None:
    doc = json.loads(_json(pipeline, "build"))
    assert {n["key"] for n in doc["nodes"]} == {"fetch", "build", "test", "ship"}
    assert {(e["from"], e["to"]) for e in doc["edges"]} == {
        ("fetch", "build"),
        ("build", "test"),
        ("test", "ship"),
    }  # lint → test is not on build's lines
    doc = json.loads(_json(pipeline, "docs", "lint"))
    assert {n["key"] for n in doc["nodes"]} == {"docs", "ghost", "lint", "test", "ship"}


def test_unknown_key_and_bad_format_are_one_line_errors(pipeline: Path) -> None:
    done = run_ledger(pipeline, "graph", "nope")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == "ledger: key has no record: nope\n"
    done = run_ledger(pipeline, "graph", "--format", "png\x1b[2J")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == 'ledger: --format must be dot, mermaid or svg, not "png\\x1b[2J"\n'
    assert "Traceback" not in done.stderr


def test_a_need_never_admitted_is_drawn_with_what_needs_it(pipeline: Path) -> None:
    """`graph ghost` exited 3 ("key has no record") for the need the whole
    graph draws as `missing`: focused on, it is that node and what needs it,
    in every format (docs/design.md §5.3); a key nobody needs still exits 3."""
    doc = json.loads(_json(pipeline, "ghost"))
    assert doc == {
        "nodes": [{"key": "docs", "status": "pending"}, {"key": "ghost", "status": "missing"}],
        "edges": [{"from": "ghost", "to": "docs", "blocking": False}],
    }
    for fmt in ("dot", "mermaid", "svg"):
        done = run_ledger(pipeline, "graph", "ghost", "--format", fmt)
        assert (done.returncode, done.stderr) == (0, ""), (fmt, done.stderr)
        assert "ghost" in done.stdout and "docs" in done.stdout and "missing" in done.stdout
        assert "ship" not in done.stdout
    done = run_ledger(pipeline, "graph", "ghost", "nope")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == "ledger: key has no record: nope\n"


def need_dot() -> str:
    found = shutil.which("dot")
    if found is None:
        if in_ci():
            pytest.fail("Graphviz `dot` is not installed (CI=true: install graphviz)")
        pytest.skip("Graphviz `dot` is not installed")
    return found


def test_dot_parses_with_graphviz(pipeline: Path, tmp_path: Path) -> None:
    dot = need_dot()
    admit_batch(pipeline, *({"key": k, "needs": ["fetch"]} for k in HOSTILE))
    text = graph(pipeline)
    assert text.startswith("digraph ledger {\n")
    drawn = subprocess.run(
        [dot, "-Tsvg"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stderr == ""
    root = ET.fromstring(drawn.stdout)
    shown = {t.text for t in root.iter(f"{SVG}text")}
    for key in HOSTILE:  # each hostile key is one node's label, its text intact
        assert key in shown
    assert '"build" -> "test" [color="#c0392b", style="bold,dashed"' in text
    assert '"fetch" -> "build";' in text
    assert '"ghost" [label="ghost\\nmissing"' in text and "dashed" in text


# -- Mermaid: a strict checker of the flowchart subset `ledger graph` emits ----------

MERMAID_LINE = re.compile(
    r"""
    \ \ n\d+\["[^"\n]*"\]                                        # a node with a quoted label
    | \ \ n\d+\ (-->|-\.->|==>)\ n\d+                             # an edge
    | \ \ classDef\ [a-z]+\ [a-z-]+:[#\w. -]+(,[a-z-]+:[#\w. -]+)*  # a class
    | \ \ class\ n\d+(,n\d+)*\ [a-z]+                              # members of a class
    | \ \ linkStyle\ \d+(,\d+)*\ [a-z-]+:[#\w. -]+(,[a-z-]+:[#\w. -]+)*
    """,
    re.VERBOSE,
)
LABEL_TEXT = re.compile(r"(?:[A-Za-z0-9 _.,:/+@=-]|#\d+;|<br/>)*")


def check_mermaid(text: str) -> dict[str, str]:
    """Every line in the subset; node ids declared once and used only after;
    labels made of plain characters and entity codes. Returns id → label."""
    lines = text.splitlines()
    assert lines[0] in ("flowchart LR", "flowchart TD")
    labels: dict[str, str] = {}
    edges = 0
    for line in lines[1:]:
        assert MERMAID_LINE.fullmatch(line), f"not in the subset: {line!r}"
        node = re.fullmatch(r'  (n\d+)\["(.*)"\]', line)
        if node:
            assert node[1] not in labels
            assert LABEL_TEXT.fullmatch(node[2]), line
            labels[node[1]] = node[2]
            continue
        edge = re.fullmatch(r"  (n\d+) \S+ (n\d+)", line)
        if edge:
            assert edge[1] in labels and edge[2] in labels
            edges += 1
        if line.startswith("  linkStyle"):
            assert all(int(i) < edges for i in line.split()[1].split(","))
    return labels


def unentity(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m[1])), label)


def test_mermaid_is_the_flowchart_subset_and_hostile_keys_stay_labels(pipeline: Path) -> None:
    admit_batch(pipeline, *({"key": k, "needs": ["fetch"]} for k in HOSTILE))
    text = graph(pipeline, "--format", "mermaid")
    labels = check_mermaid(text)
    shown = {unentity(lbl).split("<br/>")[0] for lbl in labels.values()}
    assert set(HOSTILE) <= shown
    assert "<img" not in text and "-->" not in "".join(labels.values())
    ids = {unentity(lbl).split("<br/>")[0]: i for i, lbl in labels.items()}
    assert f"  {ids['build']} ==> {ids['test']}" in text.splitlines()
    assert f"  {ids['ghost']} -.-> {ids['docs']}" in text.splitlines()
    assert f"  {ids['fetch']} --> {ids['build']}" in text.splitlines()
    assert re.search(rf"^  class [n\d,]*\b{ids['build']}\b[n\d,]* failed$", text, re.M)


def test_a_key_like_an_icon_stays_text(tmp_path: Path) -> None:
    """Mermaid draws `fa:fa-NAME` in a label as a Font Awesome icon: its `:`
    is an entity, so the key shows as stored."""
    store = tmp_path / "store"
    admit_batch(store, {"key": "fa:fa-bomb"}, {"key": "x fab:fa-github"})
    text = graph(store, "--format", "mermaid")
    labels = check_mermaid(text)
    assert not re.search(r"fa[bklrs]?:fa-", text), text
    shown = {unentity(lbl).split("<br/>")[0] for lbl in labels.values()}
    assert shown == {"fa:fa-bomb", "x fab:fa-github"}


def test_the_mermaid_checker_rejects_a_break_out() -> None:
    with pytest.raises(AssertionError):
        check_mermaid('flowchart LR\n  n0["a"]\n  n1["x"] --> evil["y"]\n')
    with pytest.raises(AssertionError):
        check_mermaid('flowchart LR\n  n0["<img src=x>"]\n')


# -- SVG ------------------------------------------------------------------------------


def svg_nodes(text: str) -> dict[str, ET.Element]:
    root = ET.fromstring(text)
    assert root.tag == f"{SVG}svg"
    assert not list(root.iter(f"{SVG}style")) and not list(root.iter(f"{SVG}script"))
    out: dict[str, ET.Element] = {}
    for g in root.iter(f"{SVG}g"):
        if "node" in g.get("class", "").split():
            key = g.get("data-key")
            assert key is not None and key not in out
            out[key] = g
    return out


def data_key(key: str) -> str:
    """A printable key's `data-key`: each backslash doubled."""
    return key.replace("\\", "\\\\")


def test_svg_nodes_carry_status_class_colour_and_escaped_keys(pipeline: Path) -> None:
    admit_batch(pipeline, *({"key": k, "needs": ["fetch"]} for k in HOSTILE))
    text = graph(pipeline, "--format", "svg")
    nodes = svg_nodes(text)
    doc = json.loads(_json(pipeline))
    # data-key: the key, each backslash doubled (one per key, as DOT's node IDs)
    assert set(nodes) == {data_key(n["key"]) for n in doc["nodes"]}
    for n in doc["nodes"]:
        g = nodes[data_key(n["key"])]
        assert f"status-{n['status']}" in g.get("class", "").split()
        rect = g.find(f"{SVG}rect")
        assert rect is not None and rect.get("fill") == COLOURS[n["status"]]
    assert nodes["ghost"].find(f"{SVG}rect").get("stroke-dasharray")  # type: ignore[union-attr]
    for key in HOSTILE:  # present only as parsed text, never as markup
        texts = [t.text for t in nodes[data_key(key)].iter(f"{SVG}text")]
        assert texts[0] == key
    assert "<img" not in text
    root = ET.fromstring(text)
    blocking = [p for p in root.iter(f"{SVG}path") if "blocking" in p.get("class", "").split()]
    assert {(p.get("data-from"), p.get("data-to")) for p in blocking} == {
        ("build", "test"),
        ("test", "ship"),
    }
    assert all(p.get("stroke-dasharray") for p in blocking)


def boxes(text: str) -> dict[str, tuple[float, float, float, float]]:
    out = {}
    for key, g in svg_nodes(text).items():
        r = g.find(f"{SVG}rect")
        assert r is not None
        out[key] = tuple(float(r.get(a, "nan")) for a in ("x", "y", "width", "height"))
    return out  # type: ignore[return-value]


def test_svg_at_200_nodes_has_no_overlapping_boxes(tmp_path: Path) -> None:
    """A wide layer (80 tasks need one root), chains, diamonds and long keys."""
    store = tmp_path / "store"
    records: list[dict[str, object]] = [{"key": "root"}]
    records += [{"key": f"wide-{i:03d}", "needs": ["root"]} for i in range(80)]
    records += [
        {"key": f"chain-{i:03d}", "needs": [f"chain-{i - 1:03d}"] if i else ["root"]}
        for i in range(60)
    ]
    records += [
        {"key": f"join-{i:02d}-" + "k" * (i * 3), "needs": [f"wide-{i:03d}", f"chain-{i:03d}"]}
        for i in range(59)
    ]
    assert len(records) == 200
    admit_batch(store, *records)
    text = graph(store, "--format", "svg")
    placed = boxes(text)
    assert len(placed) == 200
    root = ET.fromstring(text)
    width, height = float(root.get("width", "0")), float(root.get("height", "0"))
    for x, y, w, h in placed.values():
        assert x >= 0 and x + w <= width and y >= 0 and y + h <= height
    ordered = sorted(placed.values())
    for i, (x1, y1, w1, h1) in enumerate(ordered):
        for x2, y2, _, h2 in ordered[i + 1 :]:
            if x2 >= x1 + w1:
                break  # sorted by x: nothing further right can touch this one
            assert y2 >= y1 + h1 or y1 >= y2 + h2, "two node boxes overlap"
    lanes = 0
    for path in root.iter(f"{SVG}path"):  # a long edge's lanes run between boxes, not through
        d = path.get("d", "")
        for x0, y0, x1 in re.findall(r"([\d.]+),([\d.]+) L([\d.]+),\2\b", d):
            lanes += 1
            for bx, by, bw, bh in placed.values():
                crosses = float(x0) < bx + bw and bx < float(x1)
                assert not (crosses and by <= float(y0) <= by + bh), (d, (bx, by, bw, bh))
    assert lanes > 0  # the chain-to-join edges span many layers
    for key, g in svg_nodes(text).items():  # a long key is cut in the box, whole in its title
        title = g.find(f"{SVG}title")
        assert title is not None and title.text is not None and title.text.startswith(key)
        (x, _, w, _) = placed[key]
        shown = g.find(f"{SVG}text")
        assert shown is not None and shown.text is not None
        assert len(shown.text) * 7.2 <= w  # the label fits its box at the font's advance


def test_svg_refuses_a_huge_graph_with_one_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    admit_batch(store, *({"key": f"t{i}"} for i in range(MAX_NODES + 1)))
    done = run_ledger(store, "graph", "--format", "svg")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "--format dot" in done.stderr
    assert graph(store).count(" [label=") == MAX_NODES + 1


def test_a_cycle_of_needs_is_drawn_without_overlap() -> None:
    """Admission refuses cycles, but a restored or damaged store may hold one:
    the layout leaves the closing edge out of the layering and draws it."""
    keys = ["a", "b", "c", "d"]
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "d")]
    placed = layout.arrange(keys, edges)
    assert placed.boxes["a"].x < placed.boxes["b"].x < placed.boxes["c"].x < placed.boxes["d"].x
    text = to_svg(Graph([Node(k, "pending") for k in keys], [Edge(a, b, False) for a, b in edges]))
    root = ET.fromstring(text)
    assert len([p for p in root.iter(f"{SVG}path") if "edge" in p.get("class", "")]) == 5


def test_the_web_view_says_when_the_graph_is_too_large_to_draw(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ledger serve`'s `/`: over the cap the page points to `ledger graph`,
    and /api/graph's shape is still there."""
    from ledger_cli.cli.context import Session, Settings
    from ledger_cli.cli.graph import svg
    from ledger_cli.web import pages
    from ledger_cli.web.api import Reader

    with Session(Settings(store=str(pipeline))) as s:
        reader = Reader(s)
        obj, drawn = reader.graph()
        assert drawn is not None and 'data-key="build"' in drawn
        assert obj == json.loads(_json(pipeline))
        monkeypatch.setattr(svg, "MAX_NODES", 3)
        obj, drawn = reader.graph()
    assert drawn is None and len(obj["nodes"]) == 8
    assert "ledger graph | dot -Tsvg" in pages.index(None, drawn)


def test_long_edges_get_lanes_only_within_a_budget() -> None:
    """900 edges across 1,000 layers would be 900,000 lane points (the sweeps'
    nodes, the picture's points: seconds and hundreds of MB); past
    MAX_WAYPOINTS the longest are drawn across, and every box is still placed."""
    from ledger_cli.cli.graph import layout

    chain = [f"c{i:04d}" for i in range(1000)]
    fans = [f"f{i:04d}" for i in range(900)]
    edges = list(itertools.pairwise(chain))
    edges += [(need, f) for f in fans for need in (chain[-1], "root")]
    placed = layout.arrange(["root", *chain, *fans], edges)
    assert sum(len(r) for r in placed.routes.values()) <= layout.MAX_WAYPOINTS
    assert len(placed.boxes) == 1 + len(chain) + len(fans)
    small = layout.arrange(["a", "b", "c"], [("a", "b"), ("b", "c"), ("a", "c")])
    assert [len(r) for r in small.routes.values()] == [1]  # a short detour keeps its lane
