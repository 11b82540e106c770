"""Building and reading checked-AST nodes (``cel.expr`` protos) for the passes: new nodes with
fresh ids, ``cel.bind`` and folds as comprehensions, tests of a value's runtime type, cel-go's
dispatch error, and the constants a node holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook.cel.common.typenames import DURATION, TIMESTAMP, format_checked
from webhook.cel.environment import protos
from webhook.cel.environment.env import FAIL_FUNCTION, KEY_FIELD, library_value
from webhook.cel.environment.protos import children
from webhook.cel.library import OPAQUE_TYPES
from webhook.cel.library.base import NONE, OpaqueValue, OptionalValue

OPAQUE_NAMES = {t.cel_type for t in OPAQUE_TYPES}
# the kinds a value checked as dyn may have at runtime, most likely first
_TYPE_NAMES = ("map", "list", "string", "int", "double", "bool", "uint", "bytes", "null_type",
               TIMESTAMP, DURATION)


class AstBuilder:
    """New nodes for a pass over one checked AST (``types``: its type map; ``_next_id``: the
    next free node id, set by the pass)."""

    types: Any
    _next_id: int

    def _ids(self, expr: Any) -> list[int]:
        ids = [expr.id]
        stack = [expr]
        while stack:
            node = stack.pop()
            for child in children(node):
                ids.append(child.id)
                stack.append(child)
        return ids

    def new(self) -> Any:
        node = protos.Expr(id=self._next_id)
        self._next_id += 1
        return node

    def ident(self, name: str) -> Any:
        node = self.new()
        node.ident_expr.name = name
        return node

    def const(self, value: Any) -> Any:
        node = self.new()
        c = node.const_expr
        if value is None:
            c.null_value = 0
        elif isinstance(value, bool):
            c.bool_value = value
        elif isinstance(value, tuple) and value[0] == "uint":
            c.uint64_value = value[1]
        elif isinstance(value, int):
            c.int64_value = value
        elif isinstance(value, float):
            c.double_value = value
        elif isinstance(value, str):
            c.string_value = value
        elif isinstance(value, bytes):
            c.bytes_value = value
        else:
            raise TypeError(f"not a constant: {value!r}")
        return node

    def call(self, function: str, *args: Any, target: Any = None) -> Any:
        node = self.new()
        node.call_expr.function = function
        if target is not None:
            node.call_expr.target.CopyFrom(target)
        for arg in args:
            node.call_expr.args.add().CopyFrom(arg)
        return node

    def list_of(self, *elements: Any) -> Any:
        node = self.new()
        node.list_expr.SetInParent()
        for element in elements:
            node.list_expr.elements.add().CopyFrom(element)
        return node

    def comprehension(self, iter_var: str, iter_range: Any, accu_var: str, accu_init: Any, condition: Any, step: Any, result: Any) -> Any:
        node = self.new()
        c = node.comprehension_expr
        c.iter_var, c.accu_var = iter_var, accu_var
        c.iter_range.CopyFrom(iter_range)
        c.accu_init.CopyFrom(accu_init)
        c.loop_condition.CopyFrom(condition)
        c.loop_step.CopyFrom(step)
        c.result.CopyFrom(result)
        return node

    def bind(self, name: str, value: Any, body: Callable[[Callable[[], Any]], Any]) -> Any:
        """``cel.bind(name, value, body)``: ``body`` receives a factory of ``name`` references."""
        return self.comprehension("#unused", self.list_of(), name, value, self.const(False), self.ident(name), body(lambda: self.ident(name)))

    def fold(self, items: Any, init: Any, step: Callable[[Any, Any], Any], result: Callable[[Any], Any]) -> Any:
        """A left fold over ``items`` (what ``sum``/``min``/``max`` need; CEL has no macro for it)."""
        return self.comprehension(
            "@x", items, "@acc", init, self.const(True),
            step(self.ident("@acc"), self.ident("@x")), result(self.ident("@acc")),
        )

    def op(self, function: str, *args: Any) -> Any:
        return self.call(function, *args)

    def cond(self, test: Any, then: Any, otherwise: Any) -> Any:
        return self.call("_?_:_", test, then, otherwise)

    def value_node(self, value: Any) -> Any:
        """A folded Python value as an AST node."""
        if isinstance(value, OpaqueValue):
            node = self.new()
            node.struct_expr.message_name = value.cel_type
            entry = node.struct_expr.entries.add(id=self._next_id, field_key=KEY_FIELD)
            self._next_id += 1
            entry.value.CopyFrom(self.const(value.key))
            return node
        if isinstance(value, OptionalValue):
            if value.has_value:
                return self.call("optional.of", self.value_node(value.value))
            return self.call("optional.none")
        if isinstance(value, list):
            return self.list_of(*(self.value_node(v) for v in value))
        if isinstance(value, dict):
            node = self.new()
            node.struct_expr.SetInParent()
            for key, item in value.items():
                entry = node.struct_expr.entries.add(id=self._next_id)
                self._next_id += 1
                entry.map_key.CopyFrom(self.const(key))
                entry.value.CopyFrom(self.value_node(item))
            return node
        return self.const(value)

    def type_of(self, node: Any) -> str:
        return format_checked(self.types[node.id]) if node.id in self.types else "dyn"

    def type_value(self, name: str) -> Any:
        """The CEL type ``name`` as a value (``type(x) == <it>``)."""
        if name == TIMESTAMP:
            return self.call("type", self.call("timestamp", self.const(0)))
        if name == DURATION:
            return self.call("type", self.call("duration", self.const("0s")))
        if name == "null_type":
            return self.call("type", self.const(None))
        return self.ident(name)

    def is_type(self, value: Callable[[], Any], kinds: tuple[str, ...]) -> Any:
        tests = [self.op("_==_", self.call("type", value()), self.type_value(kind)) for kind in kinds]
        test = tests[0]
        for other in tests[1:]:
            test = self.op("_||_", test, other)
        return test

    def type_name(self, value: Callable[[], Any]) -> Any:
        """The CEL type name of a value, as a string (cel-go's ``TypeName()``)."""
        name: Any = self.const("dyn")
        for kind in reversed(_TYPE_NAMES):
            name = self.cond(self.op("_==_", self.call("type", value()), self.type_value(kind)), self.const(kind), name)
        return name

    def no_such_overload(self, function: str, values: list[Callable[[], Any]]) -> Any:
        """cel-go's failed dispatch, ``no such overload: f(<runtime type names>)``."""
        message: Any = self.const(f"no such overload: {function}(")
        for i, value in enumerate(values):
            message = self.op("_+_", message, self.const(", ") if i else self.const(""))
            message = self.op("_+_", message, self.type_name(value))
        return self.call(FAIL_FUNCTION, self.op("_+_", message, self.const(")")))

    def out_of_range(self, index: Any) -> Any:
        return self.call(FAIL_FUNCTION, self.op("_+_", self.const("index out of range: "), self.call("string", index)))

    def outside(self, index: Callable[[], Any], size: Callable[[], Any], inclusive_end: bool) -> Any:
        too_big = self.op("_>=_" if inclusive_end else "_>_", index(), size())
        return self.op("_||_", self.op("_<_", index(), self.const(0)), too_big)


def is_string_const(node: Any) -> bool:
    return node.WhichOneof("expr_kind") == "const_expr" and node.const_expr.WhichOneof("constant_kind") == "string_value"


def constant_value(node: Any) -> tuple[bool, Any]:
    """(True, value) when ``node`` is a literal or a folded library value."""
    kind = node.WhichOneof("expr_kind")
    if kind == "const_expr":
        c = node.const_expr
        which = c.WhichOneof("constant_kind")
        if which in ("int64_value", "double_value", "string_value", "bool_value", "bytes_value"):
            return True, getattr(c, which)
        if which == "null_value":
            return True, None
        return False, None
    if kind == "struct_expr" and node.struct_expr.message_name in OPAQUE_NAMES:
        entries = list(node.struct_expr.entries)
        if len(entries) == 1 and is_string_const(entries[0].value):
            return True, library_value(node.struct_expr.message_name, entries[0].value.const_expr.string_value)
        return False, None
    if kind == "list_expr" and not node.list_expr.optional_indices:
        values = []
        for element in node.list_expr.elements:
            ok, value = constant_value(element)
            if not ok:
                return False, None
            values.append(value)
        return True, values
    if kind == "call_expr" and node.call_expr.function == "optional.none" and not node.call_expr.args:
        return True, NONE
    return False, None
