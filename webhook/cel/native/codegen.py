"""A checked program as the source of one Python function (``Codegen``).

A program becomes the source of one Python function: operators inline where their operand
types can be checked in place (``x == 'a'``, ``s.startsWith('p')``, ``has(x.f)``, the logical
operators through assignment expressions), the runtime's helpers otherwise (``runtime``),
and each comprehension a function beside it, called with the variables it reads. Any Python
exception raised inside it (a ``KeyError`` for a missing field, a ``TypeError`` for a
selection on a list) means "ask cel-expr", like ``NotNative``: so a selection ``x['f']``
either finds the field of a map or gives up.
"""

from __future__ import annotations

import re
import symtable
from typing import Any

from webhook.cel.environment.protos import children
from webhook.cel.limits import ITERATION_BUDGET
from webhook.cel.native.runtime import FUNCTIONS, HELPERS, TYPE_IDENTS, TYPE_OF_VALUE


class Unsupported(Exception):
    """The program leaves the subset: it always runs on cel-expr."""


_COMPARE = {"_<_": ("<", "_less"), "_<=_": ("<=", "_less_equal"), "_>_": (">", "_greater"), "_>=_": (">=", "_greater_equal")}
_STRING_TESTS = {"startsWith": "{t}.startswith({c})", "endsWith": "{t}.endswith({c})", "contains": "{c} in {t}"}


_ENCLOSING = frozenset({"a", "_n", "_limit"})  # the program's own variables
_GENERATED = re.compile(r"(v|_t)[0-9]+")  # the variables ``fresh`` names (CEL's, walrus temporaries)


class Codegen:
    def __init__(self) -> None:
        self.names: dict[str, Any] = dict(HELPERS)
        self.count = 0
        self.scopes: list[dict[str, str]] = []
        self.defined: list[str] = []  # the loops' functions, beside the program (``define``)

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, value: Any) -> str:
        if value is None or type(value) in (bool, str) or (type(value) is int and -(2**62) < value < 2**62):
            return repr(value)
        name = self.fresh("_k")  # doubles (inf, nan, exact digits), helpers' arguments
        self.names[name] = value
        return name

    def local(self, name: str) -> str | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # -- expressions ---------------------------------------------------------------------------

    def expr(self, node: Any) -> str:
        kind = node.WhichOneof("expr_kind")
        if kind == "const_expr":
            return self.constant(_constant_value(node.const_expr))
        if kind == "ident_expr":
            name = node.ident_expr.name
            return self.local(name) or f"a[{name!r}]"
        if kind == "select_expr":
            return self.select(node.select_expr)
        if kind == "call_expr":
            return self.call(node.call_expr)
        if kind == "list_expr":
            elements = ", ".join(self.expr(e) for e in node.list_expr.elements)
            if not node.list_expr.optional_indices:
                return f"[{elements}]"
            return f"_optional_list([{elements}], {self.constant(frozenset(node.list_expr.optional_indices))})"
        if kind == "struct_expr":
            return self.map_literal(node.struct_expr)
        if kind == "comprehension_expr":
            return self.comprehension(node.comprehension_expr)
        raise Unsupported(kind)

    def select(self, select: Any) -> str:
        operand = self.expr(select.operand)
        field = repr(select.field)
        if select.test_only:  # has(x.f)
            t = self.fresh("_t")
            return f"(({field} in {t}) if type({t} := {operand}) is dict else _bail())"
        if _may_be_optional(select.operand):
            return f"_select_optional({operand}, {field})"
        return f"{operand}[{field}]"  # a map's field, or an exception: a missing key, a non-map

    def map_literal(self, literal: Any) -> str:
        if literal.message_name:
            raise Unsupported(literal.message_name)
        entries = []
        for entry in literal.entries:
            if not entry.HasField("map_key"):
                raise Unsupported("field entry")
            entries.append(f"({self.expr(entry.map_key)}, {self.expr(entry.value)}, {entry.optional_entry!r})")
        return f"_map_literal(({', '.join(entries)},))" if entries else "{}"

    def branch(self, node: Any) -> str:
        """A conditional's branch; one the subset cannot express asks cel-expr when it is
        taken (``_bail``), so that the rest of the program stays native (a policy's failed
        rule and its message, see ``policy.batch.judged_source``)."""
        defined, scopes = len(self.defined), len(self.scopes)
        try:
            return self.expr(node)
        except Unsupported:  # what it began of functions and scopes goes with it
            del self.defined[defined:]
            del self.scopes[scopes:]
            return "_bail()"

    def call(self, call: Any) -> str:
        function = call.function
        nodes = ([call.target] if call.HasField("target") else []) + list(call.args)
        arity = len(nodes)
        # Operands whose code can only give a bool (or give up) need no check of their value:
        # Python's own and, or, not and conditional are then CEL's (``_boolean``).
        if function == "_&&_" and arity == 2:
            left, right = map(self.expr, nodes)
            if _boolean(nodes[0]) and _boolean(nodes[1]):
                return f"({left} and {right})"
            l, r = self.fresh("_t"), self.fresh("_t")
            return (f"(False if ({l} := {left}) is False else (False if ({r} := {right}) is False else "
                    f"(True if {l} is True and {r} is True else _bail())))")
        if function == "_||_" and arity == 2:
            left, right = map(self.expr, nodes)
            if _boolean(nodes[0]) and _boolean(nodes[1]):
                return f"({left} or {right})"
            l, r = self.fresh("_t"), self.fresh("_t")
            return (f"(True if ({l} := {left}) is True else (True if ({r} := {right}) is True else "
                    f"(False if {l} is False and {r} is False else _bail())))")
        if function == "!_" and arity == 1:
            if _boolean(nodes[0]):
                return f"(not {self.expr(nodes[0])})"
            t = self.fresh("_t")
            return f"(False if ({t} := {self.expr(nodes[0])}) is True else (True if {t} is False else _bail()))"
        if function == "_?_:_" and arity == 3:
            test, then, otherwise = self.expr(nodes[0]), self.branch(nodes[1]), self.branch(nodes[2])
            if _boolean(nodes[0]):
                return f"({then} if {test} else {otherwise})"
            t = self.fresh("_t")
            return f"({then} if ({t} := {test}) is True else ({otherwise} if {t} is False else _bail()))"
        if function in ("@not_strictly_false", "__not_strictly_false__") and arity == 1:
            t = self.fresh("_t")
            return f"({t} if ({t} := {self.expr(nodes[0])}) is True or {t} is False else _bail())"
        if function in ("_==_", "_!=_") and arity == 2:
            equal = self.type_test(*nodes) or self.equality(*nodes)
            return equal if function == "_==_" else f"(not {equal})"
        if function in _COMPARE and arity == 2:
            return self.compare(function, *nodes)
        if function in _STRING_TESTS and arity == 2 and _string_constant(nodes[1]) is not None:
            t = self.fresh("_t")
            test = _STRING_TESTS[function].format(t=t, c=repr(_string_constant(nodes[1])))
            return f"({test} if type({t} := {self.expr(nodes[0])}) is str else _bail())"
        if function in ("orValue", "hasValue") and nodes:
            chain = _optional_chain(nodes[0])  # x.?a.?b.orValue(d): one walk down the fields
            if chain is not None and arity == (1 if function == "hasValue" else 2):
                base, fields = chain
                if function == "hasValue":
                    return f"_path_has({self.expr(base)}, {fields!r})"
                return f"_path_or({self.expr(base)}, {fields!r}, {self.expr(nodes[1])})"
        if function == "_?._" and arity == 2 and _string_constant(nodes[1]) is not None:
            return f"_optional_select({self.expr(nodes[0])}, {_string_constant(nodes[1])!r})"
        if function == "dyn" and arity == 1:
            return self.expr(nodes[0])
        if function == "size" and arity == 1:
            t = self.fresh("_t")
            return f"(len({t}) if type({t} := {self.expr(nodes[0])}) is str or type({t}) is list or type({t}) is dict else _bail())"
        if function == "matches" and arity == 2:
            if _string_constant(nodes[1]) is None:
                raise Unsupported("matches with a computed pattern")  # any size: cel-expr's job
        if function == "_[_]" and arity == 2 and _string_constant(nodes[1]) is not None and not _may_be_optional(nodes[0]):
            return f"{self.expr(nodes[0])}[{_string_constant(nodes[1])!r}]"
        if function == "_[_]" and arity == 2 and _is_int_constant(nodes[1], 0) \
                and nodes[0].WhichOneof("expr_kind") == "comprehension_expr":
            bound = self.binding(nodes[0].comprehension_expr, first=True)  # [x].map(v, e)[0]: e with v = x
            if bound is not None:
                return bound
        implementation = FUNCTIONS.get((function, arity))
        if implementation is None:
            raise Unsupported(function)
        name = self.constant(implementation)
        return f"{name}({', '.join(self.expr(n) for n in nodes)})"

    def type_test(self, left_node: Any, right_node: Any) -> str | None:
        """``type(x) == string``, ``type(x) == type(duration('0s'))``, ``type(x) == type(y)``
        (how ``optimize`` guards dyn values) as a comparison of CEL type names."""
        if not _is_call(left_node, "type", 1):
            return None
        kind = right_node.WhichOneof("expr_kind")
        if kind == "ident_expr" and right_node.ident_expr.name in TYPE_IDENTS and self.local(right_node.ident_expr.name) is None:
            name = repr(right_node.ident_expr.name)
        elif _is_call(right_node, "type", 1):
            inner = right_node.call_expr.args[0]
            if _is_constant(inner) and _constant_value(inner.const_expr) is None:
                name = "'null_type'"
            elif inner.WhichOneof("expr_kind") == "call_expr" and inner.call_expr.function in TYPE_OF_VALUE \
                    and all(_is_constant(arg) for arg in inner.call_expr.args):
                name = repr(TYPE_OF_VALUE[inner.call_expr.function])
            else:
                name = f"_cel_type({self.expr(inner)})"
        else:
            return None
        return f"(_cel_type({self.expr(left_node.call_expr.args[0])}) == {name})"

    def equality(self, left_node: Any, right_node: Any) -> str:
        """``==`` inline against a constant (cel-go's heterogeneous equality: a value of another
        kind is simply not equal), through ``_equal`` otherwise."""
        if _is_constant(left_node) and not _is_constant(right_node):
            left_node, right_node = right_node, left_node
        if not _is_constant(right_node):
            return f"_equal({self.expr(left_node)}, {self.expr(right_node)})"
        value, left = _constant_value(right_node.const_expr), self.expr(left_node)
        if value is None or type(value) is bool:
            return f"({left} is {value!r})"
        if type(value) is str:
            t = self.fresh("_t")
            return f"(type({t} := {left}) is str and {t} == {value!r})"
        t = self.fresh("_t")  # a number equals an int or a double of the same value, never a bool
        return f"((type({t} := {left}) is int or type({t}) is float) and {t} == {self.constant(value)})"

    def compare(self, function: str, left_node: Any, right_node: Any) -> str:
        operator, helper = _COMPARE[function]
        left, right = self.expr(left_node), self.expr(right_node)
        if _is_constant(right_node) and type(_constant_value(right_node.const_expr)) is int:
            t = self.fresh("_t")
            return f"({t} {operator} {right} if type({t} := {left}) is int else {helper}({t}, {right}))"
        return f"{helper}({left}, {right})"

    def binding(self, c: Any, *, first: bool = False) -> str | None:
        """``[x].map(v, e)`` (how the policy batches bind a variable) as one expression in the
        enclosing function: ``v`` assigned, the iteration counted as the loop would, ``[e]``;
        with ``first``, ``e`` itself (``[x].map(v, e)[0]``). None for any other comprehension."""
        elements = _single_map(c)
        if elements is None or (first and len(elements) != 1):
            return None
        value, accu = self.fresh("v"), self.fresh("v")
        iter_range = self.expr(c.iter_range.list_expr.elements[0])
        self.scopes.append({c.iter_var: value, c.accu_var: accu})
        values = [self.expr(e) for e in elements]
        self.scopes[-1] = {c.accu_var: accu}
        result = self.expr(c.result)
        self.scopes.pop()
        tick = f"_tick(_n, {1 + _nodes(c.loop_condition) + _nodes(c.loop_step)}, _limit)"
        if first and result == accu:
            return f"({value} := {iter_range}, {tick}, {values[0]})[2]"
        return f"({value} := {iter_range}, {tick}, {accu} := [{', '.join(values)}], {result})[3]"

    def comprehension(self, c: Any) -> str:
        bound = self.binding(c)
        if bound is not None:
            return bound
        name, items, accu = self.fresh("_c"), self.fresh("_r"), self.fresh("v")
        first = self.fresh("v")
        second = self.fresh("v") if c.iter_var2 else None
        iter_range, init = self.expr(c.iter_range), self.expr(c.accu_init)
        self.scopes.append({c.iter_var: first, c.accu_var: accu} | ({c.iter_var2: second} if second else {}))
        condition = None if _is_true_constant(c.loop_condition) else self.expr(c.loop_condition)
        appended = self.appended(c.loop_step, c.accu_var, c.accu_init, accu)
        step = None if appended is not None else self.expr(c.loop_step)
        self.scopes[-1] = {c.accu_var: accu}
        result = self.expr(c.result)
        self.scopes.pop()
        if c.iter_range.WhichOneof("expr_kind") == "list_expr" and not c.iter_range.list_expr.elements:
            # no iteration: cel.bind (how ``optimize`` binds a guarded value), the value in place
            return f"({accu} := {init}, {result})[1]"
        weight = 1 + _nodes(c.loop_condition) + _nodes(c.loop_step)
        single = (second is None and c.iter_range.WhichOneof("expr_kind") == "list_expr"
                  and len(c.iter_range.list_expr.elements) == 1 and not c.iter_range.list_expr.optional_indices)
        if single:  # [x].map(v, ...): how the policy batches bind a variable; no loop needed
            body = [f"{first} = {iter_range[1:-1]}", "_n[0] += 1", f"_n[1] += {weight}",
                    "if _n[1] > _limit: _exceeded()", f"{accu} = {init}"]
            indent = ""
            if condition is not None:
                g = self.fresh("_g")
                body += [f"{g} = {condition}", f"if {g} is not True and {g} is not False: _bail()", f"if {g}:"]
                indent = "    "
            body += [indent + line for line in (appended if appended is not None else [f"{accu} = {step}"])]
            body.append(f"return {result}")
            return self.define(name, body)
        if second is None:
            loop = f"for {first} in {items}:"
        else:
            loop = f"for {first}, {second} in (enumerate({items}) if type({items}) is list else {items}.items()):"
        # a map's iteration order is the engine's own (cel-go's is random): only a loop whose
        # answer cannot depend on it (all, exists, exists_one) may run over a map here
        kinds = "type({items}) is not list and type({items}) is not dict" if _order_free(c) else "type({items}) is not list"
        body = [
            f"{items} = {iter_range}",
            f"if {kinds.format(items=items)}: _bail()",
            f"_n[0] += len({items})",
            f"if _n[0] > {ITERATION_BUDGET}: _bail()",
            f"_n[1] += len({items}) * {weight}",
            "if _n[1] > _limit: _exceeded()",
            f"{accu} = {init}",
            loop,
        ]
        if condition is not None:
            g = self.fresh("_g")
            body += [f"    {g} = {condition}", f"    if {g} is False: break", f"    if {g} is not True: _bail()"]
        body += ["    " + line for line in appended] if appended is not None else [f"    {accu} = {step}"]
        body.append(f"return {result}")
        return self.define(name, body)

    def define(self, name: str, body: list[str]) -> str:
        """A loop's function ``name`` beside the program, the enclosing functions' variables
        that ``body`` reads as its parameters; its call, in the enclosing code. (Defined
        inside the program, Python would make the function, and a cell for each variable it
        shares, anew on every run; a loop runs right where it stands, so the values passed
        are the ones it would have read.)"""
        lines = ["    " + line for line in body]
        table = symtable.symtable("\n".join([f"def {name}():", *lines]), "<cel native>", "exec").get_children()[0]
        parameters = ", ".join(sorted(n for n in table.get_globals() if n in _ENCLOSING or _GENERATED.fullmatch(n)))
        self.defined += [f"def {name}({parameters}):", *lines]
        return f"{name}({parameters})"

    def appended(self, step: Any, accu_var: str, init: Any, accu: str) -> list[str] | None:
        """For the ``map``/``filter`` steps — ``accu + [e]`` and ``p ? accu + [e] : accu`` over
        an accumulator that starts as ``[]`` — statements appending in place (the accumulator
        is the comprehension's own: nothing else sees the copies skipped)."""
        if init.WhichOneof("expr_kind") != "list_expr" or init.list_expr.elements:
            return None
        test = None
        if _is_call(step, "_?_:_", 3):
            test_node, then, otherwise = step.call_expr.args
            if not _is_ident(otherwise, accu_var) or _reads(test_node, accu_var):
                return None
            test, step = test_node, then
        if not _is_call(step, "_+_", 2):
            return None
        left, right = step.call_expr.args
        if (not _is_ident(left, accu_var) or right.WhichOneof("expr_kind") != "list_expr"
                or right.list_expr.optional_indices or _reads(right, accu_var)):
            return None
        appends = [f"{accu}.append({self.expr(e)})" for e in right.list_expr.elements]
        if test is None:
            return appends
        k = self.fresh("_g")
        return ([f"{k} = {self.expr(test)}", f"if {k} is not True and {k} is not False: _bail()", f"if {k}:"]
                + ["    " + line for line in appends])


# calls whose generated code gives a bool or gives up, whatever their operands
_BOOLEAN_CALLS = frozenset({"_&&_", "_||_", "!_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in",
                            "@not_strictly_false", "__not_strictly_false__"})


def _boolean(node: Any) -> bool:
    """Whether the code generated for ``node`` can only give a bool (or raise): a constant
    bool, ``has()``, a logical operator, a comparison, ``in``, a string test of a constant."""
    kind = node.WhichOneof("expr_kind")
    if kind == "const_expr":
        return type(_constant_value(node.const_expr)) is bool
    if kind == "select_expr":
        return node.select_expr.test_only
    if kind != "call_expr":
        return False
    call = node.call_expr
    arity = len(call.args) + (1 if call.HasField("target") else 0)
    if call.function in _STRING_TESTS:
        return arity == 2 and _string_constant(call.args[-1]) is not None
    return call.function in _BOOLEAN_CALLS and arity == (1 if call.function in ("!_", "@not_strictly_false",
                                                                                  "__not_strictly_false__") else 2)


def _single_map(c: Any) -> list[Any] | None:
    """The elements ``e...`` of ``[x].map(v, [e...])``-shaped comprehensions (one item, no
    condition, the step ``accu + [e...]`` over an accumulator starting as ``[]``); else None."""
    if (c.iter_var2 or c.iter_range.WhichOneof("expr_kind") != "list_expr"
            or len(c.iter_range.list_expr.elements) != 1 or c.iter_range.list_expr.optional_indices
            or not _is_true_constant(c.loop_condition)
            or c.accu_init.WhichOneof("expr_kind") != "list_expr" or c.accu_init.list_expr.elements
            or not _is_call(c.loop_step, "_+_", 2)):
        return None
    left, right = c.loop_step.call_expr.args
    if (not _is_ident(left, c.accu_var) or right.WhichOneof("expr_kind") != "list_expr"
            or right.list_expr.optional_indices or _reads(right, c.accu_var)):
        return None
    return list(right.list_expr.elements)


def _is_int_constant(node: Any, value: int) -> bool:
    return _is_constant(node) and type(_constant_value(node.const_expr)) is int and _constant_value(node.const_expr) == value


def _nodes(node: Any) -> int:
    """The nodes of ``node`` one evaluation visits at most, a comprehension inside counting
    as one (it counts its own iterations)."""
    count, stack = 0, [node]
    while stack:
        current = stack.pop()
        count += 1
        if current.WhichOneof("expr_kind") != "comprehension_expr":
            stack.extend(children(current))
    return count


def _order_free(c: Any) -> bool:
    """Whether a comprehension's value is the same in any iteration order: a boolean
    accumulator (``all``, ``exists``) or a count compared with one (``exists_one``)."""
    if not _is_constant(c.accu_init):
        return False
    init = _constant_value(c.accu_init.const_expr)
    if type(init) is bool:
        return True
    return (init == 0 and type(init) is int and _is_call(c.result, "_==_", 2)
            and _is_ident(c.result.call_expr.args[0], c.accu_var) and _is_constant(c.result.call_expr.args[1]))


def _constant_value(const: Any) -> Any:
    kind = const.WhichOneof("constant_kind")
    if kind == "null_value":
        return None
    if kind in ("bool_value", "int64_value", "double_value", "string_value"):
        return getattr(const, kind)
    raise Unsupported(kind)  # uint and bytes: kinds plain JSON has not


def _is_constant(node: Any) -> bool:
    return node.WhichOneof("expr_kind") == "const_expr" and node.const_expr.WhichOneof("constant_kind") in (
        "null_value", "bool_value", "int64_value", "double_value", "string_value")


def _is_true_constant(node: Any) -> bool:
    return _is_constant(node) and _constant_value(node.const_expr) is True


def _string_constant(node: Any) -> str | None:
    if node.WhichOneof("expr_kind") == "const_expr" and node.const_expr.WhichOneof("constant_kind") == "string_value":
        return node.const_expr.string_value
    return None


def _may_be_optional(node: Any) -> bool:
    """Whether ``node`` can evaluate to an optional (an optional selection or index, below
    plain selections): the selection on it must then go through ``_select_optional``."""
    while node.WhichOneof("expr_kind") == "select_expr" and not node.select_expr.test_only:
        node = node.select_expr.operand
    if node.WhichOneof("expr_kind") != "call_expr":
        return False
    return node.call_expr.function in ("_?._", "_[?_]", "optional.of", "optional.none", "or")


def _optional_chain(node: Any) -> tuple[Any, tuple[str, ...]] | None:
    """``x.?a.?b`` as (x, ("a", "b")) when ``x`` is no optional itself; else None."""
    fields = []
    while _is_call(node, "_?._", 2) and _string_constant(node.call_expr.args[1]) is not None:
        fields.append(_string_constant(node.call_expr.args[1]))
        node = node.call_expr.args[0]
    if not fields or _may_be_optional(node):
        return None
    return node, tuple(reversed(fields))  # (a variable holding an optional: not a map, so NotNative)


def _is_call(node: Any, function: str, arity: int) -> bool:
    return (node.WhichOneof("expr_kind") == "call_expr" and node.call_expr.function == function
            and not node.call_expr.HasField("target") and len(node.call_expr.args) == arity)


def _is_ident(node: Any, name: str) -> bool:
    return node.WhichOneof("expr_kind") == "ident_expr" and node.ident_expr.name == name


def _reads(node: Any, name: str) -> bool:
    """Whether ``node`` reads the variable ``name`` (not a nested comprehension's own)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if _is_ident(current, name):
            return True
        if current.WhichOneof("expr_kind") == "comprehension_expr":
            c = current.comprehension_expr
            stack += [c.iter_range, c.accu_init]
            if name not in (c.iter_var, c.iter_var2, c.accu_var):
                stack += [c.loop_condition, c.loop_step]
            if name != c.accu_var:
                stack.append(c.result)
            continue
        stack.extend(children(current))
    return False


