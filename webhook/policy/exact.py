"""A policy's stage expression by expression: the exact path.

Each expression is evaluated on its own, in the apiserver's order (lookups, matchConditions,
variables, then the mutations or the validations, warnings and audit annotations); its
errors and the failed rules' messages are written as the apiserver writes them, and
``--explain`` traces every value. The batch path (``batch_path``) answers the common case in
one engine call and comes here whenever it cannot answer exactly.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping

import jsonpatch

from webhook import documents
from webhook.cel import CelError
from webhook.policy.arguments import list_labelled, list_selected
from webhook.policy.expression import Expression
from webhook.policy.messages import (annotation_text, audit_annotation_key, denial, expression_error,
                                     failed_expression, is_message, message_text, patch_error, selector_error,
                                     traced_value)
from webhook.policy.model import Lookup, ParamRef
from webhook.policy.scope import PolicyInput
from webhook.policy.verdict import Trace, Verdict
from webhook.state import ClusterState
from webhook.state.selectors import SelectorError

Tracer = Callable[[Trace], None] | None


class ExactPath:
    """A policy's compiled expressions, section by section, and their evaluation one by one."""

    def __init__(self, name: str, param_ref: ParamRef | None, remember: Callable[[Any], None], *,
                 lookups: list[tuple[Lookup, dict[str, Expression]]],
                 match_conditions: list[tuple[str, Expression]],
                 variables: list[tuple[str, Expression]],
                 mutations: list[tuple[str, Expression]],
                 validations: list[tuple[Any, Expression, Expression | None]],
                 warnings: list[tuple[Any, Expression, Expression | None]],
                 audit_annotations: list[tuple[str, Expression]]) -> None:
        self.name = name
        self.param_ref = param_ref
        # declares an object the state stores (or one parsed from it) as it stays: the engine's
        # bound sizes it once (``KnownSizes``)
        self.remember = remember
        self.lookups = lookups
        self.match_conditions = match_conditions
        self.variables = variables
        self.mutations = mutations
        self.validations = validations
        self.warnings = warnings
        self.audit_annotations = audit_annotations
        self._params_cache: tuple[Any, Any] | None = None
        self._params_kept: tuple[Any, int, Any] | None = None  # (state, generation, params): ``params``

    def run(self, inp: PolicyInput, verdict: Verdict, mutating: bool, validates_here: bool, trace: Tracer) -> bool:
        """The stage on ``inp`` into ``verdict``; False when a matchCondition is not true (the
        policy does not apply). ``validates_here``: the validations run in this stage."""
        activation: dict[str, Any] = {
            "object": inp.object,
            "oldObject": inp.old_object,
            "request": inp.request,
            "namespaceObject": inp.namespace_object,
            "params": self.params(inp.state),
            "lookups": {},
            "variables": {},
        }
        for lookup, exprs in self.lookups:  # in order: a lookup may use the ones before it
            activation["lookups"][lookup.name] = self.lookup(lookup, exprs, activation, inp.state, trace)
        if self.lookups:
            verdict.lookups = activation["lookups"]
        for name, expr in self.match_conditions:
            value = self.eval(expr, activation, f"matchConditions.{name}", trace, _is_bool)
            if value is not True:
                return False
        for name, expr in self.variables:
            activation["variables"][name] = self.eval(expr, activation, f"variables.{name}", trace)
        if mutating:
            self.mutate(activation, verdict, trace)
        if validates_here:
            self.validate(activation, verdict, trace)
        return True

    def eval(self, expr: Expression, activation: Mapping[str, Any], rule: str, trace: Tracer,
             accept: Callable[[Any], bool] | None = None) -> Any:
        """``accept``: the answers a fast path may give alone (see ``Program.evaluate``)."""
        try:
            value = expr.evaluate(activation, accept)
        except CelError as exc:
            if trace:
                trace(Trace(self.name, rule, expr.source, expr.seen(activation), f"error: {exc}"))
            raise expression_error(self.name, rule, expr.source, exc) from exc
        if trace:
            trace(Trace(self.name, rule, expr.source, expr.seen(activation), traced_value(value)))
        return value

    def lookup(self, lookup: Lookup, exprs: dict[str, Expression], activation, state: ClusterState, trace: Tracer,
               values: dict[str, Any] | None = None) -> Any:
        """What a lookup finds; ``values``: its arguments when already evaluated."""
        if values is None:
            values = {f: self.eval(e, activation, f"lookups.{lookup.name}.{f}", trace) for f, e in exprs.items()}
        return self._fetch(lookup, values, state)

    def _fetch(self, lookup: Lookup, values: Mapping[str, Any], state: ClusterState) -> Any:
        """What a lookup with these arguments finds."""
        if lookup.get is not None:
            name = values.get("name")
            if not isinstance(name, str) or not name:
                return None
            namespace = values.get("namespace")
            found = state.get(lookup.get.apiVersion, lookup.get.kind, name, namespace or None)
            if found is not None:
                self.remember(found)
            return found
        source = lookup.list
        if source.selector is not None:
            try:
                found = list_selected(state, source.apiVersion, source.kind, values.get("namespace") or None,
                                      values.get("selector"))
            except SelectorError as exc:
                raise selector_error(self.name, lookup.name, exc) from None
        else:
            found = list_labelled(state, source.apiVersion, source.kind, values.get("namespace") or None,
                                  values.get("labelSelector") or None)
        for obj in found:
            self.remember(obj)  # stored objects are never mutated: sized once for the cost bound
        return found

    def params(self, state: ClusterState) -> Any:
        """The params object (or its ``dataKey`` parsed), kept while the state's objects stay
        the same (``ClusterState.generation``, bumped by every write)."""
        if self.param_ref is None:
            return None
        generation = getattr(state, "generation", None)
        kept = self._params_kept
        if generation is not None and kept is not None and kept[0] is state and kept[1] == generation:
            return kept[2]
        params = self._read_params(state)
        if generation is not None:
            self._params_kept = (state, generation, params)
        return params

    def _read_params(self, state: ClusterState) -> Any:
        ref = self.param_ref
        if ref.namespace:
            source = state.get(ref.apiVersion, ref.kind, ref.name, ref.namespace)
        else:
            source = next((o for o in state.list(ref.apiVersion, ref.kind)
                           if (o.get("metadata") or {}).get("name") == ref.name), None)
        if source is None or not ref.dataKey:
            if source is not None:
                self.remember(source)
            return source
        cached = self._params_cache
        if cached is not None and cached[0] is source:  # stored objects are never mutated in place
            return cached[1]
        text = (source.get("data") or {}).get(ref.dataKey)
        # through the one reader: the nesting limit holds for params too; an unreadable config
        # is an unknown config
        found = documents.parse(text, ref.dataKey, unwrap_lists=False) if isinstance(text, str) else None
        parsed = found.documents[0].content if found is not None and found.error is None and found.documents else None
        self._params_cache = (source, parsed)
        if isinstance(parsed, dict):
            self.remember(parsed)  # kept per source and never mutated: sized once for the cost bound
        return parsed

    def _message(self, rule: Any, expr: Expression | None, activation, default: str, trace: Tracer,
                 where: str) -> str:
        if expr is None:
            return rule.message or default
        try:
            value = expr.evaluate(activation)
        except CelError:
            value = None  # as the apiserver: a failing messageExpression falls back to message
        if trace and is_message(value):
            trace(Trace(self.name, where, expr.source, expr.seen(activation), repr(value)))
        return message_text(rule, value, default)

    def validate(self, activation, verdict: Verdict, trace: Tracer) -> None:
        """The validations, warnings and audit annotations into ``verdict``."""
        for i, (rule, expr, message_expr) in enumerate(self.validations):
            where = f"validations[{i}]"
            if self.eval(expr, activation, where, trace, _is_true) is True:
                continue
            message = self._message(rule, message_expr, activation, failed_expression(expr.source), trace,
                                    f"{where}.messageExpression")
            verdict.denials.append(denial(self.name, rule, message, i))
        for i, (rule, expr, message_expr) in enumerate(self.warnings):
            where = f"warnings[{i}]"
            if self.eval(expr, activation, where, trace, _is_true) is True:
                continue
            message = self._message(rule, message_expr, activation, failed_expression(expr.source), trace,
                                    f"{where}.messageExpression")
            verdict.warnings.append(message)
            verdict.warning_rules.setdefault(message, where)
        for key, expr in self.audit_annotations:
            value = self.eval(expr, activation, f"auditAnnotations.{key}", trace, _is_text)
            if value is not None:
                verdict.audit_annotations[audit_annotation_key(self.name, key)] = annotation_text(value)

    def mutate(self, activation, verdict: Verdict, trace: Tracer, start: int = 0) -> None:
        """The mutations from ``start`` on, each seeing the object the ones before made."""
        for i, (patch_type, expr) in enumerate(self.mutations[start:], start):
            where = f"mutations[{i}]"
            patch = self.eval(expr, activation, where, trace, _any)
            activation["object"] = self.apply(patch_type, patch, activation["object"], where)  # later mutations see it
        verdict.object = activation["object"]

    def apply(self, patch_type: str, patch: Any, obj: Any, where: str) -> Any:
        """``obj`` with a mutation's patch applied (a new object; ``obj`` is left as it is)."""
        try:
            if patch_type == "JSONPatch":  # on a copy: the input is the request's (or a policy's) object
                return jsonpatch.apply_patch(_copy_json(obj), list(patch), in_place=True) if patch else obj
            return merge_apply(obj, patch) if patch is not None else obj
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, ValueError) as exc:
            raise patch_error(self.name, where, patch, exc) from exc


def merge_apply(target: Any, patch: Any) -> Any:
    """Apply-configuration merge: maps merge key by key, anything else replaces."""
    if not isinstance(target, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target)
    for key, value in patch.items():
        merged[key] = merge_apply(target.get(key), value) if key in target else copy.deepcopy(value)
    return merged


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (what ``copy.deepcopy`` makes, without its memo: JSON shares no references)."""
    kind = type(value)
    if kind is dict:
        return {key: _copy_json(item) for key, item in value.items()}
    if kind is list:
        return [_copy_json(item) for item in value]
    return value if kind in (str, int, float, bool, type(None)) else copy.deepcopy(value)


def _is_true(value: Any) -> bool:
    return value is True


def _is_bool(value: Any) -> bool:
    return value is True or value is False


def _is_text(value: Any) -> bool:
    return value is None or type(value) is str


def _any(value: Any) -> bool:
    return True
