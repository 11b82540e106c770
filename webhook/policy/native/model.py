"""Kubernetes' own admission policies as data: ``admissionregistration.k8s.io/v1``
ValidatingAdmissionPolicy, MutatingAdmissionPolicy and their bindings, read from their YAML with the
defaults the apiserver gives them and the checks of its API validation that decide how they
evaluate (``k8s.io/kubernetes/pkg/apis/admissionregistration/validation``); a problem is
``(path, text)``, the loader adds the file and line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook import kinds
from webhook.gocompat.fmt import go_json, go_quote

GROUP = kinds.VALIDATING_ADMISSION_POLICY.group
API_VERSION = kinds.VALIDATING_ADMISSION_POLICY.api_version
POLICY = kinds.VALIDATING_ADMISSION_POLICY.kind
BINDING = kinds.VALIDATING_ADMISSION_POLICY_BINDING.kind
MUTATING_POLICY = kinds.MUTATING_ADMISSION_POLICY.kind
MUTATING_BINDING = kinds.MUTATING_ADMISSION_POLICY_BINDING.kind
KINDS = (POLICY, BINDING, MUTATING_POLICY, MUTATING_BINDING)
MUTATING_OPERATIONS = ("*", "CONNECT", "CREATE", "UPDATE")  # what a MutatingAdmissionPolicy may match
PATCH_TYPES = ("ApplyConfiguration", "JSONPatch")
REINVOCATION = ("IfNeeded", "Never")

OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge")  # as the API admits them (not Unauthorized)
ACTIONS = ("Deny", "Warn", "Audit")

Path = tuple[Any, ...]
Problems = list[tuple[Path, str]]


def is_native(content: Any) -> bool:
    """Whether a document is one of Kubernetes' admission policies or bindings (v1)."""
    return isinstance(content, dict) and content.get("apiVersion") == API_VERSION and content.get("kind") in KINDS


@dataclass(frozen=True)
class Rule:
    """A NamedRuleWithOperations."""

    operations: tuple[str, ...]
    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str = "*"
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class MatchResources:
    resource_rules: tuple[Rule, ...] = ()
    exclude_resource_rules: tuple[Rule, ...] = ()
    namespace_selector: dict[str, Any] = field(default_factory=dict)
    object_selector: dict[str, Any] = field(default_factory=dict)
    match_policy: str = "Equivalent"


@dataclass(frozen=True)
class Validation:
    expression: str
    message: str = ""
    message_expression: str = ""
    reason: str | None = None


@dataclass(frozen=True)
class NativePolicy:
    """What a ValidatingAdmissionPolicy and a MutatingAdmissionPolicy share (the generic
    plugin's ``PolicyAccessor``, and the expressions before their validations or mutations)."""

    name: str
    failure_policy: str  # Fail | Ignore
    param_kind: tuple[str, str] | None  # (apiVersion, kind)
    match: MatchResources
    match_conditions: tuple[tuple[str, str], ...]
    variables: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ValidatingPolicy(NativePolicy):
    validations: tuple[Validation, ...]
    audit_annotations: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Mutation:
    patch_type: str  # ApplyConfiguration | JSONPatch
    expression: str


@dataclass(frozen=True)
class MutatingPolicy(NativePolicy):
    mutations: tuple[Mutation, ...]
    reinvocation: str  # Never | IfNeeded


@dataclass(frozen=True)
class ParamRef:
    name: str = ""
    namespace: str = ""
    selector: dict[str, Any] | None = None
    not_found_action: str = "Deny"


@dataclass(frozen=True)
class Binding:
    name: str
    policy_name: str
    param_ref: ParamRef | None
    match: MatchResources | None
    actions: tuple[str, ...]  # a MutatingAdmissionPolicyBinding has none


class _Reader:
    """Reads one document, collecting every problem with its path."""

    def __init__(self) -> None:
        self.problems: Problems = []

    def need(self, value: Any, path: Path, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
        if value is None:
            if required:
                self.problems.append((path, "Required value"))
            return None
        if not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            self.problems.append((path, f"must be a {_TYPE_WORDS.get(names, names)}"))
            return None
        return value

    def strings(self, value: Any, path: Path, *, required: bool = False) -> tuple[str, ...]:
        items = self.need(value, path, list, required=required) or []
        out = []
        for i, item in enumerate(items):
            if self.need(item, (*path, i), str) is not None:
                out.append(item)
        return tuple(out)

    def one_of(self, value: Any, path: Path, allowed: tuple[str, ...], default: str | None) -> str | None:
        if value is None:
            return default
        if value not in allowed:
            self.problems.append((path, f"Unsupported value: {_quoted(value)}: supported values: "
                                        + ", ".join(f'"{a}"' for a in allowed)))
            return default
        return value

    def rules(self, value: Any, path: Path, *, names: bool = True) -> tuple[Rule, ...]:
        out = []
        for i, rule in enumerate(self.need(value, path, list, required=False) or []):
            at = (*path, i)
            if self.need(rule, at, dict) is None:
                continue
            operations = self.strings(rule.get("operations"), (*at, "operations"), required=True)
            for j, op in enumerate(operations):
                self.one_of(op, (*at, "operations", j), OPERATIONS, None)
            out.append(Rule(
                operations=operations,
                api_groups=self.strings(rule.get("apiGroups"), (*at, "apiGroups"), required=True),
                api_versions=self.strings(rule.get("apiVersions"), (*at, "apiVersions"), required=True),
                resources=self.strings(rule.get("resources"), (*at, "resources"), required=True),
                scope=self.one_of(rule.get("scope"), (*at, "scope"), ("Cluster", "Namespaced", "*"), "*"),
                resource_names=self.strings(rule.get("resourceNames"), (*at, "resourceNames")),
            ))
        return tuple(out)

    def match(self, value: Any, path: Path) -> MatchResources:
        spec = self.need(value, path, dict, required=False) or {}
        return MatchResources(
            resource_rules=self.rules(spec.get("resourceRules"), (*path, "resourceRules")),
            exclude_resource_rules=self.rules(spec.get("excludeResourceRules"), (*path, "excludeResourceRules")),
            namespace_selector=self.need(spec.get("namespaceSelector"), (*path, "namespaceSelector"), dict,
                                         required=False) or {},
            object_selector=self.need(spec.get("objectSelector"), (*path, "objectSelector"), dict,
                                      required=False) or {},
            match_policy=self.one_of(spec.get("matchPolicy"), (*path, "matchPolicy"), ("Exact", "Equivalent"),
                                     "Equivalent"),
        )

    def named(self, value: Any, path: Path, key: str, value_key: str, *, unique: bool = True) -> tuple[tuple[str, str], ...]:
        out = []
        seen: set[str] = set()
        for i, item in enumerate(self.need(value, path, list, required=False) or []):
            if self.need(item, (*path, i), dict) is None:
                continue
            name = self.need(item.get(key), (*path, i, key), str)
            expression = self.need(item.get(value_key), (*path, i, value_key), str)
            if name is None or expression is None:
                continue
            if unique and name in seen:
                self.problems.append(((*path, i, key), f"Duplicate value: {_quoted(name)}"))
            seen.add(name)
            if not expression.strip():
                self.problems.append(((*path, i, value_key), "Required value"))
            out.append((name, expression))
        return tuple(out)


_TYPE_WORDS = {"dict": "mapping", "list": "list", "str": "string"}


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _name(reader: _Reader, doc: dict[str, Any]) -> str:
    meta = reader.need(doc.get("metadata"), ("metadata",), dict) or {}
    return reader.need(meta.get("name"), ("metadata", "name"), str) or ""


def read_policy(doc: dict[str, Any]) -> tuple[ValidatingPolicy | None, Problems]:
    """A ValidatingAdmissionPolicy, or the problems that keep the apiserver from admitting it."""
    reader = _Reader()
    name = _name(reader, doc)
    spec = reader.need(doc.get("spec"), ("spec",), dict) or {}
    failure = reader.one_of(spec.get("failurePolicy"), ("spec", "failurePolicy"), ("Fail", "Ignore"), "Fail")
    param_kind = _param_kind(reader, spec)
    if spec.get("matchConstraints") is None:
        reader.problems.append((("spec", "matchConstraints"), "Required value"))
    match = reader.match(spec.get("matchConstraints"), ("spec", "matchConstraints"))
    if spec.get("matchConstraints") is not None and not match.resource_rules:
        reader.problems.append((("spec", "matchConstraints", "resourceRules"), "Required value"))
    validations = []
    for i, item in enumerate(reader.need(spec.get("validations"), ("spec", "validations"), list, required=False) or []):
        at = ("spec", "validations", i)
        if reader.need(item, at, dict) is None:
            continue
        expression = reader.need(item.get("expression"), (*at, "expression"), str)
        message = reader.need(item.get("message"), (*at, "message"), str, required=False) or ""
        if "\n" in message:
            reader.problems.append(((*at, "message"), f"Invalid value: {go_quote(message)}: must not contain line breaks"))
        reason = reader.one_of(item.get("reason"), (*at, "reason"), REASONS, None)
        message_expression = reader.need(item.get("messageExpression"), (*at, "messageExpression"), str,
                                         required=False) or ""
        if expression is not None:
            if not expression.strip():
                reader.problems.append(((*at, "expression"), "Required value"))
            validations.append(Validation(expression, message, message_expression, reason))
    audit = reader.named(spec.get("auditAnnotations"), ("spec", "auditAnnotations"), "key", "valueExpression")
    if not validations and not audit:
        for section in ("validations", "auditAnnotations"):
            reader.problems.append((("spec", section), "Required value: validations or auditAnnotations must "
                                                        "contain at least one item"))
    policy = ValidatingPolicy(
        name=name, failure_policy=failure or "Fail", param_kind=param_kind, match=match,
        match_conditions=reader.named(spec.get("matchConditions"), ("spec", "matchConditions"), "name", "expression"),
        # the apiserver admits two variables of one name (the last one counts)
        variables=reader.named(spec.get("variables"), ("spec", "variables"), "name", "expression", unique=False),
        validations=tuple(validations), audit_annotations=audit)
    return (policy if not reader.problems else None), reader.problems


def read_binding(doc: dict[str, Any]) -> tuple[Binding | None, Problems]:
    """A ValidatingAdmissionPolicyBinding, or the problems that keep the apiserver from admitting it."""
    reader = _Reader()
    name = _name(reader, doc)
    spec = reader.need(doc.get("spec"), ("spec",), dict) or {}
    policy_name = reader.need(spec.get("policyName"), ("spec", "policyName"), str) or ""
    actions = reader.strings(spec.get("validationActions"), ("spec", "validationActions"))
    if not actions:
        reader.problems.append((("spec", "validationActions"),
                                "Required value: at least one validation action is required"))
    for i, action in enumerate(actions):
        reader.one_of(action, ("spec", "validationActions", i), ACTIONS, None)
        if action in actions[:i]:
            reader.problems.append((("spec", "validationActions", i), f"Duplicate value: {_quoted(action)}"))
    if "Deny" in actions and "Warn" in actions:
        reader.problems.append((("spec", "validationActions"), f"Invalid value: {go_json(list(actions))}: must not "
                                                                 "contain both Deny and Warn (repeating the same "
                                                                 "validation failure information in the API response "
                                                                 "and headers serves no purpose)"))
    param_ref = _param_ref(reader, spec)
    match = reader.match(spec.get("matchResources"), ("spec", "matchResources")) \
        if spec.get("matchResources") is not None else None
    binding = Binding(name, policy_name, param_ref, match, actions)
    return (binding if not reader.problems else None), reader.problems


def _param_ref(reader: _Reader, spec: dict[str, Any]) -> ParamRef | None:
    if spec.get("paramRef") is None:
        return None
    ref = reader.need(spec.get("paramRef"), ("spec", "paramRef"), dict) or {}
    ref_name = reader.need(ref.get("name"), ("spec", "paramRef", "name"), str, required=False) or ""
    selector = reader.need(ref.get("selector"), ("spec", "paramRef", "selector"), dict, required=False)
    if ref_name and selector is not None:
        for side in ("name", "selector"):
            reader.problems.append((("spec", "paramRef", side), "Forbidden: name and selector are mutually exclusive"))
    if not ref_name and selector is None:
        reader.problems.append((("spec", "paramRef"), "Required value: one of name or selector must be set"))
    action = reader.one_of(ref.get("parameterNotFoundAction"), ("spec", "paramRef", "parameterNotFoundAction"),
                           ("Allow", "Deny"), None)
    if ref.get("parameterNotFoundAction") is None:
        reader.problems.append((("spec", "paramRef", "parameterNotFoundAction"), "Required value"))
    return ParamRef(ref_name, reader.need(ref.get("namespace"), ("spec", "paramRef", "namespace"), str,
                                          required=False) or "", selector, action or "Deny")


def _param_kind(reader: _Reader, spec: dict[str, Any]) -> tuple[str, str] | None:
    if spec.get("paramKind") is None:
        return None
    pk = reader.need(spec.get("paramKind"), ("spec", "paramKind"), dict) or {}
    api_version = reader.need(pk.get("apiVersion"), ("spec", "paramKind", "apiVersion"), str)
    kind = reader.need(pk.get("kind"), ("spec", "paramKind", "kind"), str)
    return (api_version, kind) if api_version and kind else None


def _mutating_operations(reader: _Reader, match: MatchResources, path: Path) -> None:
    """Only CREATE and UPDATE can be mutated (the API's check, one problem per operation)."""
    for rule in match.resource_rules:
        for op in rule.operations:
            if op not in MUTATING_OPERATIONS:
                reader.problems.append(((*path, "resourceRules", "operations"),
                                        f"Unsupported value: {_quoted(op)}: supported values: "
                                        + ", ".join(f'"{a}"' for a in MUTATING_OPERATIONS)))


def read_mutating_policy(doc: dict[str, Any]) -> tuple[MutatingPolicy | None, Problems]:
    """A MutatingAdmissionPolicy, or the problems that keep the apiserver from admitting it
    (``validateMutatingAdmissionPolicySpec``: failurePolicy defaults to Fail,
    reinvocationPolicy has no default)."""
    reader = _Reader()
    name = _name(reader, doc)
    spec = reader.need(doc.get("spec"), ("spec",), dict) or {}
    failure = reader.one_of(spec.get("failurePolicy"), ("spec", "failurePolicy"), ("Fail", "Ignore"), "Fail")
    param_kind = _param_kind(reader, spec)
    if spec.get("matchConstraints") is None:
        reader.problems.append((("spec", "matchConstraints"), "Required value"))
    match = reader.match(spec.get("matchConstraints"), ("spec", "matchConstraints"))
    if spec.get("matchConstraints") is not None:
        if not match.resource_rules:
            reader.problems.append((("spec", "matchConstraints", "resourceRules"), "Required value"))
        _mutating_operations(reader, match, ("spec", "matchConstraints"))
    mutations = []
    items = reader.need(spec.get("mutations"), ("spec", "mutations"), list, required=False) or []
    if not items:
        reader.problems.append((("spec", "mutations"), "Required value: mutations must contain at least one item"))
    for i, item in enumerate(items):
        at = ("spec", "mutations", i)
        if reader.need(item, at, dict) is None:
            continue
        patch_type = item.get("patchType")
        if not patch_type:
            reader.problems.append(((*at, "patchType"), "Required value"))
            continue
        if patch_type not in PATCH_TYPES:
            reader.one_of(patch_type, (*at, "patchType"), PATCH_TYPES, None)
            continue
        key, other = ("jsonPatch", "applyConfiguration") if patch_type == "JSONPatch" else \
            ("applyConfiguration", "jsonPatch")
        body = reader.need(item.get(key), (*at, key), dict, required=False)
        if body is None:
            reader.problems.append(((*at, key), f"Required value: must be specified when patchType is {patch_type}"))
        if item.get(other) is not None:
            reader.problems.append(((*at, other), f'Invalid value: "{{{other}}}": must not be specified when '
                                                  f"patchType is {patch_type}"))
        if body is None:
            continue
        expression = reader.need(body.get("expression"), (*at, key, "expression"), str, required=False) or ""
        if not expression.strip():
            reader.problems.append(((*at, key, "expression"), "Required value"))
            continue
        mutations.append(Mutation(patch_type, expression.strip()))
    reinvocation = spec.get("reinvocationPolicy")
    if not reinvocation:
        reader.problems.append((("spec", "reinvocationPolicy"), "Required value"))
    else:
        reinvocation = reader.one_of(reinvocation, ("spec", "reinvocationPolicy"), REINVOCATION, None)
    policy = MutatingPolicy(
        name=name, failure_policy=failure or "Fail", param_kind=param_kind, match=match,
        match_conditions=reader.named(spec.get("matchConditions"), ("spec", "matchConditions"), "name", "expression"),
        variables=reader.named(spec.get("variables"), ("spec", "variables"), "name", "expression", unique=False),
        mutations=tuple(mutations), reinvocation=reinvocation or "Never")
    return (policy if not reader.problems else None), reader.problems


def read_mutating_binding(doc: dict[str, Any]) -> tuple[Binding | None, Problems]:
    """A MutatingAdmissionPolicyBinding, or the problems that keep the apiserver from admitting it."""
    reader = _Reader()
    name = _name(reader, doc)
    spec = reader.need(doc.get("spec"), ("spec",), dict) or {}
    policy_name = reader.need(spec.get("policyName"), ("spec", "policyName"), str) or ""
    param_ref = _param_ref(reader, spec)
    match = None
    if spec.get("matchResources") is not None:
        match = reader.match(spec.get("matchResources"), ("spec", "matchResources"))
        _mutating_operations(reader, match, ("spec", "matchResources"))
    binding = Binding(name, policy_name, param_ref, match, ())
    return (binding if not reader.problems else None), reader.problems
