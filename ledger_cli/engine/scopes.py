"""`contextmanager`, `suppress` and `wraps` as contextlib and functools give
them, without importing either.

`import contextlib` imports functools and collections: about 3 ms of a hot
command's start-up (docs/performance.md, bench_startup.py), for three small
helpers. These behave as the standard ones do for everything this package
uses them for (tests/test_scopes.py runs the same cases through both):
the generator's exception handling follows contextlib's
`_GeneratorContextManager.__exit__` line by line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from types import TracebackType
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    T = TypeVar("T")
    F = TypeVar("F", bound=Callable[..., object])

_WRAPPED = ("__module__", "__name__", "__qualname__", "__doc__")


def wraps(wrapped: Callable[..., object]) -> Callable[[F], F]:
    """`functools.wraps(wrapped)`: the wrapper takes the name, the docstring,
    the attributes and `__wrapped__` of the function it wraps."""

    def decorate(wrapper: F) -> F:
        for name in _WRAPPED:
            if hasattr(wrapped, name):
                setattr(wrapper, name, getattr(wrapped, name))
        wrapper.__dict__.update(getattr(wrapped, "__dict__", {}))
        wrapper.__wrapped__ = wrapped  # type: ignore[attr-defined]
        return wrapper

    return decorate


class _GeneratorScope:
    """One `with` over a generator that yields once (contextlib's own logic)."""

    __slots__ = ("gen",)

    def __init__(self, gen: Iterator[object]) -> None:
        self.gen = gen

    def __enter__(self) -> object:
        try:
            return next(self.gen)
        except StopIteration:
            raise RuntimeError("generator didn't yield") from None

    def __exit__(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if typ is None:
            try:
                next(self.gen)
            except StopIteration:
                return False
            raise RuntimeError("generator didn't stop")
        if value is None:
            value = typ()
        try:
            self.gen.throw(value)  # type: ignore[attr-defined]
        except StopIteration as exc:
            # The generator suppressed the exception (or it was a StopIteration).
            return exc is not value
        except RuntimeError as exc:
            if exc is value:
                exc.__traceback__ = traceback
                return False
            if isinstance(value, StopIteration) and exc.__cause__ is value:
                value.__traceback__ = traceback
                return False
            raise
        except BaseException as exc:
            if exc is not value:
                raise
            exc.__traceback__ = traceback
            return False
        raise RuntimeError("generator didn't stop after throw()")


def contextmanager(func: Callable[P, Iterator[T]]) -> Callable[P, AbstractContextManager[T]]:
    """`contextlib.contextmanager`."""

    def scope(*args: P.args, **kwargs: P.kwargs) -> AbstractContextManager[T]:
        return _GeneratorScope(func(*args, **kwargs))  # type: ignore[return-value]

    return wraps(func)(scope)


class suppress:
    """`contextlib.suppress(*exceptions)`."""

    __slots__ = ("exceptions",)

    def __init__(self, *exceptions: type[BaseException]) -> None:
        self.exceptions = exceptions

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return typ is not None and issubclass(typ, self.exceptions)
