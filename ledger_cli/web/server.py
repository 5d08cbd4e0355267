"""The HTTP side of `ledger serve`: the standard library's `ThreadingHTTPServer`.

Why the standard library and not a WSGI server: the view is read-only, serves
one on-call person or a handful, and reads one store through one lock, so a
thread per request is plenty; it adds no dependency to install or to keep off
the hot commands' start-up. What `http.server`'s documentation warns about
(it does only basic security checks) is covered here: GET and HEAD only (any
other method is 405, once the Host rule and the token have let the request
through: else 403 or 401, whatever the method), no file system path is ever
served (the two static files are package data read by name), every page is
escaped, the headers below are sent on every response (`end_headers`: the
standard library's own error answers too; HTTP/0.9, whose answer has no
headers, is refused), a bind that is not loopback needs a token, and without
a token a request must name a loopback Host (auth.py). A client that hangs
up mid-answer is no error: nothing is printed (`Server.handle_error`).
"""

from __future__ import annotations

import json
import socket
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from ledger_cli.cli import output
from ledger_cli.web import pages
from ledger_cli.web.api import MAX_PAGE, PAGE, STATUSES, Reader
from ledger_cli.web.auth import Guard

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


class BadRequest(Exception):
    """A query parameter that does not parse: 400 with its message."""


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], reader: Reader, guard: Guard) -> None:
        self.reader = reader
        self.guard = guard
        self.static = {
            name: resources.files("ledger_cli.web").joinpath("static", name).read_bytes()
            for name in STATIC
        }
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone mid-request (a reset, a closed pipe, a timeout) is no
        error of the server's: nothing is printed. Anything else is one
        `ledger: serve: ...` line, never the standard library's traceback."""
        exc = sys.exc_info()[1]
        if exc is None or isinstance(exc, (ConnectionError, TimeoutError)):
            return
        output.diag(output.within("serve", _one_line(exc)))


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = "ledger-serve"
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        """The `Server` header: the name alone (the standard library adds a
        space and the interpreter's version)."""
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the access log is not the on-call person's concern here."""

    def __getattr__(self, name: str) -> Any:
        # Any method but GET and HEAD (PUT, DELETE, made-up ones) is 405, not 501.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        # A body it sent is not read: close rather than parse it as a request.
        self.close_connection = True
        # The Host rule and the token first: a caller without them learns
        # nothing of what the server does, not even which methods it takes.
        if self._refused_host(head=False) or self._refused_unauthenticated(head=False):
            return
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED,
            b"405 read-only: GET or HEAD only\n",
            "text/plain; charset=utf-8",
            {"Allow": "GET, HEAD", "Connection": "close"},
        )

    def parse_request(self) -> bool:
        # HTTP/0.9 (`GET /`, no version) is refused as its line is read: its
        # answer would be a bare body, no header at all, and the standard
        # library would first wait for headers, which such a client never sends.
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = line.split()
        if len(words) == 2:
            self.requestline, self.command, self.path = line, words[0], words[1]
            self.request_version = "HTTP/0.9"  # send_error answers as HTTP/1.0
            self.close_connection = True
            self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/0.9 is not served")
            return False
        return super().parse_request()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # An error found before the request line's version is read (400, 505)
        # would go out as HTTP/0.9: no status line, no headers. Not here.
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        super().send_error(code, message, explain)

    def end_headers(self) -> None:
        # Here, not in _send: the standard library's own error responses
        # (send_error: 400, 414, 431, 505) carry them too.
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    # -- the response ---------------------------------------------------------

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        ctype: str,
        extra: dict[str, str] | None = None,
        head: bool = False,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head and self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, text: str, status: HTTPStatus = HTTPStatus.OK, head: bool = False) -> None:
        self._send(status, text.encode(), "text/html; charset=utf-8", head=head)

    def _json(self, text: str, extra: dict[str, str] | None = None, head: bool = False) -> None:
        self._send(HTTPStatus.OK, text.encode() + b"\n", "application/json", extra, head)

    def _error(self, status: HTTPStatus, text: str, api: bool, head: bool) -> None:
        if api:
            doc = {"error": {"code": status.phrase.lower().replace(" ", "_"), "message": text}}
            body = (json.dumps(doc) + "\n").encode()
            self._send(status, body, "application/json", head=head)
        else:
            page = pages.message(f"{status.value} {status.phrase}", text)
            self._send(status, page.encode(), "text/html; charset=utf-8", head=head)

    # -- the guard (auth.py) ------------------------------------------------------

    def _refused_host(self, head: bool) -> bool:
        """400 or 403 (and True) when the Host rule refuses the request: more
        than one Host header, or none in HTTP/1.1 (RFC 9112 §3.2), is 400."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1 or (not hosts and self.request_version != "HTTP/1.0"):
            self.close_connection = True
            self._send(
                HTTPStatus.BAD_REQUEST,
                b"400 a request names one Host header (HTTP/1.1 needs it)\n",
                "text/plain; charset=utf-8",
                {"Connection": "close"},
                head,
            )
            return True
        if self.server.guard.host_ok(hosts[0] if hosts else None):
            return False
        self._send(
            HTTPStatus.FORBIDDEN,
            b"403 the Host header names no loopback address (serve with --token to allow it)\n",
            "text/plain; charset=utf-8",
            None,
            head,
        )
        return True

    def _refused_unauthenticated(self, head: bool) -> bool:
        """401 (and True) when a token is needed and the request has none right."""
        if self.server.guard.allows(self.headers.get("Authorization"), self.headers.get("Cookie")):
            return False
        self._send(
            HTTPStatus.UNAUTHORIZED,
            b"401 a token is needed\n",
            "text/plain; charset=utf-8",
            {"WWW-Authenticate": "Bearer"},
            head,
        )
        return True

    # -- routing --------------------------------------------------------------

    def _serve(self, head: bool) -> None:
        # The request line's bytes (read as Latin-1) as UTF-8, each byte that
        # is not UTF-8 a lone surrogate, as the command line reads an argument:
        # a key the Go service wrote with such bytes names its own page.
        url = urlsplit(self.path.encode("latin-1").decode("utf-8", "surrogateescape"))
        query = parse_qs(url.query, keep_blank_values=True, errors="surrogateescape")
        segments = url.path.split("/")[1:]  # raw: a key's "/" comes as %2F
        api = segments[:1] == ["api"]
        guard = self.server.guard
        if self._refused_host(head):
            return
        if not guard.open and "token" in query and guard.token_ok(query["token"][-1]):
            rest = [(k, v) for k, vs in query.items() if k != "token" for v in vs]
            # The path as it came (Latin-1 text: its bytes go back unchanged).
            where = urlsplit(self.path).path + ("?" + _urlencode(rest) if rest else "")
            if not where.startswith("/") or where[1:2] in ("/", "\\"):
                where = "/"  # "//host" or "/\\host" would leave the site
            self._send(
                HTTPStatus.SEE_OTHER,
                b"",
                "text/plain",
                {"Location": where, "Set-Cookie": guard.session_cookie()},
                head,
            )
            return
        if self._refused_unauthenticated(head):
            return
        try:
            self._route(segments, query, head)
        except (ConnectionError, TimeoutError):
            raise  # the client is gone: no response to send (Server.handle_error)
        except BadRequest as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc), api, head)
        except Exception as exc:  # a store error: one line, the server stays up
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, _one_line(exc), api, head)
            # The query string too (its token left out), escaped as every line is.
            asked = [(k, v) for k, vs in query.items() if k != "token" for v in vs]
            where = url.path + ("?" + _urlencode(asked) if asked else "")
            output.diag(output.within(f"serve: {self.command} {where}", _one_line(exc)))

    def _route(self, seg: list[str], query: dict[str, list[str]], head: bool) -> None:
        reader = self.server.reader
        match seg:
            case [""]:
                self._html(pages.index(None, reader.graph()[1]), head=head)  # counts: app.js
            case ["tasks"] | ["tasks", ""]:
                statuses, prefix, after, limit = _filters(query)
                page = reader.page(statuses, prefix, after, limit, _one(query, "queue"))
                self._html(pages.tasks(page, statuses, prefix, limit), head=head)
            case ["tasks", key] if key:
                self._task_page(_key(key), head)
            case ["task"]:  # /task?key=K: any key, "." and ".." too (pages.task_href)
                self._task_page(_one(query, "key"), head)
            case ["static", name] if name in STATIC:
                self._send(HTTPStatus.OK, self.server.static[name], STATIC[name], head=head)
            case ["api", "stats"]:
                self._json(output.dumps(reader.stats()), head=head)
            case ["api", "graph"]:
                self._json(output.dumps(reader.graph(draw=False)[0]), head=head)
            case ["api", "tasks"]:
                self._api_tasks(query, head)
            case ["api", "tasks", key]:
                self._api_task(_key(key), head)
            case ["api", "task"]:  # the key in the query, as /task?key=K
                self._api_task(_one(query, "key"), head)
            case ["api", "tasks", key, "output"]:
                self._api_output(_key(key), query, head)
            case ["api", "task", "output"]:
                self._api_output(_one(query, "key"), query, head)
            case _:
                self._error(HTTPStatus.NOT_FOUND, "no such page", seg[:1] == ["api"], head)

    def _api_task(self, key: str, head: bool) -> None:
        doc = self.server.reader.task_json(key) if key else None
        if doc is None:
            self._error(HTTPStatus.NOT_FOUND, "no such key", True, head)
            return
        self._json(doc, head=head)

    def _api_output(self, key: str, query: dict[str, list[str]], head: bool) -> None:
        n = _uint(query, "attempt")
        since = _uint(query, "since") or 0
        out = self.server.reader.output(key, n, since) if key else None
        if out is None:
            self._error(HTTPStatus.NOT_FOUND, "no such key or attempt", True, head)
            return
        self._json(output.dumps(out), head=head)

    def _task_page(self, key: str, head: bool) -> None:
        reader = self.server.reader
        found = reader.task(key) if key else None
        if found is None:
            self._error(HTTPStatus.NOT_FOUND, "no such key", False, head)
            return
        rec, atts, history = found
        out = reader.output(key, None, 0) if atts else None
        self._html(pages.task(rec, atts, history, out), head=head)

    def _api_tasks(self, query: dict[str, list[str]], head: bool) -> None:
        statuses, prefix, after, limit = _filters(query)
        page = self.server.reader.page(statuses, prefix, after, limit, _one(query, "queue"))
        extra = {}
        if page.next_after is not None:
            q: list[tuple[str, str]] = [("status", st) for st in sorted(statuses)]
            q += [("prefix", prefix)] if prefix else []
            q += [("after", page.next_after), ("limit", str(limit))]
            extra["Link"] = f'</api/tasks?{_urlencode(q)}>; rel="next"'
        body = "[" + ",".join(str(output.record(r)) for r in page.records) + "]"
        self._json(body, extra, head)


def _key(segment: str) -> str:
    """A key from its path segment: percent-escapes of bytes that are not
    UTF-8 (pages.task_href) as lone surrogates, the key's bytes as stored."""
    return unquote(segment, errors="surrogateescape")


def _urlencode(query: list[tuple[str, str]]) -> str:
    """`urlencode`, a key's lone surrogates back to the bytes they stand for."""
    return urlencode(query, encoding="utf-8", errors="surrogateescape")


def _one(query: dict[str, list[str]], name: str) -> str:
    values = query.get(name)
    return values[-1] if values else ""


def _uint(query: dict[str, list[str]], name: str) -> int | None:
    text = _one(query, name)
    if not text:
        return None
    if not text.isascii() or not text.isdigit():
        raise BadRequest(f"{name} must be a whole number, not {text!r}")
    return int(text)


def _filters(query: dict[str, list[str]]) -> tuple[frozenset[str], str, str, int]:
    wanted = {st for v in query.get("status", ()) for st in v.split(",") if st}
    bad = wanted - set(STATUSES)
    if bad:
        raise BadRequest(f"unknown status {sorted(bad)[0]!r} (one of {', '.join(STATUSES)})")
    limit = _uint(query, "limit")
    if limit is None:
        limit = PAGE
    elif not 1 <= limit <= MAX_PAGE:  # a page of none would have no next cursor
        raise BadRequest(f"limit is 1 to {MAX_PAGE}, not {limit}")
    return frozenset(wanted), _one(query, "prefix"), _one(query, "after"), limit


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def serve_forever(server: Server, url: str, note: str = "") -> None:
    """Print the URL (the first line, for scripts and tests) and `note` if
    any, then serve until interrupted."""
    sys.stdout.write(f"{url}\n{note}\n" if note else f"{url}\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
