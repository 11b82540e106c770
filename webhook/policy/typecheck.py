"""Type-checking a policy's expressions when it loads, as ValidatingAdmissionPolicy does.

The apiserver type-checks a ValidatingAdmissionPolicy's expressions against the schema of
every kind its ``matchConstraints`` name (``object`` and ``oldObject`` typed by that kind's
OpenAPI schema), and an expression that must be a bool (a validation, a warning, a match
condition), a string (a ``messageExpression``, an audit annotation, a lookup's name) or a
patch (a list of JSON patch operations, a map for an apply configuration) and cannot be is
refused. Here both are load
errors, so a policy that would only fail at admission time (``no such overload``) or deny
with a misleading message never loads.

The kinds' schemas are the CRDs' (``CRDRegistry``): the same ``DeclType`` s and the same
cel-go checker (``webhook.cel.common.decl``, ``webhook.cel.checker``) that CRD rules are compiled
with. What the CRDs do not serve (built-in kinds, ``*``) is ``dyn``, as is everything else
a policy sees (``request``, ``params``, ``lookups``, ``variables``, ``namespaceObject``):
only what is known is checked, so a policy is never refused on a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Iterator, Mapping

from webhook.cel.checker.checker import check
from webhook.cel.crd import object_types
from webhook.cel.syntax.parser import CelSyntaxError, format_errors, parse
from webhook.cel.common.decl import DeclType, decl_type
from webhook.cel.common.types import BOOL, CelType, DYN, NULL, STRING
from webhook.policy.model import AdmissionPolicy

# ObjectMeta as the apiserver's OpenAPI publishes it (the fields policies read), since a CRD's
# own schema says only ``metadata: {type: object}``
_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_STRING_MAP = {"type": "object", "additionalProperties": _STRING}
_OBJECT_META = {"type": "object", "properties": {
    "name": _STRING, "generateName": _STRING, "namespace": _STRING, "uid": _STRING, "resourceVersion": _STRING,
    "generation": {"type": "integer", "format": "int64"},
    "creationTimestamp": {"type": "string", "format": "date-time"},
    "deletionTimestamp": {"type": "string", "format": "date-time"},
    "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
    "labels": _STRING_MAP, "annotations": _STRING_MAP, "finalizers": _STRINGS,
    "ownerReferences": {"type": "array", "items": {"type": "object", "properties": {
        "apiVersion": _STRING, "kind": _STRING, "name": _STRING, "uid": _STRING,
        "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"}}}},
    "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
}}

_DYN_VARIABLES = ("request", "namespaceObject", "params", "lookups", "variables")


@dataclass(frozen=True)
class KindType:
    api_version: str
    kind: str
    decl: DeclType


class KindSchemas:
    """The CEL type of every (group, kind) the CRDs serve, one per served version. The CRDs
    given come first, then every variant infergate bundles (both KubeAI Model CRDs): a policy
    written for several variants of a kind (``has(object.spec.files)`` where only the newer one
    has it) type-checks when it does against one of them (``check_policy``)."""

    def __init__(self, crds: Iterable[Mapping[str, Any]], *, bundled: bool = True) -> None:
        self._schemas: dict[tuple[str, str], list[tuple[str, Mapping[str, Any]]]] = {}
        self.kinds: set[tuple[str, str]] = set()  # (group, kind) of every CRD given or bundled
        seen: dict[Any, list[Mapping[str, Any]]] = {}  # the CRDs taken, by name: one of equal CRDs
        self._by_plural: dict[tuple[str, str], str] = {}  # (apiVersion, plural) -> kind
        for crd in [*crds, *(bundled_crds() if bundled else ())]:
            spec = crd.get("spec") if isinstance(crd, Mapping) else None
            if not isinstance(spec, Mapping):
                continue
            same_name = seen.setdefault(str((crd.get("metadata") or {}).get("name")), [])
            if any(crd == taken for taken in same_name):
                continue
            same_name.append(crd)
            group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
            self.kinds.add((group, kind))
            for version in spec.get("versions") or ():
                schema = ((version.get("schema") or {}).get("openAPIV3Schema")) if version.get("served", True) else None
                if isinstance(schema, Mapping):
                    self._schemas.setdefault((group, kind), []).append((f"{group}/{version['name']}", schema))
                    plural = (spec.get("names") or {}).get("plural", "")
                    self._by_plural.setdefault((f"{group}/{version['name']}", plural), kind)
        self._types: dict[tuple[str, str], list[KindType]] = {}

    def kind_of(self, api_version: str, plural: str) -> str | None:
        """The kind a CRD serves as ``plural`` in ``api_version`` (None: no CRD here does)."""
        return self._by_plural.get((api_version, plural))

    def types(self, group: str, kind: str) -> list[KindType]:
        key = (group, kind)
        found = self._types.get(key)
        if found is None:
            found = []
            for api_version, schema in self._schemas.get(key, ()):
                decl = decl_type(_with_object_meta(schema), is_root=True, name=f"{kind}.{api_version}")
                if decl is not None:
                    found.append(KindType(api_version, kind, decl))
            self._types[key] = found
        return found


def _with_object_meta(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = dict(schema.get("properties") or {})
    properties.update(apiVersion=_STRING, kind=_STRING, metadata=_OBJECT_META)
    return {**schema, "properties": properties}


@lru_cache(maxsize=1)
def bundled_crds() -> tuple[Mapping[str, Any], ...]:
    """Every CRD infergate bundles (``webhook.schema.bundled.crds``: its own, the current upstream
    ones, the schema-only ones, the earlier versions, each KubeAI Model CRD it can be told to use)."""
    from webhook.schema import bundled

    found = {where: crd for choice in bundled.KUBEAI_CRDS for _, where, crd in bundled.shared_crds(choice)}
    return tuple(found.values())


@lru_cache(maxsize=1)
def shipped_schemas() -> KindSchemas:
    """The kinds of the CRDs infergate bundles."""
    return KindSchemas(())


@lru_cache(maxsize=1)
def builtin_kinds() -> frozenset[tuple[str, str]]:
    """(group, kind) of Kubernetes' built-in kinds, of the release ``validate`` judges them as."""
    from webhook.offline.builtin_kinds import BuiltinSchemas  # (its schemas: kubernetes-validate's)

    return BuiltinSchemas().group_kinds()


def reach_problems(policy: AdmissionPolicy, schemas: KindSchemas) -> list[tuple[tuple[Any, ...], str]]:
    """Every group and kind a policy's resourceRules name that names nothing known, with a
    did-you-mean: known are the kinds of the CRDs given and bundled (a kind a cluster has no CRD
    for is still known from the bundled set) and the built-in kinds. Such a rule would match no
    request at all, so the policy would be silent where its author meant it to speak."""
    from webhook.schema.near_miss import near_words

    named = {(g, k) for rule in policy.spec.matchConstraints.resourceRules for g in rule.apiGroups for k in rule.kinds}
    crd_groups = {group for group, _ in schemas.kinds}
    if all(pair in schemas.kinds or (pair[0] in crd_groups and pair[1] == "*") for pair in named):
        return []  # (every pair a CRD's: the built-in kinds need not be read)
    known = schemas.kinds | builtin_kinds()
    groups = {group for group, _ in known}
    problems: list[tuple[tuple[Any, ...], str]] = []
    for i, rule in enumerate(policy.spec.matchConstraints.resourceRules):
        path = ("spec", "matchConstraints", "resourceRules", i)
        any_group = "*" in rule.apiGroups
        named_groups = [g for g in rule.apiGroups if g != "*" and g in groups]
        found: list[tuple[tuple[Any, ...], str]] = []
        for j, group in enumerate(rule.apiGroups):
            if group != "*" and group not in groups:
                found.append(((*path, "apiGroups", j), _unknown(f"no API group {group!r} is known",
                                                               near_words(group, groups))))
        if any_group or named_groups:
            in_reach = {k for g, k in known if any_group or g in named_groups}
            where = "any API group" if any_group else " or ".join(repr(g) for g in named_groups)
            for j, kind in enumerate(rule.kinds):
                if kind == "*" or kind in in_reach:
                    continue
                home = sorted(g for g, k in known if k == kind)
                if home:
                    found.append(((*path, "kinds", j), f"no kind {kind} in {where}: {kind} is of "
                                  f"{' or '.join(repr(g) for g in home)}"))
                else:
                    found.append(((*path, "kinds", j), _unknown(f"no kind {kind} is known in {where}",
                                                                near_words(kind, in_reach))))
        if not found and "*" not in rule.kinds:  # each group must hold one of the kinds
            for j, group in enumerate(rule.apiGroups):
                if group != "*" and not any((group, kind) in known for kind in rule.kinds):
                    found.append(((*path, "apiGroups", j), f"API group {group!r} has none of the kinds "
                                  f"{', '.join(rule.kinds)}"))
        problems += found
    return problems


def _unknown(message: str, near: list[str]) -> str:
    """``message`` of a name nothing knows, with what it may have meant."""
    text = f"{message} (neither the bundled CRDs, the loaded CRDs nor the built-in kinds name it)"
    if near:
        text += f"; did you mean {' or '.join(dict.fromkeys(near))}?"
    return text


def _fits(result: CelType, expected: CelType | str | None) -> bool:
    """Whether a result of type ``result`` can be what the policy needs there: ``dyn`` always can
    (it is known at evaluation only), a string-valued field may also be null (no value)."""
    if expected is None or result == DYN:
        return True
    if expected == "list":  # a JSON patch: a list of operations
        return result.kind == "list"
    if expected == "map":  # an apply configuration: a partial object
        return result.kind in ("map", "object")
    return result == expected or (expected == STRING and result == NULL)


def _expected_name(expected: CelType | str) -> str:
    return {"list": "a list (JSON patch operations)", "map": "a map (a partial object)"}.get(
        expected, str(expected)) if isinstance(expected, str) else str(expected)


# where a policy needs which result type: (path in the spec, the expressions there, expected)
def _expressions(policy: AdmissionPolicy) -> Iterator[tuple[tuple[Any, ...], str, CelType | str | None]]:
    spec = policy.spec
    for i, m in enumerate(spec.matchConditions):
        yield ("spec", "matchConditions", i, "expression"), m.expression, BOOL
    for i, v in enumerate(spec.variables):
        yield ("spec", "variables", i, "expression"), v.expression, None
    for section, rules in (("validations", spec.validations), ("warnings", spec.warnings)):
        for i, rule in enumerate(rules):
            yield ("spec", section, i, "expression"), rule.expression, BOOL
            if rule.messageExpression:
                yield ("spec", section, i, "messageExpression"), rule.messageExpression, STRING
    for i, a in enumerate(spec.auditAnnotations):
        yield ("spec", "auditAnnotations", i, "valueExpression"), a.valueExpression, STRING
    for i, lookup in enumerate(spec.lookups):
        section, source = ("get", lookup.get) if lookup.get is not None else ("list", lookup.list)
        for name in ("name", "namespace", "labelSelector"):
            text = getattr(source, name, None)
            if text is not None:
                yield ("spec", "lookups", i, section, name), text, STRING
    for i, m in enumerate(spec.mutations):
        yield ("spec", "mutations", i, "expression"), m.expression, "list" if m.patchType == "JSONPatch" else "map"


def matched_types(policy: AdmissionPolicy, schemas: KindSchemas) -> list[KindType | None]:
    """The types of the kinds the policy matches; None stands for any kind whose schema is not
    known (``*``, a built-in kind): ``object`` is ``dyn`` there."""
    out: list[KindType | None] = []
    unknown = False
    for rule in policy.spec.matchConstraints.resourceRules:
        for group in rule.apiGroups:
            for kind in rule.kinds:
                found = schemas.types(group, kind) if "*" not in (group, kind) else []
                if found:
                    out += [t for t in found if t not in out]
                else:
                    unknown = True
    return out + [None] if unknown or not out else out


def check_policy(policy: AdmissionPolicy, schemas: KindSchemas) -> list[tuple[tuple[Any, ...], str]]:
    """Every type error of ``policy``'s expressions: (path of the expression, message)."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    targets = matched_types(policy, schemas)
    for path, source, expected in _expressions(policy):
        try:
            parsed = parse(source)
        except CelSyntaxError:
            continue  # the engine's compile error says it already
        problems += _check_expression(parsed, source, path, expected, targets)
    return problems


def _check_expression(parsed: Any, source: str, path: tuple[Any, ...], expected: CelType | str | None,
                      targets: list[KindType | None]) -> list[tuple[tuple[Any, ...], str]]:
    """The first problem of one expression: for each apiVersion/kind matched, it must type-check
    against one of that kind's schema variants."""
    by_kind: dict[tuple[str, str] | None, list[KindType | None]] = {}
    for target in targets:
        by_kind.setdefault((target.api_version, target.kind) if target is not None else None, []).append(target)
    for variants in by_kind.values():
        first = None
        for target in variants:
            problem = _problem(parsed, source, expected, target)
            if problem is None:
                break
            first = first or problem
        else:
            return [(path, first)]
    return []


def _problem(parsed: Any, source: str, expected: CelType | str | None, target: KindType | None) -> str | None:
    variables = {name: DYN for name in _DYN_VARIABLES}
    objects: dict[str, DeclType] = {}
    if target is not None:
        variables["object"] = variables["oldObject"] = target.decl.cel
        objects = object_types(target.decl)
    else:
        variables["object"] = variables["oldObject"] = DYN
    # infergate's policies may mix dyn and typed values in literals (JSON patch maps)
    checked = check(parsed, variables, objects, validate_literals=False)
    prefix = f"apiVersion={target.api_version}, kind={target.kind}: " if target is not None else ""
    if checked.errors:
        return prefix + format_errors(source, checked.errors)
    if not _fits(checked.result_type, expected):
        return f"{prefix}must evaluate to {_expected_name(expected)}, not {checked.result_type}"
    return None
