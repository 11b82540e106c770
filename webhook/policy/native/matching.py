"""Whether a policy's ``matchConstraints`` or a binding's ``matchResources`` match a request, as
``k8s.io/apiserver/pkg/admission/plugin/policy/matching`` decides: the namespace selector, the
object selector, the excluded rules, then the rules (``resourceNames`` included); a rule as
``webhook/predicates/rules`` matches it (scope, operation, group, version, resource and
subresource). ``matchPolicy: Equivalent`` also tries the other served versions of the resource."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from webhook.policy.native.model import MatchResources, Rule
from webhook.state.selectors import SelectorError, from_label_selector


@dataclass(frozen=True)
class Attributes:
    """The request as the admission plugins see it (``admission.Attributes``)."""

    operation: str
    group: str
    version: str
    kind: str
    resource: str
    subresource: str
    name: str
    namespace: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    request: dict[str, Any]  # the AdmissionRequest the CEL expressions read as ``request``

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class MatchError(Exception):
    """A selector that cannot be parsed or a namespace that cannot be read: a configuration error
    (the policy's failurePolicy decides), or ``unknown`` when the cluster view does not show it."""

    def __init__(self, message: str, *, unknown: str = "") -> None:
        super().__init__(message)
        self.unknown = unknown


# (group, resource) -> the other (group, version, resource) serving it: matchPolicy Equivalent
Equivalents = Callable[[str, str, str], list[tuple[str, str, str]]]
# a namespace's labels; raises MatchError when it is absent (``unknown`` when the view may not show it)
NamespaceLabels = Callable[[str], "dict[str, str]"]


def _selector(selector: dict[str, Any], what: str):
    try:
        return from_label_selector(selector)
    except (SelectorError, KeyError, TypeError, AttributeError) as exc:
        raise MatchError(f"{what}: {exc}") from None


def rule_matches(rule: Rule, attrs: Attributes, *, group: str, version: str, resource: str) -> bool:
    """``rules.Matcher.Matches``: scope, operation, group, version, resource/subresource."""
    namespaces = resource == "namespaces" and group == ""
    if rule.scope == "Namespaced" and (namespaces or not attrs.namespace):
        return False
    if rule.scope == "Cluster" and not (namespaces or not attrs.namespace):
        return False
    if "*" not in rule.operations and attrs.operation not in rule.operations:
        return False
    if "*" not in rule.api_groups and group not in rule.api_groups:
        return False
    if "*" not in rule.api_versions and version not in rule.api_versions:
        return False
    for spelled in rule.resources:
        res, _, sub = spelled.partition("/")
        if (res == "*" or res == resource) and (sub == "*" or sub == attrs.subresource):
            return True
    return False


def rules_match(rules: tuple[Rule, ...], match_policy: str, attrs: Attributes,
                equivalents: Equivalents | None) -> tuple[bool, tuple[str, str, str]]:
    """``matchesResourceRules``: whether a rule matches, and the (group, version, resource) it
    matched (another version's under matchPolicy Equivalent)."""
    own = (attrs.group, attrs.version, attrs.resource)
    for rule in rules:
        if rule_matches(rule, attrs, group=attrs.group, version=attrs.version, resource=attrs.resource) \
                and (not rule.resource_names or attrs.name in rule.resource_names):
            return True, own
    if match_policy != "Equivalent" or equivalents is None:
        return False, own
    for rule in rules:
        for group, version, resource in equivalents(attrs.group, attrs.version, attrs.resource):
            if (group, version, resource) == own:
                continue
            if rule_matches(rule, attrs, group=group, version=version, resource=resource) \
                    and (not rule.resource_names or attrs.name in rule.resource_names):
                return True, (group, version, resource)
    return False, own


def matches(match: MatchResources, attrs: Attributes, namespace_labels: NamespaceLabels,
            equivalents: Equivalents | None = None) -> tuple[bool, tuple[str, str, str]]:
    """``Matcher.Matches``. A selector error is raised only when the rules match (as the
    apiserver reports it only then); a namespace the view does not show is unknown."""
    ns_error: MatchError | None = None
    ns_matches = True
    if attrs.namespace or (attrs.resource == "namespaces" and attrs.group == ""):
        try:
            selector = _selector(match.namespace_selector, "namespaceSelector")
            if not selector.empty:
                # a Namespace's own create or update: its labels as written (``GetNamespaceLabels``)
                if attrs.resource == "namespaces" and attrs.group == "" and not attrs.subresource \
                        and attrs.operation in ("CREATE", "UPDATE"):
                    labels = _labels(attrs.object)
                else:
                    labels = namespace_labels(attrs.namespace)
                ns_matches = selector.matches(labels)
        except MatchError as exc:
            ns_error, ns_matches = exc, True
    if not ns_matches:
        return False, ("", "", "")
    obj_error: MatchError | None = None
    try:
        selector = _selector(match.object_selector, "objectSelector")
        # an absent object matches nothing (``matchObject``), not even a NotIn selector
        if not selector.empty and not any(o is not None and selector.matches(_labels(o))
                                          for o in (attrs.object, attrs.old_object)):
            return False, ("", "", "")
    except MatchError as exc:
        obj_error = exc
    excluded, _ = rules_match(match.exclude_resource_rules, match.match_policy, attrs, equivalents)
    if excluded:
        return False, ("", "", "")
    if match.resource_rules:
        matched, gvr = rules_match(match.resource_rules, match.match_policy, attrs, equivalents)
    else:
        matched, gvr = True, (attrs.group, attrs.version, attrs.resource)
    if not matched:
        return False, ("", "", "")
    if ns_error is not None:
        raise ns_error
    if obj_error is not None:
        raise obj_error
    return True, gvr


def _labels(obj: dict[str, Any] | None) -> dict[str, str]:
    if obj is None:
        return {}
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}
