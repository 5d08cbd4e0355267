"""`ledger serve` over HTTP, as a real process: read-only, tokens, headers,
escaping, the /api/ shapes and the paged task table (tests/cli/test_web_browser.py
drives the same server from Chromium)."""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from pathlib import Path

import pytest

from ledger_cli.engine.attempts import Attempt
from ledger_cli.stores import open_store
from ledger_cli.stores.attemptlog import attempt_log
from tests.cli_support import run_ledger
from tests.stores import KINDS
from tests.web_support import admit, served

DURABLE = sorted(k for k, v in KINDS.items() if v.durable)
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    admit(path, "fetch", "--task", '{"url": "https://example.com"}')
    admit(path, "load", "--needs", "fetch")
    admit(path, HOSTILE, "--task", json.dumps({"h": "<script>alert(2)</script>"}))
    return path


def q(key: str) -> str:
    return urllib.parse.quote(key, safe="")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_any_method_but_get_and_head_is_405(store: Path, method: str) -> None:
    with served(store) as web:
        for path in ("/", "/tasks", "/api/tasks", "/api/tasks/fetch"):
            reply = web.request(method, path)
            assert reply.status == 405, (method, path)
            assert reply.headers["Allow"] == "GET, HEAD"
        assert web.request("HEAD", "/api/tasks").status == 200
        # Nothing was written: the records are as admitted.
        done = run_ledger(store, "--json", "list")
        assert sorted(r["Status"] for r in json.loads(done.stdout)) == ["pending"] * 3


def test_without_the_token_every_method_is_401_not_405(store: Path) -> None:
    """Authentication comes first: a caller without the token learns nothing of
    the server's routes or methods, whatever the method (and with a wrong Host
    and no token, the Host rule answers first, as for GET)."""
    with served(store, "--token", "t0ken") as web:
        for method in ("POST", "PUT", "DELETE", "BREW"):
            for path in ("/", "/api/tasks", "/nowhere"):
                reply = web.request(method, path)
                assert reply.status == 401, (method, path)
                assert "Allow" not in reply.headers
                assert reply.headers["WWW-Authenticate"] == "Bearer"
            right = web.request(method, "/api/tasks", {"Authorization": "Bearer t0ken"})
            assert right.status == 405 and right.headers["Allow"] == "GET, HEAD"
    with served(store) as web:
        assert web.request("POST", "/api/tasks", {"Host": "evil.example.com"}).status == 403


def test_every_response_carries_the_security_headers(store: Path) -> None:
    with served(store) as web:
        for path in ("/", "/tasks", f"/tasks/{q(HOSTILE)}", "/api/stats", "/nowhere"):
            headers = web.get(path).headers
            csp = headers["Content-Security-Policy"]
            assert "default-src 'none'" in csp and "script-src 'self'" in csp
            assert "frame-ancestors 'none'" in csp
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Referrer-Policy"] == "no-referrer"


def test_pages_escape_keys_and_payloads(store: Path) -> None:
    with served(store) as web:
        table = web.get("/tasks").text
        page = web.get(f"/tasks/{q(HOSTILE)}").text
    for text in (table, page):
        assert HOSTILE not in text
        assert "&lt;img src=x onerror=alert(1)&gt;" in text
        assert "<script>alert" not in text
        # The only script is our static file: no inline script, no handler.
        assert text.count("<script") == 1
        assert '<script src="/static/app.js" defer></script>' in text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page


def test_api_shapes_are_the_cli_json(store: Path) -> None:
    with served(store) as web:
        tasks = web.get("/api/tasks").json()
        one = web.get(f"/api/tasks/{q(HOSTILE)}").json()
        stats = web.get("/api/stats").json()
        missing = web.get("/api/tasks/nope")
    listed = json.loads(run_ledger(store, "--json", "list").stdout)
    assert tasks == listed
    state = json.loads(run_ledger(store, "--json", "state", HOSTILE).stdout)
    assert one == state
    cli_stats = json.loads(run_ledger(store, "--json", "stats").stdout)
    assert stats["counts"] == cli_stats["counts"]
    assert set(stats) == set(cli_stats)
    assert missing.status == 404
    assert missing.json()["error"]["message"] == "no such key"


@pytest.mark.parametrize("kind", DURABLE)
def test_filters_and_key_cursor_pages(tmp_path: Path, kind: str) -> None:
    with KINDS[kind].place(tmp_path) as path:
        _filters_and_pages(path)


def _filters_and_pages(path: str) -> None:
    lines = [json.dumps({"key": f"job-{i:02}"}) for i in range(25)]
    lines += [json.dumps({"key": f"other-{i}"}) for i in range(3)]
    done = run_ledger(path, "admit", "--batch", "-", input="\n".join(lines).encode())
    assert done.returncode == 0, done.stderr
    run = run_ledger(path, "run", "job-03", "--owner", "w", "--lease", "1m", "--", "false")
    assert run.returncode != 0
    with served(path) as web:
        seen: list[str] = []
        link = "/api/tasks?prefix=job-&limit=10"
        while link:
            reply = web.get(link)
            assert reply.status == 200
            seen += [r["Key"] for r in reply.json()]
            nxt = reply.headers.get("Link")
            link = nxt[1 : nxt.index(">")] if nxt else ""
        assert seen == [f"job-{i:02}" for i in range(25)]
        failed = web.get("/api/tasks?status=failed").json()
        assert [r["Key"] for r in failed] == ["job-03"]
        blocked_or_failed = web.get("/api/tasks?status=failed&status=blocked&prefix=o").json()
        assert blocked_or_failed == []
        exact = web.get("/api/tasks?prefix=other-1").json()
        assert [r["Key"] for r in exact] == ["other-1"]
        html = web.get("/tasks?prefix=job-&limit=10").text
        assert 'href="/tasks?prefix=job-&amp;after=job-09&amp;limit=10"' in html
        assert web.get("/api/tasks?status=nonsense").status == 400
        assert web.get("/api/tasks?limit=x").status == 400


def test_token_bearer_and_cookie(store: Path) -> None:
    token = "s3cret-token"
    with served(store, "--token", token) as web:
        for path in ("/", "/tasks", "/api/stats", "/static/app.js"):
            assert web.get(path).status == 401, path
        assert web.get("/api/stats", {"Authorization": "Bearer wrong"}).status == 401
        assert web.get("/api/stats", {"Authorization": f"Bearer {token}"}).status == 200
        assert web.get("/?token=wrong").status == 401
        visit = web.get(f"/tasks?token={token}&prefix=f")
        assert visit.status == 303
        assert visit.headers["Location"] == "/tasks?prefix=f"  # the token left the URL
        cookie = visit.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert token not in cookie
        pair = cookie.split(";")[0]
        assert web.get("/tasks?prefix=f", {"Cookie": pair}).status == 200
        assert web.get("/tasks", {"Cookie": pair[:-1] + "x"}).status == 401


def test_without_a_token_only_a_loopback_host_is_served(store: Path) -> None:
    """A DNS-rebinding page sends its own host name as Host: refused."""
    with served(store) as web:
        loose = (f"127.0.0.1:{web.port}@evil.example", "localhost:x", "[::1]evil", "::1", ":80")
        for host in (
            "evil.example.com",
            "evil.example.com:80",
            f"attacker:{web.port}",
            "10.0.0.1",
            *loose,
        ):
            reply = web.get("/api/tasks", {"Host": host})
            assert reply.status == 403, host
            assert b"fetch" not in reply.body
        for host in (f"127.0.0.1:{web.port}", f"localhost:{web.port}", "localhost", "[::1]:1"):
            assert web.get("/api/tasks", {"Host": host}).status == 200, host
    with served(store, "--token", "t0ken") as web:  # the token guards it then
        headers = {"Host": "ledger.example.com", "Authorization": "Bearer t0ken"}
        assert web.get("/api/tasks", headers).status == 200


def test_token_from_the_environment(store: Path) -> None:
    with served(store, LEDGER_TOKEN="from-env") as web:
        assert web.get("/api/stats").status == 401
        assert web.get("/api/stats", {"Authorization": "Bearer from-env"}).status == 200


@pytest.mark.parametrize("bind", ["0.0.0.0:0", "192.0.2.1:8765", "example.com:80", "[::]:0"])
def test_a_bind_off_loopback_needs_a_token(store: Path, bind: str) -> None:
    done = run_ledger(store, "serve", "--bind", bind, timeout=30)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "not a loopback address, needs --token or LEDGER_TOKEN" in line


@pytest.mark.parametrize("bind", ["8765", "host:port", "127.0.0.1:70000", "127.0.0.1:"])
def test_a_bad_bind_is_a_usage_error(store: Path, bind: str) -> None:
    done = run_ledger(store, "serve", "--bind", bind, timeout=30)
    assert done.returncode == 2
    assert done.stderr.startswith("ledger: --bind wants HOST:PORT")
    assert len(done.stderr.splitlines()) == 1


def test_head_404_and_bad_urls(store: Path) -> None:
    with served(store) as web:
        head = web.request("HEAD", "/tasks/fetch")
        assert head.status == 200 and head.body == b""
        assert int(head.headers["Content-Length"]) > 0
        assert web.get("/tasks/nope").status == 404
        assert web.get("/static/../README.md").status == 404
        assert web.get("/static/app.js").headers["Content-Type"].startswith("text/javascript")
        bad = web.get("/api/tasks/%ff%fe")  # not UTF-8: a key's own bytes, as a Go key's
        assert bad.status == 404
        assert bad.json()["error"]["message"] == "no such key"
        assert web.get("/api/tasks/fetch/output").status == 404  # no attempt yet
        assert web.get("/api/tasks/fetch/output?since=x").status == 400


def test_a_port_in_use_is_one_line_and_exit_2(store: Path) -> None:
    with served(store) as web:
        done = run_ledger(store, "serve", "--bind", f"127.0.0.1:{web.port}", timeout=30)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"ledger: cannot listen on 127.0.0.1:{web.port}: ")


def test_the_token_redirect_stays_on_the_site(store: Path) -> None:
    with served(store, "--token", "t0k") as web:
        for path in ("//evil.example/?token=t0k", "/\\evil.example/?token=t0k"):
            reply = web.get(path)
            assert reply.status == 303
            where = reply.headers["Location"]
            assert where.startswith("/") and where[1:2] not in ("/", "\\"), where


def test_an_attempt_whose_runner_is_gone_shows_abandoned(store: Path) -> None:
    """Claimed under a lease that ran out long ago, no end recorded: the task
    page, its output and its JSON tell it abandoned, as `state` does."""
    past = "2020-01-02T03:04:05Z"
    claim = ["claim", "fetch", "--owner", "w1", "--lease", "1s", "--now", past]
    assert run_ledger(store, *claim).returncode == 0
    with open_store(str(store)) as opened:
        att = Attempt("fetch", fence=1, owner="w1", host="h1", pid=9, started=past)
        log = attempt_log(opened)
        att.n = log.start_attempt(att)
        att.output_bytes = att.kept_bytes = 5
        log.save_attempt(att, b"half\n")
    with served(store) as web:
        page = web.get("/tasks/fetch").text
        out = web.get("/api/tasks/fetch/output").json()
        one = web.get("/api/tasks/fetch").json()
    assert '<span class="muted" id="attempt-state">abandoned</span>' in page
    assert 'data-live="0"' in page and "<td>abandoned</td>" in page
    assert out["attempt"]["abandoned"] is True and out["output"] == "half\n"
    assert [a["abandoned"] for a in one["attempts"]] == [True]
    assert one == json.loads(run_ledger(store, "--json", "state", "fetch").stdout)


def test_every_key_link_opens_its_task_as_a_browser_resolves_it(tmp_path: Path) -> None:
    """A browser drops a path segment "." or ".." (encoded too): the links of
    those keys carry the key in the query, and the JSON endpoints the page
    polls take it there as well."""
    path = tmp_path / "store"
    for key in (".", "..", ".x", "a/b"):
        admit(path, key)
    with served(path) as web:
        table = web.get("/tasks").text
        links = re.findall(r'<td class="key"><a href="([^"]+)">([^<]*)</a>', table)
        assert len(links) == 4
        for href, shown_key in links:
            # urljoin removes dot segments as RFC 3986 and the WHATWG URL standard do.
            resolved = urllib.parse.urljoin("http://host/tasks", html.unescape(href))
            page = web.get(resolved.removeprefix("http://host"))
            assert page.status == 200, href
            assert f'<span class="key" id="key">{shown_key}</span>' in page.text, href
        shown = {html.unescape(h) for h, _ in links}
        assert {"/task?key=.", "/task?key=..", "/tasks/.x", "/tasks/a%2Fb"} == shown
        assert web.get("/task?key=..").text.count("<h1") == 1
        assert web.get("/api/task?key=..").json()["Key"] == ".."
        assert web.get("/api/task?key=.").json()["Key"] == "."
        assert web.get("/api/task/output?key=..").status == 404  # no attempt yet
        assert web.get("/task?key=nope").status == 404
        assert web.get("/api/task").status == 404


def test_a_store_deleted_while_served_is_an_error_not_an_empty_ledger(store: Path) -> None:
    """As a read of a missing `--store` path exits 9, the pages and the API
    answer 500 naming it, never an empty ledger with 200."""
    import shutil

    with served(store) as web:
        assert web.get("/api/stats").status == 200
        shutil.rmtree(store)
        for path in ("/api/stats", "/api/tasks", "/tasks", "/"):
            got = web.get(path)
            assert got.status == 500, (path, got.status)
            assert b"no store at" in got.body, (path, got.body[:200])


def test_an_sqlite_file_replaced_or_damaged_while_served_is_read_anew(tmp_path: Path) -> None:
    """Each request reads the file at the path served, as a fresh `ledger
    stats` would: a file replaced there (a restore from a backup) shows its
    own records, and one whose pages were overwritten answers 500 with
    SQLite's error, never the old file's records from a kept connection."""
    path = tmp_path / "jobs.db"
    admit(f"sqlite:{path}", "old")
    with served(f"sqlite:{path}") as web:
        assert [t["Key"] for t in web.get("/api/tasks").json()] == ["old"]
        other = tmp_path / "other.db"
        admit(f"sqlite:{other}", "new")
        other.replace(path)
        assert [t["Key"] for t in web.get("/api/tasks").json()] == ["new"]
        with path.open("r+b") as f:
            f.write(b"\0" * 12288)  # the header and the first pages
        got = web.get("/api/stats")
        assert got.status == 500, got.status
        assert b"not a database" in got.body, got.body[:200]
