"""A PostgreSQL URL's settings that no connection could use, told before
connecting: a usage error (`StoreURLError`, exit 2: the README's exit-code
table), not an outage blaming the server (exit 9, "check that the server is
running").

libpq parses the URL's syntax (`conninfo_to_dict`: an unknown parameter, a
bracket left open) but checks a setting's value only as it connects, after
psycopg has resolved the host names: `check` reads the common ones first
(the ports, `sslmode`, `gssencmode`, `channel_binding`, `connect_timeout`),
and `refused_setting` tells libpq's answer to any other (`invalid
target_session_attrs value: "x"`) from a failed connection. Nothing here
imports the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

CHOICES: dict[str, tuple[str, ...]] = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
}
"""Settings whose values libpq has taken from this fixed list since PostgreSQL 13."""

_REFUSALS = (
    "invalid port number",
    "invalid integer value",
    "could not match ",
    "bad value for connect_timeout",
)
"""libpq's (and psycopg's) words for a setting's value it refuses before it connects."""


def _integer(text: str) -> int | None:
    """`text` as libpq's `parse_int_param` reads it (spaces around an optional
    sign and ASCII digits), else None."""
    body = text.strip()
    digits = body[1:] if body[:1] in ("+", "-") else body
    if not (digits.isascii() and digits.isdigit()):
        return None
    return int(body)


def check(params: Mapping[str, object]) -> str | None:
    """What libpq would refuse of `params` (`conninfo_to_dict`'s) before
    connecting, in its own words; None when they pass this check."""
    port = params.get("port")
    if isinstance(port, str):
        for part in port.split(","):
            if part == "":
                continue  # the default port, for that host
            number = _integer(part)
            if number is None:
                return f'invalid integer value "{part}" for connection option "port"'
            if not 1 <= number <= 65535:
                return f'invalid port number: "{part}" (a port is 1 to 65535)'
    for name, allowed in CHOICES.items():
        value = params.get(name)
        if isinstance(value, str) and value not in allowed:
            return f'invalid {name} value: "{value}" (one of {", ".join(allowed)})'
    timeout = params.get("connect_timeout")
    if isinstance(timeout, str):
        try:
            float(timeout)
        except ValueError:
            return f'invalid connect_timeout value: "{timeout}" (a number of seconds)'
    return None


def refused_setting(text: str) -> bool:
    """Whether a failed connection's message is libpq refusing a setting's
    value (from the URL or a PG* environment variable), not the server."""
    low = text.lower()
    if any(words in low for words in _REFUSALS):
        return True
    at = low.find("invalid ")
    return at != -1 and " value: " in low[at:]
