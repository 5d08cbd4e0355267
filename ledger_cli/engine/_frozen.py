"""Frozen record classes that are dataclasses without importing `dataclasses` at start.

`import dataclasses` pulls in `inspect` (with `ast`, `dis`, `tokenize`…): about
half the interpreter's own start-up, paid by every `ledger claim` in a shell
loop. So the engine's value classes (`TaskState`, `Event`) are written out by
hand on top of `Frozen`: `__slots__` and `__match_args__` name the fields in
order, and `__init__` sets them. `Frozen` gives them what
`@dataclass(frozen=True, slots=True)` would: `==`, `hash`, `repr`, pickling,
`FrozenInstanceError` on assignment, and the dataclass metadata
(`__dataclass_fields__`, `__dataclass_params__`), built on first use from a twin
made by `dataclasses.make_dataclass` with the same fields and defaults. So
`dataclasses.is_dataclass`, `fields`, `replace`, `asdict` and `astuple` work on
them as on any frozen dataclass (`tests/test_frozen.py` compares them with
their twins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dataclasses import Field
    from typing import Any, ClassVar, Self

_METADATA = ("__dataclass_fields__", "__dataclass_params__")


class _Metadata:
    """Class attribute standing in for one dataclass metadata attribute until read."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, cls: type[Frozen]) -> Any:
        if "__match_args__" not in cls.__dict__:
            raise AttributeError(self.name)  # Frozen itself is no dataclass
        twin = _twin(cls)
        for name in _METADATA:
            setattr(cls, name, getattr(twin, name))  # replaces this descriptor
        return getattr(twin, self.name)


def _twin(cls: type[Frozen]) -> type:
    """The frozen dataclass `cls` stands for: same name, fields, order and defaults."""
    import dataclasses

    init = cls.__init__
    code = init.__code__
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    if names != cls.__match_args__:
        raise TypeError(f"{cls.__name__}.__init__ must take the fields in order: {names}")
    defaults: dict[str, Any] = dict(init.__kwdefaults__ or {})
    positional = code.co_varnames[1 : code.co_argcount]
    if init.__defaults__:
        defaults.update(zip(positional[-len(init.__defaults__) :], init.__defaults__, strict=True))
    annotations = init.__annotations__
    fields = [
        (name, annotations.get(name, "Any"))
        if name not in defaults
        else (name, annotations.get(name, "Any"), dataclasses.field(default=defaults[name]))
        for name in names
    ]
    twin = dataclasses.make_dataclass(cls.__name__, fields, frozen=True, slots=True)
    twin.__module__ = cls.__module__
    twin.__qualname__ = cls.__qualname__
    return twin


def _frozen_error(name: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")


class Frozen:
    """Base of the hand-written frozen dataclasses (see the module docstring)."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    else:
        __dataclass_fields__ = _Metadata("__dataclass_fields__")
        __dataclass_params__ = _Metadata("__dataclass_params__")

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self.__match_args__])

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` (as `dataclasses.replace`)."""
        values = {name: getattr(self, name) for name in self.__match_args__}
        for name in changes:
            if name not in values:
                raise TypeError(
                    f"{type(self).__name__}.__init__() got an unexpected keyword {name!r}"
                )
        values.update(changes)
        return type(self)(**values)

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen_error(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen_error(name)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), self._values())
