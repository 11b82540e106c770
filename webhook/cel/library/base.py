"""Shared vocabulary of the library modules."""

from __future__ import annotations

import datetime
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar


class LibraryError(Exception):
    """A CEL evaluation error raised by a library function; the message is Kubernetes'."""


@dataclass(frozen=True)
class Overload:
    """One overload of a library function, as Kubernetes declares it.

    ``params``/``result`` are CEL type names as cel-go prints them (``string``,
    ``list(int)``, ``kubernetes.Quantity``, ``optional_type(list(string))``; ``A`` is a
    type parameter). ``member`` functions take the receiver as first parameter.
    ``pure`` overloads are folded at compile time when every argument is a constant.
    """

    function: str
    id: str
    params: tuple[str, ...]
    result: str
    impl: Callable[..., Any]
    member: bool = False
    pure: bool = True


class OpaqueValue(ABC):
    """A library value with its own CEL type (``type(quantity("1")) == kubernetes.Quantity``).

    ``key`` is a canonical string: two values are equal in CEL exactly when their keys are
    equal, and ``from_key`` rebuilds the value from it (that is how the values cross into
    and out of the C++ runtime).
    """

    cel_type: ClassVar[str]
    __slots__ = ()

    @property
    @abstractmethod
    def key(self) -> str:
        """The canonical form."""

    @classmethod
    @abstractmethod
    def from_key(cls, key: str) -> OpaqueValue:
        """The value whose canonical form is ``key``."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.key == self.key

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.key))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r})"


class OptionalValue:
    """A CEL ``optional_type`` value: the one model of an optional everywhere a value is plain
    Python (the libraries, the native route, cel-go's count, celpy, an engine's result).
    Immutable by convention; a class with slots, as the native route makes one per ``.?``."""

    __slots__ = ("value", "has_value")

    def __init__(self, value: Any = None, has_value: bool = False) -> None:
        self.value = value
        self.has_value = has_value

    @classmethod
    def of(cls, value: Any) -> OptionalValue:
        return cls(value, True)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not OptionalValue:
            return NotImplemented
        return (self.value, self.has_value) == (other.value, other.has_value)

    def __hash__(self) -> int:
        return hash((self.value, self.has_value))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.has_value else "optional.none()"


NONE = OptionalValue()


def optional_entry(container: Any, key: Any) -> OptionalValue | None:
    """``container.?key`` / ``container[?key]`` on plain values: an optional of the entry (none
    when it is absent, or when ``container`` is an optional none); None where the container or
    the key is of another kind (the caller decides what cel-go would answer)."""
    if type(container) is OptionalValue:
        if not container.has_value:
            return NONE
        container = container.value
    kind = type(container)
    if kind is dict and type(key) is str:
        return OptionalValue(container[key], True) if key in container else NONE
    if kind is list and type(key) is int:
        return OptionalValue(container[key], True) if 0 <= key < len(container) else NONE
    return None


_TYPE_NAMES = {bool: "bool", int: "int", float: "double", str: "string", bytes: "bytes", list: "list", dict: "map",
               type(None): "null_type", datetime.datetime: "google.protobuf.Timestamp",
               datetime.timedelta: "google.protobuf.Duration", OptionalValue: "optional_type"}


def cel_type_name(value: Any) -> str:
    """The CEL type name of a plain Python value, as cel-go's ``TypeName()`` prints it."""
    if isinstance(value, OpaqueValue):
        return value.cel_type
    return _TYPE_NAMES.get(type(value), "dyn")


def no_such_overload(function: str, values: Any) -> str:
    """cel-go's failed dispatch of a guarded overload: the function and the runtime types."""
    return f"no such overload: {function}({', '.join(map(cel_type_name, values))})"
