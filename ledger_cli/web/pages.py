"""The HTML pages of `ledger serve`, rendered on the server.

Every string from the store (keys, payloads, owners, output, history) goes
through `esc` before it is placed in text or in an attribute: first the
CLI's rule for untrusted text (cli/escapes.py: a control or format character,
a bidirectional override among them, as its escape `\u202e`; a byte that is
not UTF-8, read as a lone surrogate, as U+FFFD), then `html.escape`, quotes
included. URLs carry keys percent-encoded byte by byte (`task_href`: a byte
that is not UTF-8 as itself, `%9F`, as the server reads it back). The
pages hold no inline script or style: `/static/app.js` and `/static/style.css`
are the only ones, as the Content-Security-Policy demands.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ledger_cli.web.api import STATUSES, Page

OUTPUT_KEPT = "\n\t"
"""The characters the payload and a command's output show as they are, as the
terminal views do (render.safe with lines); app.js keeps the same."""

if TYPE_CHECKING:
    from ledger_cli.engine.attempts import Attempt
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.record import TaskState


_SURROGATE = re.compile("[\ud800-\udfff]")


def esc(value: object, keep: str = "") -> str:
    """Untrusted text as the CLI shows it (each control or format character
    but those in `keep` as its escape, each lone surrogate as U+FFFD), then
    HTML-escaped for text or a quoted attribute."""
    text = str(value)
    if not text.isprintable():
        from ledger_cli.cli.escapes import escaped

        text = _SURROGATE.sub("\ufffd", escaped(text, keep, surrogates=True))
    return html.escape(text, quote=True)


def key_query(key: str) -> str:
    """`key=K` for a URL's query: the key's bytes percent-encoded, those that
    are not UTF-8 (lone surrogates) as themselves (`key=bad%9F%FF`)."""
    return urlencode({"key": key}, encoding="utf-8", errors="surrogateescape")


def task_href(key: str) -> str:
    """A task page's link. Browsers drop a path segment "." or ".." (encoded
    as %2E too), so those two keys go in the query: `/task?key=..`. The key's
    bytes are percent-encoded, a Go-written byte that is not UTF-8 as itself
    (`/tasks/bad%9F%FF`): the server reads it back as the CLI reads an argument."""
    if key in (".", ".."):
        return "/task?" + key_query(key)
    return "/tasks/" + quote(key, safe="", encoding="utf-8", errors="surrogateescape")


def layout(title: str, body: str) -> str:
    """The page around `body`. Its markup is also well-formed XML (void elements
    closed with `/>`), so docs/make_pictures.py can place it in an SVG."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8" />'
        f"<title>{esc(title)} · ledger</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1" />'
        '<link rel="stylesheet" href="/static/style.css" />'
        '<script src="/static/app.js" defer></script></head><body>'
        '<header><nav><a href="/">Graph</a><a href="/tasks">Tasks</a></nav></header>'
        f"<main>{body}</main></body></html>\n"
    )


def counts(stats: dict[str, Any] | None) -> str:
    """The counts line; without `stats` its numbers show "…" until app.js
    fetches /api/stats (the counts read every record on some stores, so the
    task table does not wait for them)."""

    def shown(value: object) -> str:
        return "…" if stats is None else esc(value)

    got = stats["counts"] if stats is not None else {}
    parts = [
        f'<span class="status-{st}">{st}: <b data-count="{st}">{shown(int(got.get(st, 0)))}'
        "</b></span>"
        for st in STATUSES
    ]
    ready = stats.get("ready", 0) if stats is not None else None
    parts.append(f'<span>ready: <b data-stat="ready">{shown(ready)}</b></span>')
    return f'<p class="counts" id="counts">{"".join(parts)}</p>'


def index(stats: dict[str, Any] | None, svg: str | None) -> str:
    """`/`: the counts and the graph of needs (`svg` None: too large to draw)."""
    if svg is None:
        drawn = (
            '<p class="muted">Too many tasks to draw here: '
            "<code>ledger graph | dot -Tsvg &gt; graph.svg</code> draws them all.</p>"
        )
    else:
        drawn = f'<div class="graph" id="graph">{svg}</div>'
    body = f"<h1>The ledger</h1>{counts(stats)}{drawn}"
    return layout("graph", body)


def tasks(
    page: Page,
    statuses: frozenset[str],
    prefix: str,
    limit: int,
    stats: dict[str, Any] | None = None,
) -> str:
    """`/tasks`: the filter form, one page of the table, and the next page's link."""
    checked = ' checked="checked"'
    boxes = "".join(
        f'<label class="status-{st}"><input type="checkbox" name="status" value="{st}"'
        f"{checked if st in statuses else ''} /> {st}</label>"
        for st in STATUSES
    )
    form = (
        '<form class="filters" method="get" action="/tasks">'
        f"{boxes}"
        f'<label>key prefix <input type="text" name="prefix" value="{esc(prefix)}" /></label>'
        '<button type="submit">Filter</button></form>'
    )
    rows = "".join(_row(rec) for rec in page.records)
    table = (
        '<table id="tasks"><thead><tr><th>key</th><th>status</th><th>owner</th>'
        "<th>fence</th><th>blocked by</th><th>updated</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )
    if not page.records:
        table += '<p class="muted" id="empty">No task matches.</p>'
    more = ""
    if page.next_after is not None:
        query: list[tuple[str, str]] = [("status", st) for st in sorted(statuses)]
        if prefix:
            query.append(("prefix", prefix))
        query.append(("after", page.next_after))
        if limit:
            query.append(("limit", str(limit)))
        href = "/tasks?" + urlencode(query, encoding="utf-8", errors="surrogateescape")
        more = f'<p><a id="next" href="{esc(href)}">Next page</a></p>'
    return layout("tasks", f"<h1>Tasks</h1>{counts(stats)}{form}{table}{more}")


def _row(rec: TaskState) -> str:
    blocked = (
        f'<a href="{esc(task_href(rec.blocked_by))}">{esc(rec.blocked_by)}</a>'
        if rec.blocked_by
        else ""
    )
    return (
        f'<tr data-status="{esc(rec.status)}">'
        f'<td class="key"><a href="{esc(task_href(rec.key))}">{esc(rec.key)}</a></td>'
        f'<td class="status-{esc(rec.status)}">{esc(rec.status)}</td>'
        f'<td>{esc(rec.owner)}</td><td>{rec.fence}</td><td class="key">{blocked}</td>'
        f"<td>{esc(rec.updated_at)}</td></tr>"
    )


def task(
    rec: TaskState,
    atts: list[Attempt],
    history: Iterable[HistoryEntry],
    out: dict[str, Any] | None,
) -> str:
    """`/tasks/KEY`: the record, its attempts, the last attempt's output
    (followed by app.js while it runs) and its history lines."""
    needs = ", ".join(
        f'<a class="key" href="{esc(task_href(n))}">{esc(n)}</a>' for n in rec.needs or ()
    )
    payload = json.dumps(rec.task, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    fields = [
        ("key", f'<span class="key" id="key">{esc(rec.key)}</span>'),
        ("status", f'<span id="status" class="status-{esc(rec.status)}">{esc(rec.status)}</span>'),
        ("owner", esc(rec.owner)),
        ("fence", str(rec.fence)),
        ("lease until", esc(rec.lease_until)),
        ("needs", needs),
        (
            "blocked by",
            f'<a class="key" href="{esc(task_href(rec.blocked_by))}">{esc(rec.blocked_by)}</a>'
            if rec.blocked_by
            else "",
        ),
        ("created", f"{esc(rec.created_at)} by {esc(rec.created_by)}"),
        ("updated", f"{esc(rec.updated_at)} by {esc(rec.updated_by)}"),
    ]
    record = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in fields)
    parts = [
        f'<h1 class="key">{esc(rec.key)}</h1>',
        f'<table id="record">{record}</table>',
        f'<h2>Task</h2><pre id="payload">{esc(payload, OUTPUT_KEPT)}</pre>',
        "<h2>Attempts</h2>",
    ]
    if atts:
        rows = "".join(
            f"<tr><td>{a.n}</td><td>{a.fence}</td><td>{esc(a.owner)}</td><td>{esc(a.host)}</td>"
            f"<td>{esc(a.started)}</td><td>{esc(a.ended or '')}</td><td>{esc(a.outcome())}</td>"
            f"<td>{a.output_bytes}</td></tr>"
            for a in atts
        )
        parts.append(
            '<table id="attempts"><thead><tr><th>n</th><th>fence</th><th>owner</th>'
            "<th>host</th><th>started</th><th>ended</th><th>outcome</th><th>output bytes</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>"
        )
    else:
        parts.append('<p class="muted">No recorded attempt.</p>')
    if out is not None:
        shown = out["attempt"]
        running = shown["ended"] is None and not shown["abandoned"]
        word = "running" if running else "abandoned" if shown["abandoned"] else "ended"
        parts.append(
            f"<h2>Output of attempt {int(shown['n'])} "
            f'<span class="muted" id="attempt-state">{word}</span></h2>'
            f'<pre id="output" data-query="{esc(key_query(rec.key))}"'
            f' data-attempt="{int(out["attempt"]["n"])}"'
            f' data-seen="{int(out["seen"])}" data-live="{1 if running else 0}">'
            f"{esc(out['output'], OUTPUT_KEPT)}</pre>"
        )
    lines = "".join(
        f"<tr><td>{esc(e.time)}</td><td>{esc(e.actor)}</td><td>{esc(e.event)}</td>"
        f'<td>{e.fence}</td><td class="key">{esc(e.data)}</td></tr>'
        for e in history
    )
    parts.append(
        '<h2>History</h2><table id="history"><thead><tr><th>time</th><th>actor</th>'
        f"<th>event</th><th>fence</th><th>data</th></tr></thead><tbody>{lines}</tbody></table>"
    )
    return layout(rec.key, "".join(parts))


def message(title: str, text: str) -> str:
    return layout(title, f"<h1>{esc(title)}</h1><p>{esc(text)}</p>")
