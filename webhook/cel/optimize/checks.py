"""Kubernetes' compile-time checks on a checked AST: homogeneous aggregate literals (cel-go's
validator), constant regexes, ``format`` strings, ``duration`` and ``timestamp`` literals as
Go's parsers read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.cel.library.regex import RegexError, compile_pattern
from webhook.cel.library.strings_format import check_format
from webhook.cel.optimize.nodes import AstBuilder, is_string_const
from webhook.gocompat.time import parse_go_duration, valid_rfc3339


@dataclass
class Issue:
    node_id: int
    message: str


class LiteralChecks(AstBuilder):
    """The checks, recording ``Issue``s (``issues``; ``mixed_literals``, ``_exempt``: set by the pass)."""

    issues: list[Issue]
    mixed_literals: bool
    _exempt: bool

    def check_homogeneous(self, elements: list[Any], optional_indices: Any, *, first_only: bool) -> list[Issue]:
        """Kubernetes' HomogeneousAggregateLiterals (cel-go's validator): the elements (or keys,
        or values) of a literal all have the first one's type, ``dyn`` included; ``format``'s
        argument list is exempt. A list reports its first mismatch (appended here), a map
        every one (returned, for the caller to order). With ``mixed_literals``, ``dyn`` matches
        any type."""
        issues: list[Issue] = []
        if self._exempt:
            return issues
        first = None
        for i, element in enumerate(elements):
            t = self.type_of(element)
            if i in optional_indices and t.startswith("optional_type("):
                t = t[len("optional_type(") : -1]
            if first is None:
                first = t
            elif t != first and not (self.mixed_literals and "dyn" in (t, first)):
                issues.append(Issue(element.id, f"expected type '{first}' but found '{t}'"))
                if first_only:
                    break
        if first_only:
            self.issues += issues
        return issues

    @staticmethod
    def _entry_of(entries: list[Any], node_id: int) -> int:
        return next(i for i, e in enumerate(entries) if node_id in (e.map_key.id, e.value.id))

    def check_literals(self, node: Any) -> None:
        call = node.call_expr
        args = list(call.args)
        if call.function == "matches" and args and is_string_const(args[-1]):
            try:
                compile_pattern(args[-1].const_expr.string_value)
            except RegexError:
                self.issues.append(Issue(args[-1].id, "invalid matches argument"))
        elif call.function in ("find", "findAll") and call.HasField("target") and args and is_string_const(args[0]):
            try:
                compile_pattern(args[0].const_expr.string_value)
            except RegexError as err:
                self.issues.append(Issue(args[0].id, f"program instantiation failed: {err}"))
        elif call.function == "format" and call.HasField("target") and is_string_const(call.target) and args:
            if args[0].WhichOneof("expr_kind") == "list_expr":
                types = [self.type_of(e) for e in args[0].list_expr.elements]
                problem = check_format(call.target.const_expr.string_value, types)
                if problem:
                    self.issues.append(Issue(node.id, problem))
        elif call.function == "duration" and len(args) == 1 and is_string_const(args[0]):
            if parse_go_duration(args[0].const_expr.string_value) is None:
                self.issues.append(Issue(args[0].id, "invalid duration argument"))
        elif call.function == "timestamp" and len(args) == 1 and is_string_const(args[0]):
            if not valid_rfc3339(args[0].const_expr.string_value):
                self.issues.append(Issue(args[0].id, "invalid timestamp argument"))
