"""Running a schema's ``x-kubernetes-validations`` over an object, as the apiserver walks it.

Rule compilation and evaluation belong to ``webhook.cel.crd``; this module decides where
rules run (each non-null node: its own rules in rule order, then its children), which
old value each node sees (by key for maps, by list-map keys or value for lists), how a
result becomes a ``field.Error``, and ratcheting: a failing rule that does not use
``oldSelf``, on a node unchanged from the old object, is a warning instead of an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webhook.cel.ladder import DECLINED
from webhook.cel.limits import RUNTIME_CEL_COST_BUDGET
from webhook.schema import fielderrors as fe
from webhook.schema.equality import OldItems, json_equal, unchanged
from webhook.schema.structural import ABSENT, Node

if TYPE_CHECKING:
    from webhook.cel import Evaluator

_REASONS = {
    "FieldValueForbidden": "forbidden",
    "FieldValueRequired": "required",
    "FieldValueDuplicate": "duplicate",
}


def _cel():
    from webhook.cel import crd  # imported late: the CEL layer is heavy and optional for rule-less schemas

    return crd


def apply_field_path(path: str | None, field_path: str) -> str | None:
    """Join a rule's (normalised, relative) fieldPath — ``a.b``, ``m[key]``, ``[key]`` — to the node's path."""
    if not field_path:
        return path
    if not path:
        return field_path
    return f"{path}{field_path}" if field_path.startswith("[") else f"{path}.{field_path}"


def _child(path: str | None, key: str) -> str:
    return f"{path}.{key}" if path else key


_UNBUILT: Any = object()


class CelValidator:
    """Evaluates every node's rules of one schema; rules are compiled on first use and kept.

    ``evaluator``: the engine the rules are compiled and evaluated on, and the fast routes that
    may run (``Evaluator.routes``)."""

    __slots__ = ("root", "evaluator", "_plans")

    def __init__(self, root: Node, evaluator: Evaluator):
        self.root = root
        self.evaluator = evaluator
        self._plans = [_UNBUILT, _UNBUILT]   # the batch plans for CREATE and UPDATE, built on first use

    def validate(self, obj: Any, old: Any = ABSENT, *, prefix: str | None = None, is_root: bool = True,
                 ratchet: bool = True) -> tuple[list[fe.FieldError], list[str]]:
        """(errors, warnings) of every rule over ``obj``, down the ladder's object stage
        (``webhook.cel.ladder``); ``old`` the stored object on UPDATE. ``prefix``: the field path
        of ``obj`` when it is a value inside something else (a CRD's default), ``is_root``
        whether it is a resource's root; ``ratchet=False``: a failing rule on an unchanged
        value is an error all the same (the apiserver checking a default)."""
        for step in self.evaluator.routes.object_steps:
            answer = getattr(self, step)(obj, old, prefix, is_root, ratchet)
            if answer is not DECLINED:
                return answer
        raise AssertionError("walk_route always answers")

    # -- the object stage's routes, in the ladder's order ------------------------------------

    def object_batch_route(self, obj: Any, old: Any, prefix: str | None, is_root: bool, ratchet: bool) -> Any:
        """Every batched rule of the object as one program (``celbatch``): the answer when they
        all hold and the budget is not at stake (the walk runs the rules it left out)."""
        if prefix is not None or not ratchet:
            return DECLINED
        plan = self.plan(old is not ABSENT)
        if plan is None:
            return DECLINED
        charged = plan.holds(obj, old, self.evaluator.routes)
        if charged is None or charged >= RUNTIME_CEL_COST_BUDGET:
            return DECLINED
        if not plan.remaining:
            return [], []
        walk = _Walk(_cel(), self.evaluator, only=plan.remaining, reach=plan.reach,
                     budget=RUNTIME_CEL_COST_BUDGET - charged)
        walk.node(self.root, obj, old, None, True, True)
        if walk.budget.depleted:  # the walk over every rule could run out at another point
            return DECLINED
        return walk.errors, walk.warnings

    def walk_route(self, obj: Any, old: Any, prefix: str | None, is_root: bool, ratchet: bool) -> Any:
        """Node by node, rule by rule, as the apiserver walks: every error and warning."""
        walk = _Walk(_cel(), self.evaluator)
        walk.node(self.root, obj, old, prefix, is_root, ratchet)
        return walk.errors, walk.warnings

    def plan(self, update: bool) -> Any:
        """The object batch's plan for CREATE or UPDATE (built on first use; None: nothing batches)."""
        plan = self._plans[update]
        if plan is _UNBUILT:
            from webhook.schema.celbatch import build_plan  # (late, as ``_cel``: it loads the CEL layer)

            try:
                plan = build_plan(self.root, update=update, evaluator=self.evaluator)
            except Exception:  # an engine fault while planning: the walk alone answers
                plan = None
            self._plans[update] = plan
        return plan


class _Walk:
    """The state of one validation (results so far, the request's cost budget); ``only``
    limits it to some rules (by schema node), as after the batch, and ``reach`` to the nodes
    holding them or leading to them."""

    __slots__ = ("errors", "warnings", "budget", "_crd", "_evaluator", "_only", "_reach")

    def __init__(self, crd: Any, evaluator: Evaluator, *, only: dict[int, Any] | None = None,
                 reach: frozenset[int] | None = None, budget: int = RUNTIME_CEL_COST_BUDGET):
        self._crd = crd
        self._evaluator = evaluator
        self._only = only
        self._reach = reach
        self.errors: list[fe.FieldError] = []
        self.warnings: list[str] = []
        self.budget = crd.CostBudget(budget)

    def _rules(self, node: Node, is_root: bool, path: str | None):
        if node.compiled_rules is None:
            try:
                node.compiled_rules = self._crd.compile_schema_rules(node.raw, is_root=is_root, path=path or "",
                                                                     engine=self._evaluator.engine)
            except self._crd.CrdRuleError as exc:  # a CRD the apiserver would not have admitted
                node.compiled_rules = exc
            except Exception as exc:  # an engine fault: reported on the node, never a crash
                node.compiled_rules = RuntimeError(f"{type(exc).__name__}: {exc}")
        return node.compiled_rules

    def node(self, node: Node, value: Any, old: Any, path: str | None, is_root: bool, correlated: bool) -> None:
        if value is None or not self._reaches(node) or self.budget.exhausted:
            return  # nothing to check, or the cost budget ran out: no further rules run
        if node.rules:
            self._run(node, value, old, path, is_root, correlated)
        if isinstance(value, dict):
            old_map = old if isinstance(old, dict) else None
            props, additional = node.properties, node.additional
            for key, child in node.sorted_properties:
                if key in value and self._reaches(child):
                    child_old = old_map.get(key, ABSENT) if old_map is not None else ABSENT
                    self.node(child, value[key], child_old, _child(path, key), False, correlated)
            if additional is not None and self._reaches(additional):
                for key in sorted(value):
                    if key not in props:
                        child_old = old_map.get(key, ABSENT) if old_map is not None else ABSENT
                        self.node(additional, value[key], child_old, f"{path or ''}[{key}]", False, correlated)
        elif isinstance(value, list) and node.items is not None and self._reaches(node.items):
            self._walk_items(node, value, old, path, correlated)

    def _reaches(self, node: Node) -> bool:
        return node.has_rules if self._reach is None else id(node) in self._reach

    def _walk_items(self, node: Node, value: list, old: Any, path: str | None, correlated: bool) -> None:
        """Map-list items correlate with the old item of the same keys; other lists' items only
        when the whole list is unchanged (then item i is old item i, for ratcheting)."""
        if node.list_type == "map":
            items = OldItems(node, old) if old is not ABSENT else None
            olds = [items.get(item) if items is not None else ABSENT for item in value]
        elif correlated and isinstance(old, list) and json_equal(value, old):
            olds = old
        else:
            olds = [ABSENT] * len(value)
            correlated = False
        for i, item in enumerate(value):
            self.node(node.items, item, olds[i], f"{path or ''}[{i}]", False, correlated)

    def _run(self, node: Node, value: Any, old: Any, path: str | None, is_root: bool, correlated: bool) -> None:
        if self._only is not None:
            rules = self._only.get(id(node))
            if rules is None:
                return
        else:
            rules = self._rules(node, is_root, path)
        node_type = _schema_type(node, value)
        if isinstance(rules, Exception):
            self.errors.append(fe.invalid(path, node_type, f"rule compiler initialization error: {rules}"))
            return
        same: bool | None = None
        scalar = not isinstance(value, (dict, list))
        cel_old = self._crd.ABSENT if old is ABSENT else old
        try:
            results = rules.evaluate(value, cel_old, budget=self.budget, routes=self._evaluator.routes)
        except Exception as exc:  # an engine fault must not lose the answer: report it on the node
            self.errors.append(fe.internal(path, f"evaluating validation rules: {type(exc).__name__}: {exc}"))
            return
        for result in results:
            if result.passed:
                continue
            if result.error is not None:
                self.errors.append(fe.invalid(path, node_type, result.error))
                continue
            field = apply_field_path(path, result.field_path) if result.field_path else path
            err = _rule_error(field, value if scalar else fe.OMIT, result.message or "", result.reason)
            if not _uses_old_self(rules, result.index) and old is not ABSENT and correlated and not is_root:
                if same is None:
                    same = unchanged(node, value, old)
                if same:
                    self.warnings.append(str(err))
                    continue
            self.errors.append(err)


def _uses_old_self(rules: Any, index: int) -> bool:
    for rule in rules.rules:
        if rule.index == index:
            return rule.uses_old_self
    return rules.uses_old_self


def _schema_type(node: Node, value: Any) -> str:
    """The schema's ``type``, which the apiserver prints as the value of a rule's runtime error."""
    return node.type


def _rule_error(path: str | None, value: Any, message: str, reason: str | None) -> fe.FieldError:
    kind = _REASONS.get(reason or "")
    if kind == "forbidden":
        return fe.forbidden(path, message)
    if kind == "required":
        return fe.required(path, message)
    if kind == "duplicate":
        return fe.duplicate(path, value)
    return fe.invalid(path, value, message)
