"""The README's pictures: `ledger list`, `ledger tree` and `ledger state` as a
person sees them on a terminal, exported to SVG with rich's `export_svg`.

The store is the demo's pipeline (`ledger demo`), worked through
deterministically: fixed instants (`--now`), fixed actors and owners, so the
pictures change only when the commands' output does. The commands are the
real ones (`ledger_cli.cli.app.run`), drawing on one recording console.

    .venv/bin/python docs/make_pictures.py      # rewrite docs/img/*.svg

The web view's pictures (`web-*.svg`) are its pages as `ledger serve` renders
them, markup and style sheet, inside an SVG foreignObject. `graph.svg` is
`ledger graph --format svg` of the same store.

`tests/docs/test_pictures.py` regenerates them and fails when a file is stale.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMG = HERE / "img"
WIDTH = 132
T0 = "2026-03-02T09:00:00Z"
NOW = "2026-03-02T09:04:10Z"  # what the pictures' clock reads
ACTOR = "ops@build-1"

PICTURES: dict[str, tuple[str, ...]] = {
    "list.svg": ("list",),
    "tree.svg": ("tree",),
    "state.svg": ("state", "integration-tests"),
}
OUTPUT = {
    "integration-tests": "".join(
        [
            "starting postgres 15 on :5433\n",
            "test_signup ... ok\n",
            "test_login ... ok\n",
            "test_checkout ... FAILED\n",
            "\n",
            "FAIL: test_checkout (tests.integration.CheckoutTest)\n",
            '  File "tests/integration/test_checkout.py", line 42, in test_checkout\n',
            "    self.assertEqual(order.total, 1999)\n",
            "AssertionError: 2099 != 1999\n",
            "\n",
            "Ran 3 tests in 61.2s\n",
            "FAILED (failures=1)\n",
        ]
    ),
    "build-docs": "sphinx-build -b html docs/ _build/\nreading sources... [ 40%] guide\n",
}
"""What each command printed, as its attempt kept it."""
MANIFEST = "pictures.json"
"""Records the rich version the pictures were drawn with (SVG output differs
between rich versions; the staleness test compares like with like)."""


def build_store(store: str) -> None:
    """The demo pipeline, worked by three workers in a fixed order: the
    integration tests fail, so everything after them is blocked; the docs are
    still being built (a live lease) when the picture is taken."""
    sys.path.insert(0, str(HERE.parent))
    from ledger_cli.cli.commands.demo import PIPELINE
    from ledger_cli.engine.attempts import Attempt
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.ledger import Ledger
    from ledger_cli.stores import open_store
    from ledger_cli.stores.attemptlog import attempt_log

    t0 = Instant.parse(T0)
    lease = timedelta(minutes=2)
    with open_store(f"json:{store}") as st:
        ledger = Ledger(st)
        for i, (key, needs, seconds, code) in enumerate(PIPELINE):
            task = {"seconds": seconds, "exit": code}
            ledger.admit(ACTOR, key, 1, task, t0 + timedelta(seconds=i), *needs)
        steps = [
            ("fetch-sources", "w1", 10, 40, "completed"),
            ("compile-core", "w1", 45, 100, "completed"),
            ("compile-ui", "w2", 46, 80, "completed"),
            ("unit-tests", "w3", 101, 150, "completed"),
            ("integration-tests", "w2", 102, 190, "failed"),
            ("build-docs", "w3", 200, None, None),
        ]
        runs = attempt_log(st)
        for i, (key, owner, start, end, status) in enumerate(steps):
            fence = ledger.claim(owner, key, owner, lease, t0 + timedelta(seconds=start))
            # What `ledger run` records of the command (docs/design.md §7.1): fixed times and pids.
            att = Attempt(key, fence=fence, owner=owner, host=f"build-{owner[1]}",
                          pid=4100 + i, started=str(t0 + timedelta(seconds=start)))  # fmt: skip
            att.n = runs.start_attempt(att)
            out = OUTPUT.get(key, f"{key}: ok\n").encode()
            att.output_bytes = att.kept_bytes = len(out)
            if end is not None and status is not None:
                att.ended = str(t0 + timedelta(seconds=end))
                att.exit = 0 if status == "completed" else 1
            runs.save_attempt(att, out)
            if end is not None and status is not None:
                ledger.complete(owner, key, owner, fence, status, t0 + timedelta(seconds=end))


@contextlib.contextmanager
def recording() -> Iterator[object]:
    """Every console the commands open is one recording, truecolor console."""
    from rich.console import Console

    from ledger_cli.cli import render

    con = Console(
        record=True,
        width=WIDTH,
        force_terminal=True,
        color_system="truecolor",
        file=io.StringIO(),
        highlight=False,
        legacy_windows=False,
    )
    original = render.console
    render.console = lambda file=None, width=None: con  # type: ignore[assignment]
    try:
        yield con
    finally:
        render.console = original  # type: ignore[assignment]


def render_all() -> dict[str, str]:
    """File name → SVG text, plus the manifest."""
    from rich.console import Console

    from ledger_cli.cli import app

    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "store")
        build_store(store)
        for name, args in PICTURES.items():
            # The store as the guide sets it (LEDGER_STORE), so that no
            # temporary path is drawn (`state` names a --store it was given).
            with recording() as con, _environ(LEDGER_STORE=store):
                assert isinstance(con, Console)
                argv = ["--actor", ACTOR, "--now", NOW, *args]
                code = app.run(argv)
                if code != 0:
                    raise RuntimeError(f"ledger {' '.join(args)} exited {code}")
                out[name] = con.export_svg(title="ledger " + " ".join(args))
    out[MANIFEST] = json.dumps({"rich": importlib.metadata.version("rich")}, indent=2) + "\n"
    return out


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, was in saved.items():
            if was is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = was


WEB_PICTURES = {"web-tasks.svg": "/tasks", "web-task.svg": "/tasks/integration-tests"}
"""The web view's pages (`ledger serve`) drawn from the same store."""
WEB_WIDTH = 1100


def web_page(store: str, path: str) -> str:
    """The `<main>` HTML `ledger serve` sends for `path`, rendered by its own
    page code (ledger_cli/web/pages.py) at the pictures' clock."""
    from ledger_cli.cli.context import Session, Settings
    from ledger_cli.web import pages
    from ledger_cli.web.api import PAGE, Reader

    with Session(Settings(store=store, actor=ACTOR, now=NOW)) as s:
        reader = Reader(s)
        if path == "/tasks":
            page = reader.page(frozenset(), "", "", PAGE)
            html = pages.tasks(page, frozenset(), "", PAGE, reader.stats())
        else:
            key = path.rsplit("/", 1)[1]
            found = reader.task(key)
            assert found is not None
            rec, atts, history = found
            html = pages.task(rec, atts, history, reader.output(key, None, 0))
    return html[html.index("<header>") : html.index("</main>") + len("</main>")]


def web_svg(body: str, title: str) -> str:
    """A page as an SVG picture: the page's own markup and style sheet inside a
    foreignObject, so the picture is the page code's output, byte for byte
    (a screenshot would differ with every browser and font version). The
    height is estimated from the rows; a viewer draws the fonts it has."""
    from importlib import resources

    css = resources.files("ledger_cli.web").joinpath("static", "style.css").read_text()
    rows = body.count("<tr") + body.count("<h2") * 2 + body.count("\n") + 8
    height = 26 * rows
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WEB_WIDTH}" height="{height}"'
        f' viewBox="0 0 {WEB_WIDTH} {height}" role="img" aria-label="{title}">\n'
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n'
        f'<foreignObject x="0" y="0" width="{WEB_WIDTH}" height="{height}">\n'
        f'<div xmlns="http://www.w3.org/1999/xhtml" class="page"><style>{css}</style>'
        f"{body}</div>\n</foreignObject>\n</svg>\n"
    )


def render_web() -> dict[str, str]:
    """File name → SVG text of the web view's pictures."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "store")
        build_store(store)
        for name, path in WEB_PICTURES.items():
            out[name] = web_svg(web_page(store, path), f"ledger serve: {path}")
    return out


def render_graph() -> dict[str, str]:
    """`graph.svg`: `ledger graph --format svg` of the demo store (our own
    layout, no Graphviz and no rich involved)."""
    from ledger_cli.cli.context import Session, Settings
    from ledger_cli.cli.graph import model, svg

    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "store")
        build_store(store)
        with Session(Settings(store=store, actor=ACTOR, now=NOW)) as s:
            return {"graph.svg": svg.to_svg(model.collect(s.store))}


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    for name, text in {**render_all(), **render_web(), **render_graph()}.items():
        (IMG / name).write_text(text, encoding="utf-8")
        print(IMG / name)


if __name__ == "__main__":
    main()
