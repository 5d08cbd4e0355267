"""Rich output on a fixed-width console without colour, compared exactly;
and plain text (no ANSI codes) in a pipe."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from rich.console import Console, RenderableType

from ledger_cli.cli import render
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from tests.cli_support import Cli, make_cli

T = Instant.parse("2026-01-02T03:04:05Z")
NOW = T + timedelta(seconds=10)

RECORDS = {
    "fetch": TaskState(
        key="fetch", status="completed", sequence=1, owner="w1", fence=1,
        lease_until=T + timedelta(minutes=5), created_at=T, created_by="a",
        updated_at=T + timedelta(seconds=3), updated_by="w1",
    ),
    "build": TaskState(
        key="build", status="claimed", sequence=2, owner="w2", fence=3,
        lease_until=T + timedelta(minutes=4, seconds=30), needs=("fetch",),
        created_at=T, created_by="a", updated_at=T, updated_by="w2",
    ),
    "test": TaskState(
        key="test", status="failed", sequence=1, owner="w1", fence=1, lease_until=T,
        needs=("build",), created_at=T, updated_at=T, task={"cmd": "pytest"},
    ),
    "deploy": TaskState(
        key="deploy", status="blocked", sequence=1, needs=("test", "ghost"),
        blocked_by="test", created_at=T, updated_at=T,
    ),
    "notify": TaskState(
        key="notify", status="pending", sequence=1, needs=("deploy",), created_at=T, updated_at=T,
    ),
}  # fmt: skip


def show(renderable: RenderableType, width: int = 100) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, highlight=False).print(renderable)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


def test_list_table() -> None:
    table = render.record_table(sorted(RECORDS.values(), key=lambda r: r.key), NOW)
    assert show(table) == (
        "key     status     seq  owner  fence  lease left  needs        blocked by  updated\n"
        "───────────────────────────────────────────────────────────────────────────────────────────────\n"
        "build   claimed      2  w2         3       4m20s  fetch                    2026-01-02T03:04:05Z\n"  # noqa: E501
        "deploy  blocked      1             0              test, ghost  test        2026-01-02T03:04:05Z\n"  # noqa: E501
        "fetch   completed    1  w1         1                                       2026-01-02T03:04:08Z\n"  # noqa: E501
        "notify  pending      1             0              deploy                   2026-01-02T03:04:05Z\n"  # noqa: E501
        "test    failed       1  w1         1              build                    2026-01-02T03:04:05Z\n"  # noqa: E501
    )  # fmt: skip


def test_list_table_on_narrow_consoles() -> None:
    """A console too narrow for every column leaves columns out, least needed
    first (docs/design.md §6.6), rather than cut each to `…`: the key and every
    column drawn stay whole."""
    table = render.record_table(sorted(RECORDS.values(), key=lambda r: r.key), NOW)
    assert show(table, 20) == (
        "key     status\n"
        "─────────────────\n"
        "build   claimed\n"
        "deploy  blocked\n"
        "fetch   completed\n"
        "notify  pending\n"
        "test    failed\n"
    )
    assert show(table, 40).splitlines()[:3] == [
        "                                   lease",
        "key     status     seq  owner       left",
        "────────────────────────────────────────",
    ]
    at80 = show(table, 80)
    assert at80.splitlines()[3] == (
        "build   claimed      2  w2         3       4m20s            2026-01-02T03:04:05Z"
    )
    assert "…" not in show(table, 20) + show(table, 40) + at80


def test_state_panel() -> None:
    panel = render.state_panel(RECORDS["build"], NOW, {"fetch": "completed"}, "null")
    assert show(panel) == (
        "╭─ build ────────────────────────────────────────╮\n"
        "│ status       claimed                           │\n"
        "│ sequence     2                                 │\n"
        "│ owner        w2                                │\n"
        "│ fence        3                                 │\n"
        "│ lease until  2026-01-02T03:08:35Z (4m20s left) │\n"
        "│ needs        fetch completed                   │\n"
        "│ task         null                              │\n"
        "│ rev          0                                 │\n"
        "│ created      2026-01-02T03:04:05Z by a         │\n"
        "│ updated      2026-01-02T03:04:05Z by w2        │\n"
        "╰────────────────────────────────────────────────╯\n"
    )


def test_state_panel_marks_needs_never_admitted() -> None:
    panel = render.state_panel(
        RECORDS["deploy"], NOW, {"test": "failed", "ghost": None}, '{"cmd":"x"}'
    )
    assert show(panel) == (
        "╭─ deploy ─────────────────────────╮\n"
        "│ status      blocked              │\n"
        "│ sequence    1                    │\n"
        "│ fence       0                    │\n"
        "│ needs       test failed          │\n"
        "│             ghost never admitted │\n"
        "│ blocked by  test                 │\n"
        '│ task        {"cmd":"x"}          │\n'
        "│ rev         0                    │\n"
        "│ created     2026-01-02T03:04:05Z │\n"
        "│ updated     2026-01-02T03:04:05Z │\n"
        "╰──────────────────────────────────╯\n"
    )


def test_failure_tree() -> None:
    (tree,) = render.failure_trees(RECORDS)
    assert show(tree) == (
        "test  failed\n"
        "└── deploy  blocked by test\n"
        "    └── notify  pending  escaped block (ledger doctor --fix blocks it)\n"
    )  # fmt: skip  (pending below a failure: an escaped block, docs/design.md §2.8)


def test_needs_tree_down_to_the_failure() -> None:
    assert show(render.needs_tree("notify", RECORDS)) == (
        "notify  pending  escaped block (ledger doctor --fix blocks it)\n"
        "└── deploy  blocked by test\n"
        "    ├── test  failed\n"
        "    └── ghost  never admitted\n"
    )


def test_needs_tree_shows_a_shared_need_once() -> None:
    recs = {
        "a": TaskState(key="a", status="pending", needs=("b", "c")),
        "b": TaskState(key="b", status="pending", needs=("d",)),
        "c": TaskState(key="c", status="pending", needs=("d",)),
        "d": TaskState(key="d", status="pending", needs=("a",)),
    }
    assert show(render.needs_tree("a", recs)) == (
        "a  pending\n"
        "├── b  pending\n"
        "│   └── d  pending\n"
        "│       └── a  (cycle: a → b → d → a)\n"
        "└── c  pending\n"
        "    └── d  (see above)\n"
    )


def test_colour_only_on_a_terminal_and_never_with_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    label = render.status_text("failed")
    buf = io.StringIO()
    Console(file=buf, force_terminal=True, color_system="standard").print(label)
    assert "\x1b[" in buf.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    buf = io.StringIO()
    Console(file=buf, force_terminal=True, color_system="standard").print(label)
    assert "\x1b[1;31m" not in buf.getvalue()


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return make_cli(monkeypatch)


def test_commands_print_plain_text_into_a_pipe(cli: Cli) -> None:
    cli.ok("admit", "root")
    cli.ok("admit", "leaf", "--needs", "root")
    cli.ok("claim", "root", "--owner", "w", "--lease", "1m")
    cli.ok("complete", "root", "--owner", "w", "--fence", "1", "--failed")
    for args in (["list"], ["state", "leaf"], ["tree"], ["tree", "leaf"], ["log"], ["--help"]):
        out = cli.ok(*args).stdout
        assert out and "\x1b[" not in out, args
