"""`ledger serve [--bind HOST:PORT] [--token T]`: the read-only web view (ledger_cli/web)."""

from __future__ import annotations

import os

from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError

DEFAULT_BIND = "127.0.0.1:8765"


def parse_bind(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or `:PORT` (loopback); port 0 lets the system choose."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise InputError(f"ledger: --bind wants HOST:PORT, not {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "127.0.0.1", int(port)


def serve(settings: Settings, bind: str | None = None, token: str | None = None) -> int:
    from ledger_cli.web.auth import Guard, is_loopback

    host, port = parse_bind(bind if bind is not None else DEFAULT_BIND)
    if token is None:
        token = os.environ.get("LEDGER_TOKEN") or None
    if token is not None and not token.strip():
        raise InputError("ledger: the token is empty")
    if token is not None and not (
        token.isascii() and token.isprintable() and token == token.strip()
    ):
        # `Authorization: Bearer T` could never carry it: refuse it now.
        raise InputError(
            "ledger: the token must be printable ASCII without leading or trailing spaces"
        )
    if token is None and not is_loopback(host):
        raise InputError(
            f"ledger: serve on {host}, not a loopback address, needs --token or LEDGER_TOKEN"
            " (anyone who can reach it could read every task)"
        )
    from ledger_cli.web.api import Reader
    from ledger_cli.web.server import Server, serve_forever

    with Session(settings, reads=True) as s:
        try:
            server = Server((host, port), Reader(s), Guard(token))
        except OSError as exc:
            raise InputError(f"ledger: cannot listen on {host}:{port}: {exc.strerror}") from None
        bound, bound_port = server.server_address[:2]
        bound_host = bound.decode() if isinstance(bound, bytes) else bound
        note = ""
        if bound_host in ("0.0.0.0", "::"):
            # No browser opens http://0.0.0.0/: the URL names this machine's
            # loopback, and a second line says where else it answers.
            note = f"listening on every interface ({bound_host}), port {bound_port}"
            bound_host = "127.0.0.1" if bound_host == "0.0.0.0" else "::1"
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        serve_forever(server, f"http://{shown}:{bound_port}/", note)
    return 0
