"""What the schema's generated fast paths share (``fastvalid``, ``listtype``, ``celbatch``'s
selection): a Python function per schema node (or batch plan node), written once per node and
named after it, constants handed over by name, the whole compiled at once."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any


class NodeCodegen(ABC):
    prefix = "_n"  # the generated functions' names: _n0, _n1, ...

    def __init__(self, names: Mapping[str, Any]) -> None:
        self.names: dict[str, Any] = dict(names)  # the generated code's globals
        self.lines: list[str] = []
        self.functions: dict[int, str] = {}  # id(node) -> its function's name

    @abstractmethod
    def define(self, node: Any, name: str) -> list[str]:
        """The source of the function ``name`` for ``node``."""

    def function(self, node: Any) -> str:
        """The name of ``node``'s function, written on first use (a schema shared by several
        places, or a recursive one, gets one function)."""
        name = self.functions.get(id(node))
        if name is None:
            name = self.functions[id(node)] = f"{self.prefix}{len(self.functions)}"
            self.lines.extend(self.define(node, name))
        return name

    def value(self, value: Any) -> str:
        """A name the generated code reads ``value`` by."""
        name = f"_k{len(self.names)}"
        self.names[name] = value
        return name

    def source(self) -> str:
        return "\n".join(self.lines)

    def build(self, root: Any, filename: str) -> Callable[..., Any]:
        """``root``'s function, compiled; raises RecursionError, SyntaxError or MemoryError
        where Python cannot write or compile it (a schema nested past its limits)."""
        entry = self.function(root)
        namespace = dict(self.names)
        exec(compile(self.source(), filename, "exec"), namespace)  # noqa: S102  (source generated here)
        return namespace[entry]


def surely(function: Callable[[Any], Any]) -> Callable[[Any], bool]:
    """A generated predicate as callers use it: True only when it says so, False where it is
    unsure, nesting past the stack included (the walk then answers)."""

    def passes(value: Any) -> bool:
        try:
            return function(value) is True
        except RecursionError:
            return False

    return passes
