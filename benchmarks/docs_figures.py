"""Write a benchmark's latest figures into docs/performance.md, between its markers.

    <!-- NAME figures -->
    …replaced…
    <!-- /NAME figures -->

A benchmark run with `--write-docs` calls `write_figures("NAME", text)`; the rest of the
page (what the figures mean) stays as written.
"""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def replace_figures(page_text: str, name: str, figures: str) -> str:
    start, end = f"<!-- {name} figures -->\n", f"<!-- /{name} figures -->"
    head, sep, rest = page_text.partition(start)
    if not sep or end not in rest:
        raise ValueError(f"no {start.strip()} … {end} markers in the page")
    _, _, tail = rest.partition(end)
    return head + start + figures.rstrip("\n") + "\n" + end + tail


def write_figures(name: str, figures: str, page: Path = PAGE) -> None:
    page.write_text(replace_figures(page.read_text(encoding="utf-8"), name, figures), "utf-8")
    print(f"wrote the {name} figures into {page}")
