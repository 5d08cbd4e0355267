"""The README's pictures: `ledger list`, `ledger tree` and `ledger state` as a
person sees them on a terminal, exported to SVG with rich's `export_svg`.

The store is the demo's pipeline (`ledger demo`), worked through
deterministically: fixed instants (`--now`), fixed actors and owners, so the
pictures change only when the commands' output does. The commands are the
real ones (`ledger_cli.cli.app.run`), drawing on one recording console.

    .venv/bin/python docs/make_pictures.py      # rewrite docs/img/*.svg

`tests/test_pictures.py` regenerates them and fails when a file is stale.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
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
    from ledger_cli.stores.attempts import attempt_log
    from ledger_cli.stores.resolve import open_store

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
            # What `ledger run` records of the command (SPEC §7.1): fixed times and pids.
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
            with recording() as con:
                assert isinstance(con, Console)
                argv = ["--store", store, "--actor", ACTOR, "--now", NOW, *args]
                code = app.run(argv)
                if code != 0:
                    raise RuntimeError(f"ledger {' '.join(args)} exited {code}")
                out[name] = con.export_svg(title="ledger " + " ".join(args))
    out[MANIFEST] = json.dumps({"rich": importlib.metadata.version("rich")}, indent=2) + "\n"
    return out


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (IMG / name).write_text(text, encoding="utf-8")
        print(IMG / name)


if __name__ == "__main__":
    main()
