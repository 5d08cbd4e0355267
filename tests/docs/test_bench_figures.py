"""`bench_queue.py --write-docs` writes its table into docs/performance.md, between
the markers there, leaving the rest of the page as written."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from benchmarks.docs_figures import PAGE, replace_figures
from tests.cli_support import ROOT


def _bench_queue() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_queue", ROOT / "benchmarks" / "bench_queue.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_has_the_markers_bench_queue_writes_between() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert replace_figures(text, "bench_queue", "X\n").count("X\n") == 1


def test_figures_replace_only_what_is_between_the_markers() -> None:
    page = "intro\n<!-- q figures -->\nold\n<!-- /q figures -->\noutro\n"
    assert replace_figures(page, "q", "new\n") == (
        "intro\n<!-- q figures -->\nnew\n<!-- /q figures -->\noutro\n"
    )
    with pytest.raises(ValueError, match="markers"):
        replace_figures("no markers\n", "q", "new")


def test_bench_queue_renders_its_results_as_a_markdown_table() -> None:
    results = {
        "json": {"claim base (s)": 0.031, "list rows/s": 12584.0},
        "postgresql": {"claim base (s)": 0.141},
    }
    table = _bench_queue().markdown(results, "bench_queue.py --quick")
    assert table.splitlines() == [
        "| `bench_queue.py --quick` | JSON | PostgreSQL |",
        "|---|---|---|",
        "| claim base (s) | 0.031 | 0.141 |",
        "| list rows/s | 12,584 |  |",
    ]
