"""Whether a policy applies to a request: its resource rules (kept per rule key), then its
object and namespace selectors."""

from __future__ import annotations

from typing import Any, Mapping

from webhook.policy.model import LabelSelector, MatchConstraints
from webhook.policy.scope import PolicyInput
from webhook.state import from_label_selector
from webhook.state.selectors import Selector

_RULED_LIMIT = 1024


class Matcher:
    """A policy's ``matchConstraints``, compiled."""

    __slots__ = ("rules", "namespace_selector", "object_selector", "_selects", "_ruled")

    def __init__(self, constraints: MatchConstraints) -> None:
        self.rules = constraints.resourceRules
        self.namespace_selector = _selector(constraints.namespaceSelector)
        self.object_selector = _selector(constraints.objectSelector)
        self._selects = not (self.namespace_selector.empty and self.object_selector.empty)
        self._ruled: dict[tuple[Any, ...], bool] = {}  # (group, kind, operation, subresource) -> the rules match

    def matches(self, inp: PolicyInput) -> bool:
        key = inp.rule_key
        ruled = self._ruled.get(key)
        if ruled is None:
            if len(self._ruled) >= _RULED_LIMIT:  # requests name any kind they like: keep it bounded
                self._ruled.clear()
            ruled = self._ruled[key] = self.rules_match(*key)
        if not ruled or not self._selects:
            return ruled
        subject = inp.object if inp.object is not None else inp.old_object
        if not self.object_selector.empty and not self.object_selector.matches(_labels(subject)):
            return False
        if not self.namespace_selector.empty:
            if inp.kind == "Namespace" and inp.group == "":
                return self.namespace_selector.matches(_labels(subject))
            namespace = inp.request.get("namespace")
            if namespace:  # cluster-scoped objects are not filtered by namespace
                labels = _labels(inp.namespace_object) or {"kubernetes.io/metadata.name": namespace}
                return self.namespace_selector.matches(labels)
        return True

    def rules_match(self, group: str, kind: str, operation: Any, sub: str) -> bool:
        """Whether the resource rules match requests with this key (before the selectors)."""
        return any(("*" in rule.apiGroups or group in rule.apiGroups)
                   and ("*" in rule.kinds or kind in rule.kinds)
                   and ("*" in rule.operations or operation in rule.operations)
                   and (not sub or sub in rule.subresources or "*" in rule.subresources) for rule in self.rules)


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _selector(selector: LabelSelector | None) -> Selector:
    return from_label_selector(selector.model_dump() if selector is not None else None)
