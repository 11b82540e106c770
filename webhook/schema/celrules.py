"""Running a schema's ``x-kubernetes-validations`` over an object, as the apiserver walks it.

Rule compilation and evaluation belong to ``webhook.cel.crd``; this module decides where
rules run (each non-null node: its own rules in rule order, then its children), which
old value each node sees (by key for maps, by list-map keys or value for lists), how a
result becomes a ``field.Error``, and ratcheting: a failing rule that does not use
``oldSelf``, on a node unchanged from the old object, is a warning instead of an error.
"""

from __future__ import annotations

import re
from typing import Any

from webhook.schema import fielderrors as fe
from webhook.schema.equality import OldItems, json_equal
from webhook.schema.structural import ABSENT, Node

RUNTIME_COST_BUDGET = 10_000_000  # celconfig.RuntimeCELCostBudget, per object

_FIELD_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*(\d+)\s*\]")
_REASONS = {
    "FieldValueForbidden": "forbidden",
    "FieldValueRequired": "required",
    "FieldValueDuplicate": "duplicate",
}


def _cel():
    from webhook.cel import crd  # imported late: the CEL layer is heavy and optional for rule-less schemas

    return crd


def apply_field_path(path: str | None, field_path: str) -> str | None:
    """Append a rule's ``fieldPath`` (``.a.b``, ``['k']``, ``[0]``) as ``field.Path`` would print it."""
    pos = 0
    out = path
    while pos < len(field_path):
        match = _FIELD_PATH_TOKEN.match(field_path, pos)
        if not match:
            return out
        if match.group(1) is not None:
            out = f"{out}.{match.group(1)}" if out else match.group(1)
        elif match.group(2) is not None:
            out = f"{out or ''}[{match.group(2)}]"
        else:
            out = f"{out or ''}[{match.group(3)}]"
        pos = match.end()
    return out


def _child(path: str | None, key: str) -> str:
    return f"{path}.{key}" if path else key


class CelValidator:
    """Evaluates every node's rules of one schema; rules are compiled on first use and kept."""

    __slots__ = ("root", "errors", "warnings", "budget", "_crd")

    def __init__(self, root: Node):
        self.root = root

    def validate(self, obj: Any, old: Any = ABSENT, *, path: str | None = None, node: Node | None = None
                 ) -> tuple[list[fe.FieldError], list[str]]:
        node = node or self.root
        self._crd = _cel()
        self.errors: list[fe.FieldError] = []
        self.warnings: list[str] = []
        self.budget = self._crd.CostBudget(RUNTIME_COST_BUDGET)
        self._walk(node, obj, old, path, node is self.root and path is None, True)
        return self.errors, self.warnings

    def _rules(self, node: Node, is_root: bool, path: str | None):
        if node.compiled_rules is None:
            node.compiled_rules = self._crd.compile_schema_rules(node.raw, is_root=is_root, path=path or "")
        return node.compiled_rules

    def _walk(self, node: Node, value: Any, old: Any, path: str | None, is_root: bool, correlated: bool) -> None:
        if value is None or not node.has_rules:
            return
        if node.rules:
            self._run(node, value, old, path, is_root, correlated)
        if isinstance(value, dict):
            old_map = old if isinstance(old, dict) else None
            props, additional = node.properties, node.additional
            for key, child in node.sorted_properties:
                if child.has_rules and key in value:
                    child_old = old_map.get(key, ABSENT) if old_map is not None else ABSENT
                    self._walk(child, value[key], child_old, _child(path, key), False, correlated)
            if additional is not None and additional.has_rules:
                for key in sorted(value):
                    if key not in props:
                        child_old = old_map.get(key, ABSENT) if old_map is not None else ABSENT
                        self._walk(additional, value[key], child_old, f"{path or ''}[{key}]", False, correlated)
        elif isinstance(value, list) and node.items is not None and node.items.has_rules:
            items = OldItems(node, old) if old is not ABSENT else None
            item_correlated = correlated and node.list_type == "map"
            for i, item in enumerate(value):
                item_old = items.get(item) if items is not None else ABSENT
                self._walk(node.items, item, item_old, f"{path or ''}[{i}]", False, item_correlated)

    def _run(self, node: Node, value: Any, old: Any, path: str | None, is_root: bool, correlated: bool) -> None:
        rules = self._rules(node, is_root, path)
        unchanged: bool | None = None
        scalar = not isinstance(value, (dict, list))
        node_type = _schema_type(node, value)
        for result in rules.evaluate(value, old, budget=self.budget):
            if result.passed:
                continue
            if result.error is not None:
                self.errors.append(fe.invalid(path, node_type, result.error))
                continue
            field = apply_field_path(path, result.field_path) if result.field_path else path
            err = _rule_error(field, value if scalar else fe.OMIT, result.message or "", result.reason)
            if not _uses_old_self(rules, result.index) and old is not ABSENT and correlated:
                if unchanged is None:
                    unchanged = json_equal(value, old)
                if unchanged:
                    self.warnings.append(str(err))
                    continue
            self.errors.append(err)


def _uses_old_self(rules: Any, index: int) -> bool:
    per_rule = getattr(rules, "rule_uses_old_self", None)
    if per_rule is not None:
        return bool(per_rule[index])
    return bool(getattr(rules, "uses_old_self", False))


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
