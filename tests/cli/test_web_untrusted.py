"""`ledger serve` as a real process, facing what it does not control: keys the
Go service wrote (bytes that are not UTF-8, controls, bidirectional
overrides), clients that hang up, requests the standard library refuses
before our code sees them, and tokens no client could send."""

from __future__ import annotations

import html
import json
import re
import socket
import struct
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.cli_support import run_ledger
from tests.go_support import go_connect, go_row
from tests.web_support import admit, served

BAD = b"bad\x9f\xff"
"""A key the Go service may write: Go strings are bytes, not UTF-8."""


@pytest.fixture
def go_store(tmp_path: Path) -> str:
    """An SQLite store holding `good` (ours) and the Go-written key BAD."""
    path = tmp_path / "jobs.db"
    admit(f"sqlite:{path}", "good")
    conn = go_connect(path)
    go_row(conn, key=BAD, status="pending")
    conn.close()
    return f"sqlite:{path}"


def test_a_key_that_is_not_utf8_is_listed_and_its_link_opens_it(go_store: str) -> None:
    """The table shows the key as the CLI does (each bad byte as U+FFFD), and
    its link carries the key's own bytes percent-encoded, which the page, the
    JSON endpoints and the next-page cursor read back byte for byte."""
    with served(go_store) as web:
        table = web.get("/tasks")
        assert table.status == 200, table.body[:300]
        links = dict(re.findall(r'<td class="key"><a href="([^"]+)">([^<]*)</a>', table.text))
        assert links == {"/tasks/bad%9F%FF": "bad\ufffd\ufffd", "/tasks/good": "good"}
        page = web.get("/tasks/bad%9F%FF")
        assert page.status == 200
        assert '<h1 class="key">bad\ufffd\ufffd</h1>' in page.text
        assert web.get("/task?key=bad%9F%FF").status == 200
        for path in ("/api/tasks/bad%9F%FF", "/api/task?key=bad%9F%FF"):
            got = web.get(path)
            assert got.status == 200, path
            assert got.json()["Key"] == "bad\ufffd\ufffd"  # as `ledger --json state`
        assert web.get("/api/tasks/bad%9F%FE").status == 404  # another key: none
        # Paged by one: the cursor is the bad key's bytes, and it pages on.
        first = web.get("/api/tasks?limit=1")
        assert first.headers["Link"] == '</api/tasks?after=bad%9F%FF&limit=1>; rel="next"'
        assert [t["Key"] for t in web.get("/api/tasks?after=bad%9F%FF").json()] == ["good"]
        table1 = web.get("/tasks?limit=1").text
        assert 'id="next" href="/tasks?after=bad%9F%FF&amp;limit=1"' in table1
        assert "/tasks/good" in web.get("/tasks?after=bad%9F%FF&limit=1").text
    assert web.stderr == ""


def test_the_output_of_a_key_that_is_not_utf8_is_served(go_store: str) -> None:
    """Its attempt, recorded under its own bytes, is read back by the output
    endpoints (docs/design.md §7.1)."""
    key = BAD.decode("utf-8", "surrogateescape")  # argv bytes, as a shell passes them
    ran = run_ledger(go_store, "run", key, "--owner", "w", "--lease", "1m", "--", "echo", "hi")
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    with served(go_store) as web:
        for path in ("/api/tasks/bad%9F%FF/output", "/api/task/output?key=bad%9F%FF"):
            got = web.get(path)
            assert got.status == 200, (path, got.body[:300])
            body = got.json()
            assert (body["key"], body["attempt"]["n"], body["output"]) == (
                "bad\ufffd\ufffd",
                1,
                "hi\n",
            )
    assert web.stderr == ""


HOSTILE_KEYS = {
    "rlo\u202egnp.exe": "rlo\\u202egnp.exe",
    "esc\x1b[31mred": "esc\\x1b[31mred",
    "cr\rnul\x00": "cr\\rnul\\x00",
}


def test_controls_and_bidi_overrides_in_keys_are_shown_as_escapes(tmp_path: Path) -> None:
    """A bidirectional override would draw `rlo\u202egnp.exe` as `rloexe.png`:
    the table, the page's <h1> and <title> show each control or format
    character as its escape, as `ledger list` and the graph do."""
    path = tmp_path / "jobs.db"
    admit(f"sqlite:{path}", "good", "--task", json.dumps({"note": "x\u202ey\x1bz"}))
    conn = go_connect(path)
    for key in HOSTILE_KEYS:
        go_row(conn, key=key, status="pending")
    conn.close()
    with served(f"sqlite:{path}") as web:
        table = web.get("/tasks").text
        pages = {key: web.get(f"/tasks/{quote(key, safe='')}").text for key in HOSTILE_KEYS}
        good = web.get("/tasks/good").text
    for text in (table, good, *pages.values()):
        for raw in "\u202e\x1b\r\x00":
            assert raw not in text, (raw, text[:300])
    cells = re.findall(r'<td class="key"><a href="[^"]+">([^<]*)</a>', table)
    assert sorted(cells) == sorted([*HOSTILE_KEYS.values(), "good"])
    for key, shown in HOSTILE_KEYS.items():
        assert f'<h1 class="key">{html.escape(shown)}</h1>' in pages[key]
        assert f"<title>{html.escape(shown)} · ledger</title>" in pages[key]
    assert "x\\u202ey\\u001bz" in good  # the payload too (JSON escapes ESC itself)


def test_a_client_that_resets_the_connection_leaves_stderr_quiet(tmp_path: Path) -> None:
    """A client gone before its answer (RST) is nobody's error: no traceback,
    no 500 written to the dead socket, not even a line. A store of a few
    thousand tasks makes the graph slow enough that each reset lands first."""
    path = tmp_path / "jobs.db"
    lines = "".join(json.dumps({"key": f"k{i:04}"}) + "\n" for i in range(3000))
    (tmp_path / "jobs.jsonl").write_text(lines)
    done = run_ledger(f"sqlite:{path}", "admit", "--batch", str(tmp_path / "jobs.jsonl"))
    assert done.returncode == 0, done.stderr
    with served(f"sqlite:{path}") as web:
        for _ in range(5):
            s = socket.create_connection((web.host, web.port), timeout=30)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.sendall(b"GET /api/graph HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            s.close()
        # Served after the five (one store read at a time): it still answers.
        assert web.get("/api/graph").status == 200
        assert web.get("/api/stats").status == 200
    assert web.stderr == ""


def raw_reply(host: str, port: int, request: bytes) -> tuple[str, dict[str, str]]:
    """The status line and headers of the answer to `request` sent as is."""
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
    return head[0], headers


def test_the_standard_librarys_own_errors_carry_the_security_headers(go_store: str) -> None:
    """The answers `http.server` gives before our code runs have the headers
    of every other response, with a status line: none goes out as HTTP/0.9,
    a bare body; an HTTP/0.9 request (which would get one) is refused."""
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(120))
    requests = {
        "414": b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "431": b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + many + b"\r\n",
        "505": b"GET / HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
        "400": b"BAD\r\n\r\n",
        "400 ": b"GET / HTTP/1.x\r\n\r\n",
        "505 ": b"GET /\r\n\r\n",  # HTTP/0.9
    }
    with served(go_store) as web:
        for code, request in requests.items():
            status, headers = raw_reply(web.host, web.port, request)
            assert status.startswith(f"HTTP/1.1 {code.strip()} "), (code, status[:100])
            assert "default-src 'none'" in headers["Content-Security-Policy"], code
            assert headers["X-Content-Type-Options"] == "nosniff", code
            assert headers["Referrer-Policy"] == "no-referrer", code


@pytest.mark.parametrize("token", ["tok ", " tok", "t\u00f6k", "a\tb", "tok\n"])
def test_a_token_no_bearer_header_can_carry_is_refused(go_store: str, token: str) -> None:
    for done in (
        run_ledger(go_store, "serve", "--bind", "127.0.0.1:0", "--token", token, timeout=30),
        run_ledger(go_store, "serve", "--bind", "127.0.0.1:0", timeout=30, LEDGER_TOKEN=token),
    ):
        assert done.returncode == 2
        assert done.stderr == (
            "ledger: the token must be printable ASCII without leading or trailing spaces\n"
        )


def test_a_wildcard_bind_prints_a_url_a_browser_opens(go_store: str) -> None:
    with served(go_store, "--bind", "0.0.0.0:0", "--token", "t0k") as web:
        assert web.proc.stdout is not None
        note = web.proc.stdout.readline()
        assert note.startswith("listening on every interface (0.0.0.0)")
        got = web.get("/api/tasks", {"Authorization": "Bearer t0k"})
        assert got.status == 200


def test_a_page_of_zero_rows_is_refused(go_store: str) -> None:
    with served(go_store) as web:
        got = web.get("/api/tasks?limit=0")
        assert got.status == 400
        assert got.json()["error"]["message"] == "limit is 1 to 1000, not 0"
        assert web.get("/tasks?limit=0").status == 400
        assert web.get("/api/tasks?limit=1000").status == 200


@pytest.mark.parametrize("line", [b"GET /\r\n", b"GET /api/stats\r\n", b"GET /\r\n\r\n"])
def test_an_http09_request_is_refused_at_once(go_store: str, line: bytes) -> None:
    """The request line alone, the connection held open: the standard library
    waited for headers an HTTP/0.9 client never sends, so `GET /` got no
    answer at all; each is answered 505 at once, and the connection closed.
    The `Server` header is the name alone, no trailing space."""
    with served(go_store) as web:
        status, headers = raw_reply(web.host, web.port, line)
        assert status.startswith("HTTP/1.1 505 "), status
        assert headers["Connection"] == "close"
        assert headers["Server"] == "ledger-serve"
        assert web.get("/api/stats").headers["Server"] == "ledger-serve"


def test_a_request_names_exactly_one_host(go_store: str) -> None:
    """HTTP/1.1 without Host, or any request with two, is 400 (RFC 9112 §3.2),
    token or none; HTTP/1.0 without Host (no browser sends that) is served."""
    two = b"GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n"
    for args in ((), ("--token", "t0ken")):
        with served(go_store, *args) as web:
            status, _ = raw_reply(web.host, web.port, b"GET /api/stats HTTP/1.1\r\n\r\n")
            assert status.startswith("HTTP/1.1 400 "), status
            assert raw_reply(web.host, web.port, two)[0].startswith("HTTP/1.1 400 ")
            status, _ = raw_reply(web.host, web.port, b"GET /api/stats HTTP/1.0\r\n\r\n")
            assert status.startswith("HTTP/1.1 200 " if not args else "HTTP/1.1 401 "), status
