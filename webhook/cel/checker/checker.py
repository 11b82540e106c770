"""cel-go's type checker, over ``webhook.cel.syntax.ast`` ASTs, with cel-go's error messages.

    checked = check(parse(source), variables={"self": self_type}, objects=object_fields)
    checked.errors   # [(offset, message)], empty when the expression type-checks
    checked.types    # node id -> CelType; checked.overloads: call node id -> overload ids

Followed by the validators Kubernetes enables (``literals``), which run only when checking
succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from webhook.cel.common.escaping import RESERVED_SYMBOLS
from webhook.cel.checker.declarations import TYPE_IDENTS, Overload, functions
from webhook.cel.checker.literals import literal_errors
from webhook.cel.syntax.ast import (
    Call, Comprehension, CreateList, CreateMap, CreateStruct, Expr, Ident, Literal, Select)
from webhook.cel.common.decl import DeclType
from webhook.cel.common.types import (
    BOOL, BYTES, CelType, DOUBLE, DYN, ERROR, INT, NULL, STRING, UINT, list_of, map_of, optional_of)

_LITERAL_TYPES = {"int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bytes": BYTES, "bool": BOOL,
                  "null": NULL}


@dataclass
class Checked:
    expr: Expr
    types: dict[int, CelType] = field(default_factory=dict)
    overloads: dict[int, tuple[str, ...]] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)
    # call node ids rewritten to a namespaced global function (``sets.contains(...)``)
    qualified_calls: dict[int, str] = field(default_factory=dict)
    result_type: CelType = DYN


# a type name -> (its type, its fields' types, or None when every field is there and dyn), or
# None when no such type is declared
StructTypes = Callable[[str], "tuple[CelType, Mapping[str, CelType] | None] | None"]


def _is_dyn_or_error(t: CelType) -> bool:
    return t.kind in ("dyn", "error")


class _Checker:
    def __init__(self, result: Checked, variables: Mapping[str, CelType], objects: Mapping[str, DeclType]) -> None:
        self.result = result
        self.scopes: list[dict[str, CelType]] = [dict(variables)]
        self.objects = objects
        self.functions = functions()
        self.structs: StructTypes | None = None
        self.mapping: dict[str, CelType] = {}
        self.counter = 0

    # --- type variables and substitution ---------------------------------------------------------

    def fresh(self) -> CelType:
        self.counter += 1
        return CelType("typeparam", name=f"_var{self.counter}")

    def substitute(self, t: CelType, to_dyn: bool = False) -> CelType:
        if t.kind == "typeparam":
            bound = self.mapping.get(t.name)
            if bound is not None:
                return self.substitute(bound, to_dyn)
            return DYN if to_dyn else t
        if t.params:
            return CelType(t.kind, tuple(self.substitute(p, to_dyn) for p in t.params), t.name)
        return t

    def _occurs(self, var: CelType, t: CelType) -> bool:
        if t.kind == "typeparam":
            if t.name == var.name:
                return True
            bound = self.mapping.get(t.name)
            return bound is not None and self._occurs(var, bound)
        return any(self._occurs(var, p) for p in t.params)

    def _most_general(self, t1: CelType, t2: CelType) -> CelType:
        if self._less_specific(t1, t2):
            return t1
        return t2

    def _less_specific(self, t1: CelType, t2: CelType) -> bool:
        if t1 == t2 or t1.kind in ("dyn", "error"):
            return True
        if t1.kind == "typeparam" or t2.kind == "typeparam":
            return False
        if t1.kind != t2.kind or t1.name != t2.name or len(t1.params) != len(t2.params):
            return False
        return all(self._less_specific(a, b) for a, b in zip(t1.params, t2.params))

    def _valid_substitution(self, t1: CelType, t2: CelType) -> tuple[bool, bool]:
        if t1 == t2:
            return True, True
        bound = self.mapping.get(t2.name)
        if bound is not None:
            if t1 == bound:
                return True, True
            if self.assignable(t1, bound):
                general = self._most_general(t1, bound)
                if not self._occurs(t2, general):
                    self.mapping[t2.name] = general
                return True, True
            return False, True
        if not self._occurs(t2, t1):
            self.mapping[t2.name] = t1
            return True, False
        return False, False

    def assignable(self, t1: CelType, t2: CelType) -> bool:
        """cel-go's internalIsAssignable(t1, t2): can a t1 value be used where t2 is expected."""
        if t2.kind == "typeparam":
            valid, has_sub = self._valid_substitution(t1, t2)
            if valid:
                return True
            if has_sub:
                return False
        if t1.kind == "typeparam":
            valid, _ = self._valid_substitution(t2, t1)
            return valid
        if _is_dyn_or_error(t1) or _is_dyn_or_error(t2):
            return True
        if t1.kind == "null_type":
            return _nullable(t2)
        if t2.kind == "null_type":
            return _nullable(t1)
        if t1.kind == "type":
            return t2.kind == "type"
        if t1.kind in ("opaque", "list", "map", "optional_type"):
            return (t1.kind == t2.kind and t1.name == t2.name and len(t1.params) == len(t2.params)
                    and all(self.assignable(a, b) for a, b in zip(t1.params, t2.params)))
        return t1.kind == t2.kind and t1.name == t2.name

    # --- traversal -----------------------------------------------------------------------------

    def check(self, expr: Expr) -> None:
        method = getattr(self, f"_check_{type(expr).__name__}")
        method(expr)

    def set_type(self, expr: Expr, t: CelType) -> None:
        self.result.types[expr.id] = t

    def type_of(self, expr: Expr) -> CelType:
        return self.result.types.get(expr.id, DYN)

    def error(self, offset: int, message: str) -> None:
        self.result.errors.append((offset, message))

    def lookup(self, name: str) -> CelType | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return TYPE_IDENTS.get(name)

    def _check_Literal(self, expr: Literal) -> None:
        self.set_type(expr, _LITERAL_TYPES[expr.kind])

    def _check_Ident(self, expr: Ident) -> None:
        name = expr.name[1:] if expr.name.startswith(".") else expr.name
        found = self.lookup(name)
        if found is not None:
            self.set_type(expr, found)
            return
        self.set_type(expr, ERROR)
        self.error(expr.offset, f"undeclared reference to '{name}' (in container '')")

    def _check_Select(self, expr: Select) -> None:
        qualified = _qualified_name(expr)
        if qualified in TYPE_IDENTS and not expr.test_only:   # google.protobuf.Timestamp, net.IP, ...
            self.set_type(expr, TYPE_IDENTS[qualified])
            return
        result = self._select_field(expr, expr.operand, expr.field, expr.optional)
        if expr.test_only:
            result = BOOL
        self.set_type(expr, self.substitute(result))

    def _select_field(self, expr: Expr, operand: Expr, name: str, optional: bool) -> CelType:
        self.check(operand)
        operand_type = self.substitute(self.type_of(operand))
        target, is_optional = operand_type, False
        if target.kind == "optional_type":
            target, is_optional = target.params[0], True
        result = ERROR
        if target.kind == "map":
            result = target.params[1]
        elif target.kind == "object":
            decl = self.objects.get(target.name)
            field_type = decl.fields.get(name) if decl is not None else None
            if field_type is None and decl is not None and name in RESERVED_SYMBOLS:
                field_type = decl.fields.get(f"__{name}__")   # Kubernetes accepts `self.namespace`
            if field_type is None:
                self.error(expr.offset, f"undefined field '{name}'")
            else:
                result = field_type.cel
        elif target.kind == "typeparam":
            self.assignable(DYN, target)
            result = DYN
        else:
            if not _is_dyn_or_error(target):
                self.error(expr.offset, f"type '{target}' does not support field selection")
            result = DYN
        if is_optional or optional:
            return optional_of(result)
        return result

    def _check_Call(self, expr: Call) -> None:
        for arg in expr.args:
            self.check(arg)
        name = expr.function
        if expr.target is None:
            overloads = self.functions.get(name)
            if overloads is None:
                self.error(expr.offset, f"undeclared reference to '{name}' (in container '')")
                self.set_type(expr, ERROR)
                return
            self._resolve(expr, name, overloads, None)
            return
        qualified = _qualified_name(expr.target)
        if qualified is not None and self.lookup(qualified.split(".")[0]) is None:
            overloads = self.functions.get(f"{qualified}.{name}")
            if overloads is not None:
                self.result.qualified_calls[expr.id] = f"{qualified}.{name}"
                self._resolve(expr, f"{qualified}.{name}", overloads, None)
                return
        self.check(expr.target)
        overloads = self.functions.get(name)
        if overloads is None:
            self.set_type(expr, ERROR)
            self.error(expr.offset, f"undeclared reference to '{name}' (in container '')")
            return
        self._resolve(expr, name, overloads, expr.target)

    def _resolve(self, expr: Call, name: str, overloads: tuple[Overload, ...], target: Expr | None) -> None:
        arg_types = ([self.type_of(target)] if target is not None else []) + [self.type_of(a) for a in expr.args]
        result: CelType | None = None
        matched: list[str] = []
        for overload in overloads:
            if overload.member != (target is not None) or len(overload.params) != len(arg_types):
                continue
            params, overload_result = self._instantiate(overload)
            saved = dict(self.mapping)
            if all(self.assignable(a, p) for a, p in zip(arg_types, params)):
                matched.append(overload.id)
                resolved = self.substitute(overload_result)
                if result is None:
                    result = resolved
                elif result.kind != "dyn" and resolved != result:
                    result = DYN
            else:
                self.mapping = saved
        if result is None:
            shown = [self.substitute(t, to_dyn=True) for t in arg_types]
            if target is not None:
                signature = f"{shown[0]}.({', '.join(map(str, shown[1:]))})"
            else:
                signature = f"({', '.join(map(str, shown))})"
            self.error(expr.offset, f"found no matching overload for '{name}' applied to '{signature}'")
            self.set_type(expr, ERROR)
            return
        self.result.overloads[expr.id] = tuple(matched)
        self.set_type(expr, result)

    def _instantiate(self, overload: Overload) -> tuple[tuple[CelType, ...], CelType]:
        names: dict[str, CelType] = {}

        def inst(t: CelType) -> CelType:
            if t.kind == "typeparam":
                if t.name not in names:
                    names[t.name] = self.fresh()
                return names[t.name]
            if t.params:
                return CelType(t.kind, tuple(inst(p) for p in t.params), t.name)
            return t

        params = tuple(inst(p) for p in overload.params)
        return params, inst(overload.result)

    def _join(self, expr: Expr, previous: CelType | None, current: CelType) -> CelType:
        if previous is None:
            return current
        if self.assignable(previous, current):
            return self._most_general(previous, current)
        return DYN

    def _check_CreateList(self, expr: CreateList) -> None:
        elem: CelType | None = None
        for index, element in enumerate(expr.elements):
            self.check(element)
            element_type = self.type_of(element)
            if index in expr.optional_indices:
                element_type = self.substitute(element_type)
                if element_type.kind == "optional_type":
                    element_type = element_type.params[0]
                elif not _is_dyn_or_error(element_type):
                    self.error(element.offset, f"expected type 'optional_type' but found '{element_type}'")
            elem = self._join(element, elem, element_type)
        self.set_type(expr, list_of(elem if elem is not None else self.fresh()))

    def _check_CreateMap(self, expr: CreateMap) -> None:
        key_type: CelType | None = None
        value_type: CelType | None = None
        for entry in expr.entries:
            self.check(entry.key)
            key_type = self._join(entry.key, key_type, self.type_of(entry.key))
            self.check(entry.value)
            vt = self.type_of(entry.value)
            if entry.optional:
                vt = self.substitute(vt)
                if vt.kind == "optional_type":
                    vt = vt.params[0]
            value_type = self._join(entry.value, value_type, vt)
        self.set_type(expr, map_of(key_type or self.fresh(), value_type or self.fresh()))

    def _check_CreateStruct(self, expr: CreateStruct) -> None:
        """cel-go's checkCreateStruct: the type by name from the environment's type provider
        (``structs``: none in most environments), then each field against its declared type."""
        name = expr.name[1:] if expr.name.startswith(".") else expr.name
        resolved = self.structs(name) if self.structs is not None else None
        if resolved is None:
            self.error(expr.offset, f"undeclared reference to '{name}' (in container '')")
            self.set_type(expr, ERROR)
            return
        struct_type, field_types = resolved
        self.set_type(expr, struct_type)
        for i, (field_name, value) in enumerate(expr.fields):
            self.check(value)
            offset = expr.field_offsets[i] if i < len(expr.field_offsets) else value.offset
            value_type = self.type_of(value)
            if field_types is None:  # a dynamic type: every field is there, typed dyn
                field_type = DYN
            elif field_name in field_types:
                field_type = field_types[field_name]
            else:
                # Kubernetes' JSONPatch type says every field exists, typed nil: nothing is assignable to it
                if not _is_dyn_or_error(value_type):
                    self.error(offset, f"expected type of field '{field_name}' is '' but provided type is "
                                       f"'{value_type}'")
                continue
            if not self.assignable(field_type, value_type):
                self.error(offset, f"expected type of field '{field_name}' is '{field_type}' but provided "
                                   f"type is '{value_type}'")

    def _check_Comprehension(self, expr: Comprehension) -> None:
        self.check(expr.iter_range)
        self.check(expr.accu_init)
        range_type = self.substitute(self.type_of(expr.iter_range))
        accu_type = self.type_of(expr.accu_init)
        self.scopes.append({expr.accu_var: accu_type})
        var2: CelType | None = None
        if range_type.kind == "list":
            var = range_type.params[0]
            if expr.iter_var2 is not None:
                var, var2 = INT, range_type.params[0]
        elif range_type.kind == "map":
            var = range_type.params[0]
            if expr.iter_var2 is not None:
                var2 = range_type.params[1]
        elif range_type.kind in ("dyn", "error", "typeparam"):
            self.assignable(DYN, range_type)
            var = DYN
            var2 = DYN if expr.iter_var2 is not None else None
        else:
            self.error(expr.iter_range.offset, f"expression of type '{range_type}' cannot be range of a "
                                               "comprehension (must be list, map, or dynamic)")
            var = ERROR
            var2 = ERROR if expr.iter_var2 is not None else None
        loop_scope = {expr.iter_var: var}
        if expr.iter_var2 is not None:
            loop_scope[expr.iter_var2] = var2 or DYN
        self.scopes.append(loop_scope)
        self.check(expr.loop_condition)
        self._assert(expr.loop_condition, BOOL)
        self.check(expr.loop_step)
        self._assert(expr.loop_step, accu_type)
        self.scopes.pop()
        self.check(expr.result)
        self.scopes.pop()
        self.set_type(expr, self.substitute(self.type_of(expr.result)))

    def _assert(self, expr: Expr, expected: CelType) -> None:
        actual = self.type_of(expr)
        if not self.assignable(expected, actual):
            self.error(expr.offset, f"expected type '{self.substitute(expected, True)}' but found "
                                    f"'{self.substitute(actual, True)}'")


def _nullable(t: CelType) -> bool:
    return t.kind in ("opaque", "object", "optional_type", "duration", "timestamp", "null_type")


def _qualified_name(expr: Expr) -> str | None:
    if isinstance(expr, Ident):
        return expr.name.lstrip(".")
    if isinstance(expr, Select) and not expr.test_only and not expr.optional:
        prefix = _qualified_name(expr.operand)
        return f"{prefix}.{expr.field}" if prefix is not None else None
    return None


def check(expr: Expr, variables: Mapping[str, CelType], objects: Mapping[str, DeclType], *,
          validate_literals: bool = True, extra_functions: Mapping[str, tuple[Overload, ...]] | None = None,
          structs: "StructTypes | None" = None) -> Checked:
    """Type-check ``expr``; then, if it checked cleanly, run Kubernetes' AST validators.
    ``structs``: the message types ``Name{...}`` may construct (none by default)."""
    checker = _Checker(Checked(expr), variables, objects)
    checker.structs = structs
    if extra_functions:
        checker.functions = {**checker.functions, **extra_functions}
    checker.check(expr)
    result = checker.result
    result.types = {node_id: checker.substitute(t) for node_id, t in result.types.items()}
    result.result_type = checker.substitute(result.types.get(expr.id, DYN), to_dyn=True)
    if not result.errors and validate_literals:
        result.errors += literal_errors(expr, result.types)
    return result
