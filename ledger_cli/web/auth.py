"""Who may read: the bind rule, the Host rule, the bearer token and the session cookie.

A bind that is not loopback needs a token (`--token` or LEDGER_TOKEN). With a
token, a request passes with `Authorization: Bearer T`, or with the session
cookie that visiting any page with `?token=T` sets. The cookie holds an HMAC of
the token, not the token itself; both are compared with `hmac.compare_digest`.

Without a token (a loopback bind) a request must name a loopback host in its
`Host` header: a web page the user visits can point a host name of its own at
127.0.0.1 (DNS rebinding) and read the view through the user's browser, which
then sends that name as Host.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from http.cookies import CookieError, SimpleCookie

COOKIE = "ledger_session"


def is_loopback(host: str) -> bool:
    """True for `localhost` and the loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def loopback_host(value: str) -> bool:
    """True for a `Host` value `NAME`, `NAME:PORT`, `[V6]` or `[V6]:PORT` whose
    name is loopback (is_loopback) and whose port is digits. Anything else
    (`127.0.0.1:80@evil.example`, `localhost:x`, a bare `::1`) is refused."""
    if value.startswith("["):
        end = value.find("]")
        name, rest = (value[1:end], value[end + 1 :]) if end > 0 else ("", "")
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
    if rest and not (rest[0] == ":" and rest[1:].isascii() and rest[1:].isdigit()):
        return False
    return bool(name) and is_loopback(name)


class Guard:
    """The token check of every request (no token: every request passes)."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self._session = (
            hmac.new(token.encode(), b"ledger serve session", hashlib.sha256).hexdigest()
            if token
            else ""
        )

    @property
    def open(self) -> bool:
        return not self.token

    def host_ok(self, host: str | None) -> bool:
        """Whether a request's one `Host` header may be served: any with a
        token; without one, a loopback name or address with an optional port
        of digits and nothing else, or none at all (an HTTP/1.0 client, never
        a browser; server.py answers an HTTP/1.1 request without one 400)."""
        if not self.open or host is None:
            return True
        return loopback_host(host.strip())

    def session_cookie(self) -> str:
        """The Set-Cookie value a right `?token=` earns."""
        return f"{COOKIE}={self._session}; Path=/; HttpOnly; SameSite=Strict"

    def token_ok(self, given: str) -> bool:
        assert self.token is not None
        # `given` may hold lone surrogates (a query's bytes that are not UTF-8).
        return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self.token.encode())

    def allows(self, authorization: str | None, cookie: str | None) -> bool:
        """True when the bearer token or the session cookie is right."""
        if self.open:
            return True
        if authorization is not None:
            scheme, _, given = authorization.partition(" ")
            if scheme.lower() == "bearer" and self.token_ok(given.strip()):
                return True
        if cookie:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(cookie)
            except CookieError:
                return False
            morsel = jar.get(COOKIE)
            if morsel is not None and hmac.compare_digest(
                morsel.value.encode(), self._session.encode()
            ):
                return True
        return False
