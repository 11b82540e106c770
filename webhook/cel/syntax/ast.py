"""cel-go's AST shape: node ids (cel-go's numbering), one class per expression kind, macros
already expanded into comprehensions, and a pre-order walk."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False, slots=True)
class Expr:
    id: int
    offset: int


@dataclass(eq=False, slots=True)
class Literal(Expr):
    kind: str            # int uint double string bytes bool null
    value: Any


@dataclass(eq=False, slots=True)
class Ident(Expr):
    name: str


@dataclass(eq=False, slots=True)
class Select(Expr):
    operand: Expr
    field: str
    test_only: bool = False
    optional: bool = False


@dataclass(eq=False, slots=True)
class Call(Expr):
    function: str
    args: list[Expr]
    target: Expr | None = None


@dataclass(eq=False, slots=True)
class CreateList(Expr):
    elements: list[Expr]
    optional_indices: frozenset[int] = frozenset()


@dataclass(eq=False, slots=True)
class MapEntry:
    id: int
    offset: int
    key: Expr
    value: Expr
    optional: bool = False


@dataclass(eq=False, slots=True)
class CreateMap(Expr):
    entries: list[MapEntry]


@dataclass(eq=False, slots=True)
class CreateStruct(Expr):
    name: str
    fields: list[tuple[str, Expr]]
    field_offsets: list[int] = field(default_factory=list)  # each field initialiser's ':' (cel-go's location of it)


@dataclass(eq=False, slots=True)
class Comprehension(Expr):
    iter_var: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr
    iter_var2: str | None = None


ACCUMULATOR = "@result"


def children(node: Expr) -> list[Expr]:
    """The node's direct subexpressions, in source order."""
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Call):
        return [*([node.target] if node.target is not None else []), *node.args]
    if isinstance(node, CreateList):
        return list(node.elements)
    if isinstance(node, CreateMap):
        return [part for entry in node.entries for part in (entry.key, entry.value)]
    if isinstance(node, CreateStruct):
        return [value for _, value in node.fields]
    if isinstance(node, Comprehension):
        return [node.iter_range, node.accu_init, node.loop_condition, node.loop_step, node.result]
    return []


def walk(expr: Expr):
    """Pre-order traversal of every node."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Select):
            stack.append(node.operand)
        elif isinstance(node, Call):
            stack.extend(reversed(node.args))
            if node.target is not None:
                stack.append(node.target)
        elif isinstance(node, CreateList):
            stack.extend(reversed(node.elements))
        elif isinstance(node, CreateMap):
            for entry in reversed(node.entries):
                stack.append(entry.value)
                stack.append(entry.key)
        elif isinstance(node, CreateStruct):
            stack.extend(value for _, value in reversed(node.fields))
        elif isinstance(node, Comprehension):
            stack.extend([node.result, node.loop_step, node.loop_condition, node.accu_init, node.iter_range])
