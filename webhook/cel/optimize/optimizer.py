"""The pass: one walk over a checked AST that checks (``checks``), rewrites (``plain_cel``,
``guards``) and decides every library call (``library_calls``), in cel-go's order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.cel.environment.env import MAP_INSERT_FUNCTION
from webhook.cel.library import OVERLOADS
from webhook.cel.optimize.checks import Issue, LiteralChecks
from webhook.cel.optimize.guards import STRING_GUARDS, Guards
from webhook.cel.optimize.library_calls import Hoist, LibraryCalls
from webhook.cel.optimize.nodes import OPAQUE_NAMES
from webhook.cel.optimize.plain_cel import NATIVE_LISTS, PlainCel
from webhook.cel.common.typenames import TIMESTAMP

OVERLOAD_BY_ID = {o.id: o for o in OVERLOADS}

# conversions cel-cpp declares and cel-go does not
_CEL_CPP_ONLY = frozenset({"int64_to_duration", "duration_to_int64"})


_STRING_TO_NUMBER = {"int": "string_to_int64", "uint": "string_to_uint64", "double": "string_to_double"}


_TIME_TO_STRING = {"timestamp_to_string", "duration_to_string"}


@dataclass
class Result:
    checked: Any
    issues: list[Issue] = field(default_factory=list)
    optional_root: bool = False
    python_calls: int = 0  # library calls left to Python at runtime (per evaluation, statically)
    hoists: tuple[Hoist, ...] = ()


class Optimizer(Guards, PlainCel, LibraryCalls, LiteralChecks):
    def __init__(self, checked: Any, hoist: bool = False, mixed_literals: bool = False) -> None:
        self.checked = checked
        self.mixed_literals = mixed_literals
        self.types = checked.type_map
        self.refs = checked.reference_map
        self.issues: list[Issue] = []
        self.python_calls = 0
        self.hoist = hoist
        self.hoists: list[Hoist] = []
        self._scope: list[str] = []  # comprehension variables around the visited node
        self._exempt = False  # inside format()'s arguments
        self._next_id = max([0, *self._ids(checked.expr)]) + 1

    def run(self) -> Result:
        root = self.checked.expr
        root_type = self.type_of(root)
        # cel-cpp's checker types an optional index of a dyn value (``x[?0]``) as dyn
        optional_root = root_type.startswith("optional_type") or (
            root.WhichOneof("expr_kind") == "call_expr" and root.call_expr.function == "_[?_]")
        expr = self.visit(root)
        if optional_root:
            expr = self.bind("@root", expr, lambda o: self.cond(
                self.call("hasValue", target=o()), self.list_of(self.call("value", target=o())), self.list_of()))
        self.checked.expr.CopyFrom(expr)
        return Result(self.checked, self.issues, optional_root, self.python_calls, tuple(self.hoists))

    def visit(self, node: Any) -> Any:
        kind = node.WhichOneof("expr_kind")
        if kind == "select_expr":
            operand = self.visit(node.select_expr.operand)
            node.select_expr.operand.CopyFrom(operand)
            if self.type_of(operand) in OPAQUE_NAMES:
                self.issues.append(Issue(node.id, f"undefined field '{node.select_expr.field}'"))
        elif kind == "call_expr":
            return self.visit_call(node)
        elif kind == "list_expr":
            for element in node.list_expr.elements:
                element.CopyFrom(self.visit(element))
            self.check_homogeneous(list(node.list_expr.elements), node.list_expr.optional_indices, first_only=True)
        elif kind == "struct_expr":
            for entry in node.struct_expr.entries:
                if entry.HasField("map_key"):
                    entry.map_key.CopyFrom(self.visit(entry.map_key))
                entry.value.CopyFrom(self.visit(entry.value))
            if not node.struct_expr.message_name:
                entries = list(node.struct_expr.entries)
                optional = [i for i, e in enumerate(entries) if e.optional_entry]
                keys = self.check_homogeneous([e.map_key for e in entries], [], first_only=False)
                values = self.check_homogeneous([e.value for e in entries], optional, first_only=False)
                # cel-go reports an entry's key, then its value
                self.issues += sorted(keys + values, key=lambda issue: self._entry_of(entries, issue.node_id))
        elif kind == "comprehension_expr":
            c = node.comprehension_expr
            for part in ("iter_range", "accu_init"):
                getattr(c, part).CopyFrom(self.visit(getattr(c, part)))
            self._scope += [c.iter_var, c.iter_var2, c.accu_var]
            for part in ("loop_condition", "loop_step", "result"):
                getattr(c, part).CopyFrom(self.visit(getattr(c, part)))
            del self._scope[-3:]
        return node

    def visit_call(self, node: Any) -> Any:
        call = node.call_expr
        if call.HasField("target"):
            call.target.CopyFrom(self.visit(call.target))
        saved = self._exempt
        self._exempt = saved or (call.function == "format" and call.HasField("target"))
        for arg in call.args:
            arg.CopyFrom(self.visit(arg))
        self._exempt = saved
        self.check_literals(node)
        if call.function == "format" and call.HasField("target") and len(call.args) == 1 \
                and call.args[0].WhichOneof("expr_kind") == "list_expr":
            self.exact_arguments(call.args[0].list_expr)
        ref = self.refs.get(node.id)
        ids = list(ref.overload_id) if ref is not None else []
        if ids and set(ids) <= _CEL_CPP_ONLY:
            types = ", ".join(self.type_of(arg) for arg in call.args)
            self.issues.append(Issue(node.id, f"found no matching overload for '{call.function}' applied to '({types})'"))
        if call.function == "cel.@mapInsert":
            # the two-variable comprehension macros' helper has no runtime in cel-expr-python
            self.refs.pop(node.id, None)
            self.python_calls += 1
            call.function = MAP_INSERT_FUNCTION
            return node
        if call.function in ("optional.unwrap", "unwrapOpt"):
            return self.native_unwrap(node)
        if "duration_to_milliseconds" in ids:
            return self.duration_milliseconds(node, maybe_timestamp="timestamp_to_milliseconds" in ids)
        if call.function == "string" and _TIME_TO_STRING & set(ids):
            hoisted = self.hoist_date_time_string(node) if self.hoist else None
            if hoisted is not None:
                return hoisted
            return self.go_time_string(node, only_time=set(ids) <= _TIME_TO_STRING)
        if self.hoist and call.function == "matches":
            hoisted = self.hoist_matches(node)
            if hoisted is not None:
                return hoisted
        if call.function == "lists.range" and len(call.args) == 1 and call.args[0].WhichOneof("expr_kind") != "const_expr":
            return self.guard_range(node)
        if call.function == "optional.ofNonZeroValue" and len(call.args) == 1 \
                and self.type_of(call.args[0]) in ("dyn", TIMESTAMP):
            return self.go_zero_timestamp(node)
        if call.function == "duration" and "string_to_duration" in ids and len(call.args) == 1:
            return self.go_duration(node)
        if call.function == "timestamp" and "string_to_timestamp" in ids and len(call.args) == 1:
            return self.go_timestamp(node)
        parsed_as = _STRING_TO_NUMBER.get(call.function)
        if parsed_as is not None and parsed_as in ids and len(call.args) == 1:
            return self.go_number_syntax(node)
        if call.function == "flatten" and len(call.args) == 1 and self.type_of(call.args[0]) != "int":
            return self.guard_flatten_depth(node)
        if len(ids) == 1 and ids[0] in STRING_GUARDS:
            return self.guard_string_call(node, ids[0])
        candidates = [OVERLOAD_BY_ID[i] for i in ids if i in OVERLOAD_BY_ID]
        if not candidates:
            return node
        if len(candidates) < len(ids):
            return self.mixed_call(node, candidates)
        args = ([call.target] if call.HasField("target") else []) + list(call.args)
        folded = self.try_fold(candidates, args)
        if folded is not None:
            folded.id = node.id
            return folded
        function = candidates[0].function
        if function in NATIVE_LISTS:
            rewritten = self.native_list(function, args, node)
        elif function in ("find", "findAll"):
            rewritten = self.native_regex(function, args)
        else:
            rewritten = None
        if rewritten is None:
            rewritten = self.private_call(candidates, args)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten


def optimize(checked: Any, *, hoist: bool = False, mixed_literals: bool = False) -> Result:
    """``mixed_literals``: a list or map literal may mix ``dyn`` values with typed ones (see
    ``Engine.compile``)."""
    return Optimizer(checked, hoist, mixed_literals).run()
