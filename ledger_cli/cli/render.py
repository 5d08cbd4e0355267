"""Every piece of rich output: the list table, the state panel, the trees, the
progress bar. The only module that imports rich, and only the commands that
render import it.

Colour follows the terminal: rich drops ANSI codes when stdout is not a
terminal and honours NO_COLOR; in a pipe the output is plain text.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import IO

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text
from rich.tree import Tree

from ledger_cli.cli import output
from ledger_cli.cli.escapes import escaped
from ledger_cli.cli.tablefit import Column, FittedTable
from ledger_cli.cli.wholefold import Folded, KeyPanel
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.schedule import Schedule

STATUS_STYLE: dict[str, str] = {
    "pending": "cyan",
    "claimed": "yellow",
    "completed": "green",
    "failed": "bold red",
    "blocked": "magenta",
}
MISSING_STYLE = "bold red"


def safe(text: str, *, lines: bool = False) -> str:
    """Untrusted text (keys, payloads, owners, command output) as a terminal
    may show it: every character that is not printable (C0 and C1 controls,
    ESC among them, DEL, bidirectional overrides, other format characters,
    a newline and a tab) is shown as its escape (`\\x1b`, `\\u202e`, `\\n`), so
    nothing in it is a terminal command and a key stays on its one line of a
    table or a tree. `lines` keeps newlines and tabs: a payload or a
    command's output, shown as the lines it holds. (rich drops a few
    controls, not ESC.) Lone surrogates (bytes that were not UTF-8) are left
    to the output, which shows each as U+FFFD."""
    return escaped(text, "\n\t" if lines else "", surrogates=True)


PIPE_WIDTH = 4096
"""Width when the output is not a terminal: tables are never squeezed or cut."""


def console(file: IO[str] | None = None, width: int | None = None) -> Console:
    """A console for data output (stdout unless given). On a terminal it fits
    the window; into a pipe or file it is as wide as the content."""
    stream = file or sys.stdout
    if width is None and not stream.isatty():
        width = PIPE_WIDTH
    return Console(file=stream, highlight=False, width=width)


def progress_bar() -> Progress:
    """A progress bar on stderr (callers check that stderr is a terminal)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(file=sys.stderr, highlight=False),
        transient=True,
        # Result lines go to stdout; keep them there when stdout is a file or pipe.
        redirect_stdout=sys.stdout.isatty(),
        redirect_stderr=False,
    )


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def duration(seconds: float) -> str:
    """A compact duration: 45s, 4m05s, 2h03m, 3d04h."""
    return output.compact_duration(int(seconds))


def lease_left(rec: TaskState, now: Instant) -> Text:
    if rec.status != "claimed":
        return Text("")
    left = (rec.lease_until - now).total_seconds()
    if left <= 0:
        return Text("expired", style="bold red")
    return Text(duration(left))


def when(instant: Instant) -> str:
    """An instant to the second, in UTC (RFC 3339)."""
    if instant.is_zero():
        return ""
    text = str(instant.utc())
    head, dot, _ = text.partition(".")
    return head + "Z" if dot else text


def needs_text(needs: Sequence[str] | None) -> str:
    return ", ".join(needs) if needs else ""


FOLDED = frozenset({"key", "owner", "blocked by"})
"""The table's columns of one name each, folded over lines rather than cut
with `…` where the terminal is narrow: names that differ only at the end
(`…-1`, `…-2`) must not look the same. (`needs`, a list, is cut: `state`
shows it.)"""


def record_table(
    records: Iterable[TaskState], now: Instant, schedules: Mapping[str, Schedule] | None = None
) -> FittedTable:
    """The `list` (and `watch`) table; with `schedules` (docs/design.md §8.1, §8.2) a
    priority and a not-before column too (the not-before only while it is in the
    future). The columns of one name each (`FOLDED`) are folded over lines where
    the terminal is narrow, never cut with `…`; a window too narrow for every
    column leaves some out, least needed first (`tablefit.DROP_ORDER`), never the key."""
    names = [
        ("key", "left"),
        ("status", "left"),
        ("seq", "right"),
        ("owner", "left"),
        ("fence", "right"),
        ("lease left", "right"),
        ("needs", "left"),
        ("blocked by", "left"),
        ("updated", "left"),
    ]
    if schedules:
        names += [("prio", "right"), ("not before", "left")]
    table = FittedTable(
        [Column(name, justify, "fold" if name in FOLDED else "ellipsis") for name, justify in names]
    )
    for rec in records:
        extra: list[Text] = []
        if schedules:
            kept = schedules.get(rec.key)
            nb = kept[0] if kept is not None and kept[0] > now else None
            extra = [Text(str(kept[1]) if kept is not None else "0"), Text(when(nb) if nb else "")]
        table.add_row(
            Text(safe(rec.key)),
            status_text(rec.status),
            Text(str(rec.sequence)),
            Text(safe(rec.owner)),
            Text(str(rec.fence)),
            lease_left(rec, now),
            Text(safe(needs_text(rec.needs))),
            Text(safe(rec.blocked_by)),
            Text(when(rec.updated_at)),
            *extra,
        )
    return table


def state_panel(
    rec: TaskState,
    now: Instant,
    need_status: Mapping[str, str | None],
    task_json: str,
    schedule: Schedule | None = None,
) -> KeyPanel:
    """One record as a panel; each need shows its own status (or "never
    admitted"). The key (its title, or its first row where the window is
    too narrow for the title), the owner, the needs and the blocking key are
    folded whole, never cut (wholefold.py)."""
    rows: list[tuple[str, RenderableType]] = [("status", status_text(rec.status))]
    rows.append(("sequence", str(rec.sequence)))
    if rec.owner or rec.status == "claimed":
        rows.append(("owner", Folded(Text(safe(rec.owner)))))
    rows.append(("fence", str(rec.fence)))
    if not rec.lease_until.is_zero():
        lease = Text(str(rec.lease_until))
        left = lease_left(rec, now)
        if left.plain:
            lease.append(" (")
            lease.append_text(left)
            lease.append(" left)" if left.plain != "expired" else ")")
        rows.append(("lease until", lease))
    if rec.needs is not None:
        needs = Text()
        for i, need in enumerate(rec.needs):
            if i:
                needs.append("\n")
            needs.append(safe(need))
            status = need_status.get(need)
            needs.append(" ")
            if status is None:
                needs.append("never admitted", style=MISSING_STYLE)
            else:
                needs.append_text(status_text(status))
        rows.append(("needs", Folded(needs) if rec.needs else Text("[]")))
    if rec.blocked_by:
        rows.append(("blocked by", Folded(Text(safe(rec.blocked_by)))))
    if schedule is not None and schedule[1]:
        rows.append(("priority", str(schedule[1])))
    if schedule is not None and schedule[0] > now:
        wait = duration((schedule[0] - now).total_seconds())
        rows.append(("not before", Text(f"{schedule[0]} (in {wait})")))
    rows.append(("task", Text(safe(task_json, lines=True))))
    rows.append(("rev", str(rec.rev)))
    rows.append(("created", _stamp(rec.created_at, rec.created_by)))
    rows.append(("updated", _stamp(rec.updated_at, rec.updated_by)))
    return KeyPanel(Text(safe(rec.key)), rows)


def _stamp(at: Instant, by: str) -> Text:
    return Text(f"{at} by {safe(by)}" if by else str(at))


def _label(
    key: str,
    rec: TaskState | None,
    escaped: Collection[str] = (),
    marks: Mapping[str, str] | None = None,
    pruned: Collection[str] = (),
) -> Text:
    text = Text(safe(key))
    text.append("  ")
    if rec is None:
        text.append("never admitted", style=MISSING_STYLE)
        return text
    text.append_text(status_text(rec.status))
    if marks and key in marks:  # the latest run's outcome (docs/design.md §7.3)
        text.append(f" ({marks[key]})", style=STATUS_STYLE["failed"])
    if key in pruned:  # its task, needs and history were removed; its status stays
        text.append(" (pruned)", style="dim")
    if rec.status == "blocked" and rec.blocked_by:
        text.append(f" by {safe(rec.blocked_by)}", style=STATUS_STYLE["blocked"])
    if key in escaped:
        text.append("  escaped block (ledger doctor --fix blocks it)", style=STATUS_STYLE["failed"])
    return text


def _escaped(records: Mapping[str, TaskState]) -> frozenset[str]:
    """Keys of the escaped blocks (engine.invariants): pending or claimed below a failure."""
    from ledger_cli.engine.invariants import find_escaped_blocks

    return frozenset(e.key for e in find_escaped_blocks(records.values()))


def _grow(
    root: Tree,
    start: str,
    children: Callable[[str], Iterable[str]],
    label: Callable[[str], Text],
) -> None:
    """Add the graph below `start` to `root`, depth first, in order; a key met
    a second time is shown once more and not expanded: as a cycle when it is
    on the path from `start` to here (`a  (cycle: a → b → a)`), else as
    "(see above)"."""
    shown = {start}
    stack: list[tuple[Tree, Iterator[str]]] = [(root, iter(children(start)))]
    path = [start]  # the key of each stack entry
    while stack:
        node, pending = stack[-1]
        child = next(pending, None)
        if child is None:
            stack.pop()
            path.pop()
            continue
        if child in shown:
            if child in path:
                cycle = " → ".join([*path[path.index(child) :], child])
                node.add(
                    Folded(Text(safe(f"{child}  (cycle: {cycle})"), style=STATUS_STYLE["failed"]))
                )
            else:
                node.add(Folded(Text(safe(f"{child}  (see above)"), style="dim")))
            continue
        shown.add(child)
        path.append(child)
        stack.append((node.add(Folded(label(child))), iter(children(child))))


def failure_trees(
    records: Mapping[str, TaskState],
    marks: Mapping[str, str] | None = None,
    pruned: Collection[str] = (),
) -> list[Tree]:
    """Each failed record with everything that depends on it (not completed);
    the keys in `pruned` marked so."""
    dependents: dict[str, list[str]] = {}
    for rec in records.values():
        for need in dict.fromkeys(rec.needs or ()):
            dependents.setdefault(need, []).append(rec.key)

    def children(key: str) -> list[str]:
        return sorted(k for k in dependents.get(key, ()) if records[k].status != "completed")

    escaped = _escaped(records)

    def label(key: str) -> Text:
        return _label(key, records.get(key), escaped, marks, pruned)

    trees = []
    for key in sorted(k for k, r in records.items() if r.status == "failed"):
        root = Tree(Folded(label(key)))
        _grow(root, key, children, label)
        trees.append(root)
    return trees


def needs_tree(
    key: str,
    records: Mapping[str, TaskState],
    marks: Mapping[str, str] | None = None,
    pruned: Collection[str] = (),
) -> Tree:
    """From `key` down its needs to whatever holds it: failures, blocked
    records, needs never admitted. Completed needs are leaves; the keys in
    `pruned` are marked so."""

    def children(k: str) -> list[str]:
        rec = records.get(k)
        if rec is None or rec.status in ("completed", "failed"):
            return []
        return list(dict.fromkeys(rec.needs or ()))

    escaped = _escaped(records)

    def label(k: str) -> Text:
        return _label(k, records.get(k), escaped, marks, pruned)

    root = Tree(Folded(label(key)))
    _grow(root, key, children, label)
    return root


def print_trees(con: Console, trees: Sequence[Tree], empty: str) -> None:
    if not trees:
        con.print(empty)
    for tree in trees:
        con.print(tree)
