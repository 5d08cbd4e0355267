"""The README's pictures (docs/img/*.svg) are what the commands draw today.

They are regenerated from the deterministic demo store (docs/make_pictures.py)
and compared byte for byte; a stale picture fails with the command that
rewrites it. rich's SVG differs between rich versions, so the comparison is
made with the rich version the pictures were drawn with (docs/img/pictures.json).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from types import ModuleType

import pytest

from tests.cli_support import ROOT

IMG = ROOT / "docs" / "img"


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_pictures", ROOT / "docs" / "make_pictures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pictures_are_current() -> None:
    drawn_with = json.loads((IMG / "pictures.json").read_text())["rich"]
    installed = importlib.metadata.version("rich")
    if drawn_with != installed:
        pytest.skip(f"pictures drawn with rich {drawn_with}, rich {installed} is installed")
    fresh = _maker().render_all()
    assert set(fresh) == {"list.svg", "tree.svg", "state.svg", "pictures.json"}
    stale = [name for name, text in fresh.items() if (IMG / name).read_text() != text]
    assert not stale, f"stale: {stale}; run `.venv/bin/python docs/make_pictures.py`"
    for name in ("list.svg", "tree.svg", "state.svg"):
        text = fresh[name]
        assert text.startswith("<svg") and "integration" in text  # the demo's failure is shown
    readme = (ROOT / "README.md").read_text()
    for name in ("list.svg", "tree.svg", "state.svg"):
        assert f"docs/img/{name}" in readme


def test_web_pictures_are_current() -> None:
    """docs/img/web-*.svg: the web view's pages as its page code renders them
    today (no rich involved), well-formed SVG, shown in the README."""
    import xml.etree.ElementTree as ET

    fresh = _maker().render_web()
    assert set(fresh) == {"web-tasks.svg", "web-task.svg"}
    stale = [name for name, text in fresh.items() if (IMG / name).read_text() != text]
    assert not stale, f"stale: {stale}; run `.venv/bin/python docs/make_pictures.py`"
    for text in fresh.values():
        root = ET.fromstring(text)  # the page markup is well-formed XML inside the SVG
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert 'class="status-failed">failed<' in text  # the demo's failure is shown
        assert "<script" not in text
    readme = (ROOT / "README.md").read_text()
    for name in fresh:
        assert f"docs/img/{name}" in readme


def test_graph_picture_is_current() -> None:
    """docs/img/graph.svg: `ledger graph --format svg` of the demo store, the
    failure red, shown in the README."""
    import xml.etree.ElementTree as ET

    fresh = _maker().render_graph()
    assert set(fresh) == {"graph.svg"}
    assert (IMG / "graph.svg").read_text() == fresh["graph.svg"], (
        "stale: run `.venv/bin/python docs/make_pictures.py`"
    )
    root = ET.fromstring(fresh["graph.svg"])
    nodes = root.iter("{http://www.w3.org/2000/svg}g")
    failed = [g for g in nodes if "status-failed" in g.get("class", "").split()]
    assert [g.get("data-key") for g in failed] == ["integration-tests"]
    assert "docs/img/graph.svg" in (ROOT / "README.md").read_text()
