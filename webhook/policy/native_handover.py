"""Handing rules over to the apiserver: the generated ValidatingAdmissionPolicies (VAP) and
MutatingAdmissionPolicies (MAP) as the controller applies them in a cluster, the probes that
show the apiserver enforcing them, the mark it then sets, and which rules the webhook may then
leave to the apiserver.

The sequence (``docs/native-policies.md``, "In a cluster"):

1. the controller applies the VAPs, MAPs and bindings of ``native_export.export``
   (``in_cluster``: each with an ownerReference to a Helm-managed cluster-scoped object of the
   release, so the garbage collector deletes them with it), then the probes, written last and
   carrying a token of the whole set: a VAP and binding (``probe_objects``), a MAP and binding
   (``probe_mutation_objects``);
2. it sends a dry-run create of a ConfigMap labelled with that token (``probe_request``); the
   apiserver builds its policies from one snapshot of both informers of a plugin, so its denial
   by the probe (``probe_denied``) shows every VAP and binding written before it in force; the
   same for the MAPs with ``probe_mutation_request``, whose returned object must carry the
   probe MAP's annotation (``probe_mutated``);
3. it marks each VAP and MAP ``infergate.io/enforced: <hash>`` (``marks``: the hash of that
   policy and its bindings as generated);
4. the webhook watches the VAPs, MAPs and bindings labelled ``app.kubernetes.io/managed-by:
   infergate``, generates them itself from its own policies, and leaves to the apiserver exactly
   the rules of each VAP and MAP that is marked with the hash of what it generates and stored
   as it generates it, with its bindings (``enforced_rules``); every other rule it evaluates, as
   before (no mark, a stale hash, a policy or binding changed or deleted).

Pure: objects in, objects and decisions out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.policy.model import AdmissionPolicy
from webhook.policy.native_export import API_VERSION, MANAGED_BY, PREFIX, Export

VAP = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"
MAP = "MutatingAdmissionPolicy"
MAP_BINDING = "MutatingAdmissionPolicyBinding"
BINDING_OF = {VAP: BINDING, MAP: MAP_BINDING}
HANDED_OVER_KINDS = (VAP, BINDING, MAP, MAP_BINDING)
ENFORCED_ANNOTATION = "infergate.io/enforced"
MANAGED_BY_SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
# the probe: a VAP denying ConfigMaps labelled with the token of the set written before it
PROBE_NAME = f"{PREFIX}probe"
PROBE_LABEL = "infergate.io/probe"
PROBE_MESSAGE = "infergate probe: the generated policies are in force"
# the mutation probe: a MAP annotating ConfigMaps labelled with the token of the set written before it
PROBE_MUTATION_LABEL = "infergate.io/probe-mutation"
PROBE_ANNOTATION = "infergate.io/probe-mutated"
DENIAL_PREFIX = "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: "


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def content_hash(objects: Iterable[Mapping[str, Any]]) -> str:
    """A short hash of ``objects``' kinds, names and specs (labels, annotations and owners left out)."""
    digest = hashlib.sha256()
    for obj in objects:
        digest.update(_canonical([obj.get("kind"), (obj.get("metadata") or {}).get("name"), obj.get("spec")]))
    return digest.hexdigest()[:16]


def generated(export: Export) -> list[dict[str, Any]]:
    """The VAPs, MAPs and bindings of ``export``."""
    return [obj for obj in export.objects if obj.get("kind") in HANDED_OVER_KINDS]


def bindings_of(objects: Iterable[Mapping[str, Any]], name: str, kind: str = VAP) -> list[Mapping[str, Any]]:
    """The bindings of the ``kind`` (VAP or MAP) named ``name``."""
    binding = BINDING_OF[kind]
    return [o for o in objects if o.get("kind") == binding and (o.get("spec") or {}).get("policyName") == name]


def handed_over(export: Export) -> dict[tuple[str, str], tuple[str, tuple[str, ...]]]:
    """Each generated VAP and MAP, ``(kind, name)``, with its policy and the rules it holds
    (``validations[i]``, ``warnings[i]``, ``auditAnnotations[i]``; ``mutations[i]``)."""
    out = {(VAP, name): rules for name, rules in export.rules.items()}
    out.update({(MAP, name): rules for name, rules in export.mutating_rules.items()})
    return out


def marks(export: Export) -> dict[tuple[str, str], str]:
    """Each generated VAP's and MAP's mark, by ``(kind, name)``: the hash of it and its
    bindings as generated."""
    objects = generated(export)
    return {(kind, name): content_hash([o for o in objects if o.get("kind") == kind and o["metadata"]["name"] == name]
                                       + bindings_of(objects, name, kind))
            for kind, name in handed_over(export)}


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An ownerReference to ``owner`` (a cluster-scoped object as read: apiVersion, kind, name,
    uid). Not a controller reference and not blocking: the garbage collector deletes the
    dependents once the owner is gone."""
    meta = owner.get("metadata") or {}
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"]}


def in_cluster(objects: Iterable[Mapping[str, Any]], owner: Mapping[str, Any] | None,
               mark: str | None = None) -> list[dict[str, Any]]:
    """``objects`` as the controller applies them: with an ownerReference to ``owner`` (None:
    none) and, on the VAPs and MAPs, ``mark`` as the enforced annotation (None: without: a
    server-side apply then removes a mark it set before)."""
    out = []
    for obj in objects:
        copy = json.loads(_canonical(obj))
        meta = copy.setdefault("metadata", {})
        if owner is not None:
            meta["ownerReferences"] = [owner_reference(owner)]
        if mark is not None and copy.get("kind") in BINDING_OF:
            meta.setdefault("annotations", {})[ENFORCED_ANNOTATION] = mark
        out.append(copy)
    return out


def probe_objects(token: str) -> list[dict[str, Any]]:
    """The probe VAP and binding: every ConfigMap CREATE labelled ``infergate.io/probe: <token>``
    is denied. No other object carries the label; the token names the set applied before them."""
    meta = {"name": PROBE_NAME, "labels": dict(MANAGED_BY)}
    vap = {"apiVersion": API_VERSION, "kind": VAP, "metadata": dict(meta, labels=dict(MANAGED_BY)),
           "spec": {"failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                            "operations": ["CREATE"], "resources": ["configmaps"]}],
                                         "objectSelector": {"matchLabels": {PROBE_LABEL: token}}},
                    "validations": [{"expression": "false", "message": f"{PROBE_MESSAGE} ({token})"}]}}
    binding = {"apiVersion": API_VERSION, "kind": BINDING, "metadata": dict(meta, labels=dict(MANAGED_BY)),
               "spec": {"policyName": PROBE_NAME, "validationActions": ["Deny"],
                        "matchResources": {"objectSelector": {"matchLabels": {PROBE_LABEL: token}}}}}
    return [vap, binding]


def probe_request(token: str, namespace: str) -> dict[str, Any]:
    """The ConfigMap the controller creates with ``dryRun=All`` to see the probe deny it."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"generateName": f"{PROBE_NAME}-", "namespace": namespace, "labels": {PROBE_LABEL: token}}}


def probe_denied(message: str, token: str) -> bool:
    """Whether a refusal's message is the probe's denial of the set ``token``: the apiserver's
    own words, ``configmaps "<name>" is forbidden: ValidatingAdmissionPolicy 'infergate-probe'
    with binding 'infergate-probe' denied request: <the probe's message>`` (the Status it answers
    with the reason Invalid, 422; recorded as ``probe`` in tests/policy/data/native-handover/recorded.json)."""
    prefix = DENIAL_PREFIX.format(policy=PROBE_NAME, binding=PROBE_NAME)
    return message.endswith(f": {prefix}{PROBE_MESSAGE} ({token})")


def probe_mutation_objects(token: str) -> list[dict[str, Any]]:
    """The mutation probe, a MAP and binding: every ConfigMap CREATE labelled
    ``infergate.io/probe-mutation: <token>`` gets the annotation ``infergate.io/probe-mutated:
    <token>``. No other object carries the label; the token names the set applied before them."""
    selector = {"matchLabels": {PROBE_MUTATION_LABEL: token}}
    patch = f"Object{{metadata: Object.metadata{{annotations: {{'{PROBE_ANNOTATION}': '{token}'}}}}}}"
    mutating = {"apiVersion": API_VERSION, "kind": MAP, "metadata": {"name": PROBE_NAME, "labels": dict(MANAGED_BY)},
                "spec": {"failurePolicy": "Fail",
                         "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                                 "operations": ["CREATE"], "resources": ["configmaps"]}],
                                              "objectSelector": selector},
                         "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": patch}}],
                         "reinvocationPolicy": "Never"}}
    binding = {"apiVersion": API_VERSION, "kind": MAP_BINDING,
               "metadata": {"name": PROBE_NAME, "labels": dict(MANAGED_BY)},
               "spec": {"policyName": PROBE_NAME, "matchResources": {"objectSelector": selector}}}
    return [mutating, binding]


def probe_mutation_request(token: str, namespace: str) -> dict[str, Any]:
    """The ConfigMap the controller creates with ``dryRun=All`` to see the mutation probe annotate it."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"generateName": f"{PROBE_NAME}-", "namespace": namespace,
                         "labels": {PROBE_MUTATION_LABEL: token}}}


def probe_mutated(answer: Mapping[str, Any], token: str) -> bool:
    """Whether the object a dry-run create of ``probe_mutation_request(token)`` returned carries
    the probe's annotation (the apiserver returns the object as it would store it, after the
    mutating admission plugins)."""
    return ((answer.get("metadata") or {}).get("annotations") or {}).get(PROBE_ANNOTATION) == token


# What the apiserver sets on a VAP, MAP or binding where the field is absent
# (pkg/apis/admissionregistration/v1/defaults.go: SetDefaults_ValidatingAdmissionPolicySpec and
# _MutatingAdmissionPolicySpec, SetDefaults_MatchResources, SetDefaults_Rule); the recorded
# objects carry exactly these (tests/policy/data/native-handover/recorded.json).
APISERVER_DEFAULTS: dict[str, Any] = {"failurePolicy": "Fail", "matchPolicy": "Equivalent", "namespaceSelector": {},
                                      "objectSelector": {}, "scope": "*"}
_ABSENT = object()


def contains(stored: Any, wanted: Any) -> bool:
    """Whether ``stored`` (as the apiserver returns it, with its defaults) holds every field of
    ``wanted``, lists element by element."""
    if isinstance(wanted, Mapping):
        return isinstance(stored, Mapping) and all(k in stored and contains(stored[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(stored, list) and len(stored) == len(wanted) and all(map(contains, stored, wanted))
    return stored == wanted


def same(stored: Any, wanted: Any) -> bool:
    """Whether ``stored`` is ``wanted`` as the apiserver stores it: every field of ``wanted``,
    and nothing more than the apiserver's defaults (``APISERVER_DEFAULTS``). A field someone
    added (a binding's ``matchResources``, a policy's ``matchConditions``) narrows or changes
    what the apiserver enforces: not the generated object."""
    if isinstance(wanted, Mapping):
        return isinstance(stored, Mapping) and all(k in stored and same(stored[k], v) for k, v in wanted.items()) \
            and all(k in wanted or APISERVER_DEFAULTS.get(k, _ABSENT) == v for k, v in stored.items())
    if isinstance(wanted, list):
        return isinstance(stored, list) and len(stored) == len(wanted) and all(map(same, stored, wanted))
    return stored == wanted


def stored_as_generated(stored: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Whether the stored object is the generated one: its spec as generated (with the
    apiserver's defaults, nothing else) and the generated labels."""
    if stored is None:
        return False
    return same(stored.get("spec"), wanted.get("spec")) and \
        contains((stored.get("metadata") or {}).get("labels") or {}, (wanted.get("metadata") or {}).get("labels") or {})


def enforced_rules(export: Export, stored: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """The rules, by policy, that the apiserver enforces as the webhook would: those of each VAP
    and MAP ``export`` generates that ``stored`` (``(kind, name) -> object`` of the cluster's
    VAPs, MAPs and bindings) holds marked with the hash of what ``export`` generates, as
    generated, and every binding of it as generated."""
    objects = generated(export)
    expected = marks(export)
    out: dict[str, set[str]] = {}
    for (kind, name), (policy, rules) in handed_over(export).items():
        found = stored.get((kind, name))
        if found is None or ((found.get("metadata") or {}).get("annotations") or {}).get(ENFORCED_ANNOTATION) \
                != expected[(kind, name)]:
            continue
        wanted = [o for o in objects if o.get("kind") == kind and o["metadata"]["name"] == name]
        wanted += bindings_of(objects, name, kind)
        if all(stored_as_generated(stored.get((o["kind"], o["metadata"]["name"])), o) for o in wanted):
            out.setdefault(policy, set()).update(rules)
    return {policy: frozenset(rules) for policy, rules in out.items()}


def without_rules(policy: AdmissionPolicy, rules: frozenset[str]) -> AdmissionPolicy:
    """``policy`` with its ``validations[i]`` and ``warnings[i]`` named in ``rules`` holding
    always (``true``) and its ``mutations[i]`` named there patching nothing (a JSON patch of no
    operations): their places, and so every other rule's name, unchanged. Audit annotations stay
    (the apiserver's are keyed by the VAP, the webhook's by the webhook)."""
    data = policy.model_dump(mode="json", exclude_none=True)
    spec = data["spec"]
    for i, mutation in enumerate(spec.get("mutations") or ()):
        if f"mutations[{i}]" in rules:
            mutation.update(patchType="JSONPatch", expression="[]")
    for section in ("validations", "warnings"):
        for i, rule in enumerate(spec.get(section) or ()):
            if f"{section}[{i}]" in rules:
                rule["expression"] = "true"
                rule.pop("messageExpression", None)
                rule.setdefault("message", "handed over to the apiserver")
    return AdmissionPolicy.model_validate(data)


def stored_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (str(obj.get("kind", "")), str((obj.get("metadata") or {}).get("name", "")))
