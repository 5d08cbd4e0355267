"""engine/scopes.py behaves as contextlib and functools do: the same cases
run through both, and what comes out (values, exceptions, suppression,
cleanup order, names) must be the same."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ledger_cli.engine import scopes


class Boom(Exception):
    pass


def _generators(log: list[str]) -> dict[str, Callable[[], Iterator[Any]]]:
    def plain() -> Iterator[int]:
        log.append("enter")
        try:
            yield 1
        finally:
            log.append("exit")

    def swallows() -> Iterator[None]:
        try:
            yield
        except Boom:
            log.append("swallowed")

    def translates() -> Iterator[None]:
        try:
            yield
        except Boom as exc:
            raise KeyError("other") from exc

    def reraises() -> Iterator[None]:
        try:
            yield
        except Boom:
            log.append("seen")
            raise

    def no_yield() -> Iterator[None]:
        return
        yield

    def two_yields() -> Iterator[None]:
        yield
        yield

    def keeps_going() -> Iterator[None]:
        try:  # noqa: SIM105 (a try over a yield is the case under test)
            yield
        except Boom:
            pass
        yield

    return {
        name: fn
        for name, fn in locals().items()
        if callable(fn) and name not in ("log",)  # the generator functions
    }


_BODIES: dict[str, Callable[[], object]] = {
    "returns": lambda: None,
    "raises": lambda: (_ for _ in ()).throw(Boom("body")),
    "stop_iteration": lambda: (_ for _ in ()).throw(StopIteration("x")),
    "runtime_error": lambda: (_ for _ in ()).throw(RuntimeError("rt")),
    "keyboard": lambda: (_ for _ in ()).throw(KeyboardInterrupt()),
}


def _run(
    make: Callable[[Callable[..., Iterator[Any]]], Callable[[], Any]], gen: str, body: str
) -> Any:
    log: list[str] = []
    manager = make(_generators(log)[gen])
    try:
        with manager() as value:
            log.append(f"body got {value!r}")
            _BODIES[body]()
        log.append("after")
    except BaseException as exc:
        log.append(f"raised {type(exc).__name__}: {exc}")
        if exc.__cause__ is not None:
            log.append(f"cause {type(exc.__cause__).__name__}")
    return log


@pytest.mark.parametrize("body", sorted(_BODIES))
@pytest.mark.parametrize("gen", sorted(_generators([])))
def test_contextmanager_is_contextlibs(gen: str, body: str) -> None:
    assert _run(scopes.contextmanager, gen, body) == _run(contextlib.contextmanager, gen, body)


@pytest.mark.parametrize(
    ("kinds", "raised"),
    [((OSError,), FileNotFoundError), ((OSError, ValueError), ValueError), ((OSError,), KeyError),
     ((), OSError), ((Exception,), None)],
)  # fmt: skip
def test_suppress_is_contextlibs(
    kinds: tuple[type[BaseException], ...], raised: type | None
) -> None:
    def outcome(suppress: Any) -> str:
        try:
            with suppress(*kinds):
                if raised is not None:
                    raise raised("x")
            return "passed"
        except BaseException as exc:
            return type(exc).__name__

    assert outcome(scopes.suppress) == outcome(contextlib.suppress)


def test_wraps_is_functools() -> None:
    def original(a: int) -> int:
        """The doc."""
        return a

    original.marker = 7  # type: ignore[attr-defined]

    def ours(*args: Any) -> Any:
        return original(*args)

    def theirs(*args: Any) -> Any:
        return original(*args)

    scopes.wraps(original)(ours)
    functools.wraps(original)(theirs)
    for name in ("__name__", "__qualname__", "__doc__", "__module__", "__wrapped__", "marker"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert scopes.contextmanager(_generators([])["plain"]).__name__ == "plain"
