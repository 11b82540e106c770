"""What becomes of a Kubernetes library call: folded when every argument is a constant (as
Kubernetes' ``OptOptimize`` does), hoisted when its arguments are data selected from a variable
(computed in Python before the evaluation, bound to a hidden variable), else a call of the
runtime env's private ``@k8s.<name>``."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from webhook.cel.common.typenames import TIMESTAMP
from webhook.cel.environment.env import private_name
from webhook.cel.library import LibraryError, Overload
from webhook.cel.library.dispatch import select_overload
from webhook.cel.library.regex import matches as regex_matches
from webhook.cel.optimize.nodes import AstBuilder, constant_value, is_string_const
from webhook.gocompat.time import go_rfc3339_nano

_OPTIONAL_RESULT = {"format-named", "format-validate"}


@dataclass(frozen=True)
class Hoist:
    """A library call on selected data, computed in Python before the C++ evaluation.

    ``args`` are ``("const", value)``, ``("hoisted", variable)`` (an earlier hoist's result)
    or ``("path", variable, steps)`` with steps ``("field", name)`` / ``("index", value)``;
    the result is bound to ``variable``.
    """

    variable: str
    overloads: tuple[Overload, ...]
    args: tuple[tuple, ...]


HOIST_VARIABLES = tuple(f"@h{i}" for i in range(16))


class LibraryCalls(AstBuilder):
    """Folding, hoisting and private calls (``refs``, ``hoist``, ``hoists``, ``python_calls``,
    ``_scope``: set by the pass)."""

    refs: Any
    hoist: bool
    hoists: list[Hoist]
    python_calls: int
    _scope: list[str]

    def try_fold(self, candidates: list[Overload], args: list[Any]) -> Any | None:
        values = []
        for arg in args:
            ok, value = constant_value(arg)
            if not ok:
                return None
            values.append(value)
        overload = select_overload(candidates, values)
        if overload is None or not overload.pure:
            return None
        try:
            result = overload.impl(*values)
        except LibraryError:
            return None  # the runtime call raises it, with the same message
        return self.value_node(result)

    def extractor(self, node: Any) -> tuple | None:
        """How to compute ``node`` in Python from the activation, if it is a constant or a
        selection (``self.spec.memory``, ``self.items[0]``) of a top-level variable."""
        ok, value = constant_value(node)
        if ok:
            return ("const", value)
        steps: list[tuple] = []
        while True:
            kind = node.WhichOneof("expr_kind")
            if kind == "select_expr" and not node.select_expr.test_only:
                steps.append(("field", node.select_expr.field))
                node = node.select_expr.operand
            elif kind == "call_expr" and node.call_expr.function == "_[_]" and len(node.call_expr.args) == 2:
                ok, index = constant_value(node.call_expr.args[1])
                if not ok or not isinstance(index, (str, int)):
                    return None
                steps.append(("index", index))
                node = node.call_expr.args[0]
            elif kind == "ident_expr" and node.ident_expr.name in HOIST_VARIABLES and not steps:
                return ("hoisted", node.ident_expr.name)
            elif kind == "ident_expr":
                name = node.ident_expr.name
                ref = self.refs.get(node.id)
                if name in self._scope or name.startswith("@") or (ref is not None and ref.name != name):
                    return None
                return ("path", name, tuple(reversed(steps)))
            else:
                return None

    def hoist_matches(self, node: Any) -> Any | None:
        """``s.matches('<constant>')`` on selected data: matched in Python before the
        evaluation with the RE2 pattern compiled once (cel-cpp compiles the pattern again on
        every call, which costs far more than matching it)."""
        call = node.call_expr
        args = ([call.target] if call.HasField("target") else []) + list(call.args)
        if len(args) != 2 or not is_string_const(args[1]) or len(self.hoists) >= len(HOIST_VARIABLES):
            return None
        extractors = [self.extractor(arg) for arg in args]
        if not all(extractors) or extractors[0][0] == "const":
            return None
        variable = HOIST_VARIABLES[len(self.hoists)]
        self.hoists.append(Hoist(variable, (_MATCHES,), tuple(extractors)))
        self.refs.pop(node.id, None)
        hoisted = self.ident(variable)
        hoisted.id = node.id
        return hoisted

    def hoist_date_time_string(self, node: Any) -> Any | None:
        """``string(dyn(x))``, how a CRD rule's ``string()`` of a date-time field reaches the
        engine (``rewrite.py``), on selected data: printed in Python from the value, which
        keeps the field's offset as cel-go's timestamp keeps its location ("...+01:00"); a
        cel-cpp timestamp is an instant, printed in UTC. Any other value: the plain program."""
        args = node.call_expr.args
        if len(args) != 1 or len(self.hoists) >= len(HOIST_VARIABLES):
            return None
        marker = args[0]
        if marker.WhichOneof("expr_kind") != "call_expr" or marker.call_expr.function != "dyn" \
                or marker.call_expr.HasField("target") or len(marker.call_expr.args) != 1:
            return None
        extractor = self.extractor(marker.call_expr.args[0])
        if extractor is None or extractor[0] != "path":
            return None
        variable = HOIST_VARIABLES[len(self.hoists)]
        self.hoists.append(Hoist(variable, (_DATE_TIME_STRING,), (extractor,)))
        self.refs.pop(node.id, None)
        hoisted = self.ident(variable)
        hoisted.id = node.id
        return hoisted

    def private_call(self, candidates: list[Overload], args: list[Any]) -> Any:
        overload = candidates[0]
        extractors = [self.extractor(arg) for arg in args] if self.hoist else [None]
        if self.hoist and all(extractors) and len(self.hoists) < len(HOIST_VARIABLES):
            variable = HOIST_VARIABLES[len(self.hoists)]
            self.hoists.append(Hoist(variable, tuple(candidates), tuple(extractors)))
            call = self.ident(variable)
        else:
            self.python_calls += 1
            call = self.call(private_name(overload.function, overload.member), *args)
        if all(c.id in _OPTIONAL_RESULT for c in candidates):
            return self.call("first", target=call)
        return call


_MATCHES = Overload("matches", "matches_string", ("string", "string"), "bool", regex_matches, member=True)


def _date_time_string(value: Any) -> str:
    if not isinstance(value, datetime.datetime) or value.tzinfo is None:
        raise LibraryError("not a timestamp with its offset")  # the plain program answers
    return go_rfc3339_nano(value)


_DATE_TIME_STRING = Overload("string", "timestamp_to_string", (TIMESTAMP,), "string",
                             _date_time_string)
