"""Validation actions: what a policy's failed validation does, as ValidatingAdmissionPolicy's
``validationActions`` (a non-empty subset of ``Deny``, ``Warn``, ``Audit``; default
``[Deny]``; ``Deny`` with ``Warn`` is invalid).

``Deny`` refuses the request; ``Warn`` admits it with the failure as an admission warning,
in VAP's words; ``Audit`` admits it and records the failure in the response's audit
annotations under ``validation_failure`` (VAP's ``validation.policy.admission.k8s.io/
validation_failure`` value: a JSON list of ``{message, policy, binding, expressionIndex,
validationActions}``; the apiserver prefixes a webhook's keys with the webhook's name).
The checks here are VAP's (``validateValidationActions``), in its words.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import yaml

from webhook.gocompat.fmt import go_json, go_struct_json
from webhook.state.selectors import Selector, SelectorError, from_label_selector, parse_selector
from webhook.validation.names import label_value, qualified_name

DENY, WARN, AUDIT = "Deny", "Warn", "Audit"
ACTIONS = (DENY, WARN, AUDIT)  # the order actions are written in (Deny, Warn, Audit)
DENY_ONLY: frozenset[str] = frozenset({DENY})

# the key of the failures in the response's auditAnnotations: the apiserver records it as
# "<webhook name>/validation_failure" (VAP: "validation.policy.admission.k8s.io/validation_failure")
VALIDATION_FAILURE_KEY = "validation_failure"

_BOTH = ("must not contain both Deny and Warn (repeating the same validation failure information in the "
         "API response and headers serves no purpose)")


def action_problems(actions: Any) -> list[tuple[int | None, str]]:
    """What is wrong with a list of validation actions, as VAP's API validation says it:
    ``(index or None for the whole list, field.Error body)``; empty when it is valid."""
    if not isinstance(actions, list):
        return [(None, f"Invalid value: {go_json(actions)}: must be a list of Deny, Warn, Audit")]
    problems: list[tuple[int | None, str]] = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in ACTIONS:
            problems.append((i, f"Unsupported value: {go_json(action)}: supported values: "
                                "\"Audit\", \"Deny\", \"Warn\""))
        elif action in seen:
            problems.append((i, f"Duplicate value: {go_json(action)}"))
        if isinstance(action, str):
            seen.add(action)
    if DENY in seen and WARN in seen:
        problems.append((None, f"Invalid value: {go_json(actions)}: {_BOTH}"))
    if not actions:
        problems.append((None, "Required value: at least one validation action is required"))
    return problems


def ordered(actions: Iterable[str]) -> list[str]:
    """Actions in their written order (Deny, Warn, Audit): how reports and annotations list them."""
    chosen = set(actions)
    return [a for a in ACTIONS if a in chosen]


WARNING_PREFIX = "Validation failed for AdmissionPolicy '"


def warning_text(policy: str, message: str) -> str:
    """A failure under ``Warn``: VAP's warning ("Validation failed for ValidatingAdmissionPolicy
    '<policy>' with binding '<binding>': <message>"), for a policy without a binding."""
    return f"{WARNING_PREFIX}{policy}': {message}"


def failure_record(policy: str, binding: str, expression_index: int, message: str,
                   actions: Iterable[str]) -> dict[str, Any]:
    """One failure under ``Audit``, as VAP's ``ValidationFailureValue`` (its JSON field order)."""
    return {"message": message, "policy": policy, "binding": binding, "expressionIndex": expression_index,
            "validationActions": ordered(actions)}


def failure_annotation(records: list[dict[str, Any]]) -> str:
    """The ``validation_failure`` annotation's value: the records as a JSON list, as Go's
    ``encoding/json`` writes VAP's (fields in its order, HTML characters escaped)."""
    return "[" + ",".join(go_struct_json(r) for r in records) + "]"


# ---------------------------------------------------------------------------------------
# What a failing policy's verdict becomes


def own_actions(policy: Any) -> frozenset[str]:
    """A policy's own validation actions (a policy written in Python without any: Deny)."""
    return getattr(policy, "validation_actions", DENY_ONLY)


def enforce(verdict: Any, actions: frozenset[str], binding: str = "") -> None:
    """Apply ``actions`` to ``verdict``'s denials (its failed validations, and its rule errors
    under ``failurePolicy: Fail``, as VAP's dispatcher does): Warn adds each as a warning, Audit
    records each (``verdict.audit_failures``), and without Deny the denials go."""
    verdict.validation_actions = actions
    denials = verdict.denials
    if not denials or actions == DENY_ONLY:
        return
    if WARN in actions:
        verdict.warnings = verdict.warnings + [warning_text(d.policy, d.message) for d in denials]
    if AUDIT in actions:
        verdict.audit_failures = list(verdict.audit_failures) + [
            failure_record(d.policy, binding, d.expression_index, d.message, actions) for d in denials]
    if DENY not in actions:
        verdict.denials = []


# ---------------------------------------------------------------------------------------
# Operators' overrides: a policy's actions chosen without editing it, by policy name,
# optionally scoped to namespaces by a label selector


class ActionsError(ValueError):
    """An override that cannot be used: one line naming it and what is wrong."""


@dataclass(frozen=True, slots=True)
class ActionBinding:
    """One entry of a policy's override: its ``actions`` where ``selector`` selects the
    request's namespace (``None``: every request), ``binding`` its name in audit records."""

    actions: frozenset[str]
    selector: Selector | None
    binding: str
    scope: Any = None  # the namespace selector as given (a string or a LabelSelector map)


NAME_LABEL = "kubernetes.io/metadata.name"  # the label the apiserver gives every namespace


def namespace_labels(inp: Any) -> Mapping[str, str] | None:
    """The labels a namespace-scoped entry is matched against, as a ValidatingAdmissionPolicy's
    namespaceSelector reads them: a Namespace's own; a namespaced object's namespace's (from the
    cluster state; a namespace it does not know has only its ``kubernetes.io/metadata.name``);
    None for any other cluster-scoped object, which is in no namespace: only entries without a
    selector apply to it."""
    subject = inp.object if inp.object is not None else inp.old_object
    if inp.kind == "Namespace" and inp.group == "":
        return _labels_of(subject)
    namespace = inp.request.get("namespace")
    if not namespace:
        return None
    return {NAME_LABEL: namespace, **_labels_of(inp.namespace_object)}


def _labels_of(obj: Any) -> dict[str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


class ActionOverrides:
    """Validation actions chosen by an operator, per policy name: entries in order, the first
    whose namespace selector selects the request's namespace wins (an entry without one:
    every request); when none does, the policy's own ``validationActions``."""

    __slots__ = ("bindings", "source")

    def __init__(self, bindings: Mapping[str, tuple[ActionBinding, ...]] | None = None, source: str = "") -> None:
        self.bindings: dict[str, tuple[ActionBinding, ...]] = dict(bindings or {})
        self.source = source  # what the overrides came from, for errors ("--policy-actions")

    def __bool__(self) -> bool:
        return bool(self.bindings)

    def unknown(self, names: Iterable[str]) -> list[str]:
        """The overridden policy names that are not among ``names``."""
        known = set(names)
        return [name for name in self.bindings if name not in known]

    def check(self, names: Iterable[str]) -> None:
        """Raise :class:`ActionsError` when an override names no policy of ``names``."""
        names = sorted(set(names))
        unknown = self.unknown(names)
        if unknown:
            close = difflib.get_close_matches(unknown[0], names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else \
                "policies: " + (", ".join(names[:12]) + (", ..." if len(names) > 12 else "") or "none")
            raise ActionsError(f"{self.source or 'policy actions'}: no policy named "
                               f"{', '.join(repr(n) for n in unknown)} ({hint})")

    def resolve(self, policy: Any, inp: Any) -> tuple[frozenset[str], str]:
        """The actions in force for ``policy`` on ``inp``, and the binding that chose them
        ("" for the policy's own)."""
        entries = self.bindings.get(policy.name)
        if entries:
            labels: Any = _UNREAD
            for entry in entries:
                if entry.selector is None:
                    return entry.actions, entry.binding
                if labels is _UNREAD:
                    labels = namespace_labels(inp)
                if labels is not None and entry.selector.matches(labels):
                    return entry.actions, entry.binding
        return own_actions(policy), ""

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """The overrides in their data form (what ``overrides_from`` reads; logged at start)."""
        return {name: [{**({"namespaceSelector": e.scope} if e.selector is not None else {}),
                        "actions": ordered(e.actions)} for e in entries]
                for name, entries in self.bindings.items()}


_UNREAD = object()
NO_OVERRIDES = ActionOverrides()


def parse_overrides(values: Iterable[str], source: str = "--policy-actions") -> ActionOverrides:
    """Overrides from flag values, each ``NAME=ACTION[,ACTION]`` (every namespace),
    ``NAME=ACTION[,ACTION]@SELECTOR`` (namespaces whose labels ``SELECTOR`` selects, in
    ``kubectl -l`` form) or a JSON/YAML mapping (``{NAME: [ACTION, ...]}`` or ``{NAME:
    [{namespaceSelector: ..., actions: [...]}, ...]}``, the chart's ``policies.actions``).
    Entries of one policy keep the order given. Raises :class:`ActionsError`, one line."""
    entries: dict[str, list[tuple[str, Any]]] = {}
    for value in values:
        text = value.strip()
        if text.startswith("{"):
            try:
                mapping = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ActionsError(f"{source} {_short(text)}: not a JSON or YAML mapping: "
                                   f"{' '.join(str(exc).split())}") from None
            for name, found in _data_entries(mapping, source).items():
                entries.setdefault(name, []).extend(found)
            continue
        name, sep, rest = text.partition("=")
        if not sep or not name.strip() or not rest.strip():
            raise ActionsError(f"{source} {text!r}: expected NAME=ACTION[,ACTION][@SELECTOR] or a mapping "
                               "{NAME: [ACTION, ...]}")
        actions_text, at, selector = rest.partition("@")
        entry: dict[str, Any] = {"actions": [a.strip() for a in actions_text.split(",")] if actions_text.strip() else []}
        if at:
            entry["namespaceSelector"] = selector
        entries.setdefault(name.strip(), []).append((f"{source} {text}", entry))
    return _overrides(entries, source)


def overrides_from(mapping: Any, source: str) -> ActionOverrides:
    """Overrides from their data form (a suite's ``actions:``, the chart's ``policies.actions``):
    ``{NAME: [ACTION, ...] | [{namespaceSelector?, actions}, ...]}``."""
    return _overrides(_data_entries(mapping, source), source)


def _data_entries(mapping: Any, source: str) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {}
    for name, given in _mapping(mapping, source).items():
        where = f"{source}: {name}"
        found = _entries(given, where)
        listed = bool(given) and isinstance(given[0], dict)  # entries, not one list of actions
        out[name] = [(f"{where}[{i}]" if listed else where, entry) for i, entry in enumerate(found)]
    return out


def _overrides(entries: Mapping[str, list[tuple[str, Any]]], source: str) -> ActionOverrides:
    return ActionOverrides({name: tuple(_binding(entry, where, f"override[{i}]")
                                        for i, (where, entry) in enumerate(found))
                            for name, found in entries.items()}, source)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        raise ActionsError(f"{where}: expected a mapping of policy names to actions")
    return value


def _entries(given: Any, where: str) -> list[Any]:
    """A policy's value: a list of actions (one entry, every namespace) or a list of entries."""
    if isinstance(given, list) and given and all(isinstance(a, dict) for a in given):
        return list(given)
    if isinstance(given, list) and all(isinstance(a, str) for a in given):
        return [{"actions": given}]
    raise ActionsError(f"{where}: expected a list of actions (Deny, Warn, Audit) or a list of "
                       "{namespaceSelector, actions} entries")


def _binding(entry: dict[str, Any], where: str, binding: str) -> ActionBinding:
    extra = sorted(set(entry) - {"actions", "namespaceSelector"})
    if extra:
        raise ActionsError(f"{where}: unknown field {extra[0]!r} (expected namespaceSelector, actions)")
    actions = entry.get("actions")
    problems = action_problems(actions)
    if problems:
        index, text = problems[0]
        raise ActionsError(f"{where}: actions{f'[{index}]' if index is not None else ''}: {text}")
    selector = scope = None
    if "namespaceSelector" in entry:
        scope = entry["namespaceSelector"]
        selector = _selector(scope, f"{where}: namespaceSelector")
    return ActionBinding(frozenset(actions), selector, binding, scope)


def _selector(given: Any, where: str) -> Selector:
    """A namespace selector in ``kubectl -l`` form or as a ``metav1.LabelSelector`` map, its
    keys and values checked as the apiserver checks labels."""
    try:
        if isinstance(given, str):
            if not given.strip():
                raise SelectorError("empty selector (leave namespaceSelector out to select every namespace)")
            selector = parse_selector(given)
        elif isinstance(given, dict):
            unknown = sorted(set(given) - {"matchLabels", "matchExpressions"})
            if unknown:
                raise SelectorError(f"unknown field {unknown[0]!r} (expected matchLabels, matchExpressions)")
            if not isinstance(given.get("matchLabels") or {}, dict) or \
                    not isinstance(given.get("matchExpressions") or [], list) or \
                    not all(isinstance(e, dict) and isinstance(e.get("key"), str)
                            for e in given.get("matchExpressions") or []):
                raise SelectorError("matchLabels must be a map and matchExpressions a list of {key, operator, values}")
            selector = from_label_selector(given)
        else:
            raise SelectorError("expected a label selector: a string (team=a,tier in (x,y)) or "
                                "{matchLabels, matchExpressions}")
    except SelectorError as exc:
        raise ActionsError(f"{where}: {exc}") from None
    for requirement in selector.requirements:
        problems = qualified_name(requirement.key)
        if problems:
            raise ActionsError(f"{where}: key {requirement.key!r}: {'; '.join(problems)}")
        for value in sorted(requirement.values):
            problems = label_value(value)
            if problems:
                raise ActionsError(f"{where}: value {value!r} of {requirement.key!r}: {'; '.join(problems)}")
    if not selector.requirements:
        raise ActionsError(f"{where}: selects every namespace (leave namespaceSelector out to say so)")
    return selector


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 60 else flat[:57] + "..."
