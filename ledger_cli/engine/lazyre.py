"""A regular expression compiled at its first use, so that importing the
module that defines it does not import `re`.

`import re` costs a hot command's start-up about 1.6 ms (with `enum` and
`functools` more, docs/performance.md), and most of the patterns of the hot
path serve only a rare case (a record that is not canonical, a file name
that is not a digest). `Lazy(r"...")` stands where `re.compile(r"...")`
stood; the first call of one of its methods compiles the pattern and binds
the compiled pattern's methods in its place, so later calls cost what a
compiled pattern's do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from typing import Any


class Lazy:
    """`re.compile(pattern, flags)`, done at the first call of a method."""

    fullmatch: Callable[..., re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    search: Callable[..., re.Match[str] | None]
    sub: Callable[..., str]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags

    def compiled(self) -> re.Pattern[str]:
        import re

        compiled = re.compile(self.pattern, self.flags)
        for name in ("fullmatch", "match", "search", "sub", "finditer", "split"):
            setattr(self, name, getattr(compiled, name))
        return compiled

    def __getattr__(self, name: str) -> Any:
        # Only reached before the first compile (later, the instance has them).
        if name in ("fullmatch", "match", "search", "sub", "finditer", "split"):
            return getattr(self.compiled(), name)
        raise AttributeError(name)
