"""Handing rules over to the apiserver: the generated ValidatingAdmissionPolicies as the
controller applies them in a cluster, the probe that shows the apiserver enforcing them, the
mark it then sets, and which rules the webhook may then leave to the apiserver.

The sequence (``docs/native-policies.md``, "In a cluster"):

1. the controller applies the VAPs and bindings of ``native_export.export`` (``in_cluster``:
   each with an ownerReference to a Helm-managed cluster-scoped object of the release, so the
   garbage collector deletes them with it), then the probe VAP and binding (``probe_objects``)
   carrying a token of the whole set, written last;
2. it sends a dry-run create of a ConfigMap labelled with that token (``probe_request``); the
   apiserver builds its policies from one snapshot of both informers, so its denial by the probe
   (``probe_denied``) shows every VAP and binding written before it in force;
3. it marks each VAP ``infergate.io/enforced: <hash>`` (``marks``: the hash of that VAP and its
   bindings as generated);
4. the webhook watches the VAPs and bindings labelled ``app.kubernetes.io/managed-by:
   infergate``, generates them itself from its own policies, and leaves to the apiserver exactly
   the rules of each VAP that is marked with the hash of what it generates and stored as it
   generates it, with its bindings (``enforced_rules``); every other rule it evaluates, as before
   (no mark, a stale hash, a VAP or binding changed or deleted).

Only ValidatingAdmissionPolicies are handed over; the MutatingAdmissionPolicies of the export
stay with the webhook (not applied).

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
HANDED_OVER_KINDS = (VAP, BINDING)
ENFORCED_ANNOTATION = "infergate.io/enforced"
MANAGED_BY_SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
# the probe: a VAP denying ConfigMaps labelled with the token of the set written before it
PROBE_NAME = f"{PREFIX}probe"
PROBE_LABEL = "infergate.io/probe"
PROBE_MESSAGE = "infergate probe: the generated policies are in force"
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
    """The VAPs and bindings of ``export`` (its MAPs stay with the webhook)."""
    return [obj for obj in export.objects if obj.get("kind") in HANDED_OVER_KINDS]


def bindings_of(objects: Iterable[Mapping[str, Any]], vap_name: str) -> list[Mapping[str, Any]]:
    return [o for o in objects if o.get("kind") == BINDING and (o.get("spec") or {}).get("policyName") == vap_name]


def marks(export: Export) -> dict[str, str]:
    """Each generated VAP's mark: the hash of it and its bindings as generated."""
    objects = generated(export)
    return {vap_name: content_hash([o for o in objects if o.get("kind") == VAP and o["metadata"]["name"] == vap_name]
                                   + bindings_of(objects, vap_name))
            for vap_name in export.rules}


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """An ownerReference to ``owner`` (a cluster-scoped object as read: apiVersion, kind, name,
    uid). Not a controller reference and not blocking: the garbage collector deletes the
    dependents once the owner is gone."""
    meta = owner.get("metadata") or {}
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"]}


def in_cluster(objects: Iterable[Mapping[str, Any]], owner: Mapping[str, Any] | None,
               mark: str | None = None) -> list[dict[str, Any]]:
    """``objects`` as the controller applies them: with an ownerReference to ``owner`` (None:
    none) and, on the VAPs, ``mark`` as the enforced annotation (None: without: a server-side
    apply then removes a mark it set before)."""
    out = []
    for obj in objects:
        copy = json.loads(_canonical(obj))
        meta = copy.setdefault("metadata", {})
        if owner is not None:
            meta["ownerReferences"] = [owner_reference(owner)]
        if mark is not None and copy.get("kind") == VAP:
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
    with the reason Invalid, 422; recorded in tests/controller/data/native-probe-denial.json)."""
    prefix = DENIAL_PREFIX.format(policy=PROBE_NAME, binding=PROBE_NAME)
    return message.endswith(f": {prefix}{PROBE_MESSAGE} ({token})")


def contains(stored: Any, wanted: Any) -> bool:
    """Whether ``stored`` (as the apiserver returns it, with its defaults) holds every field of
    ``wanted``, lists element by element."""
    if isinstance(wanted, Mapping):
        return isinstance(stored, Mapping) and all(k in stored and contains(stored[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(stored, list) and len(stored) == len(wanted) and all(map(contains, stored, wanted))
    return stored == wanted


def stored_as_generated(stored: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Whether the stored object is the generated one: its spec and labels as generated."""
    if stored is None:
        return False
    return contains(stored.get("spec"), wanted.get("spec")) and \
        contains((stored.get("metadata") or {}).get("labels") or {}, (wanted.get("metadata") or {}).get("labels") or {})


def enforced_rules(export: Export, stored: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """The rules, by policy, that the apiserver enforces as the webhook would: those of each VAP
    ``export`` generates that ``stored`` (``(kind, name) -> object`` of the cluster's VAPs and
    bindings) holds marked with the hash of what ``export`` generates, as generated, and every
    binding of it as generated."""
    objects = generated(export)
    expected = marks(export)
    out: dict[str, set[str]] = {}
    for vap_name, (policy, rules) in export.rules.items():
        vap = stored.get((VAP, vap_name))
        if vap is None or ((vap.get("metadata") or {}).get("annotations") or {}).get(ENFORCED_ANNOTATION) \
                != expected[vap_name]:
            continue
        wanted = [o for o in objects if o.get("kind") == VAP and o["metadata"]["name"] == vap_name]
        wanted += bindings_of(objects, vap_name)
        if all(stored_as_generated(stored.get((o["kind"], o["metadata"]["name"])), o) for o in wanted):
            out.setdefault(policy, set()).update(rules)
    return {policy: frozenset(rules) for policy, rules in out.items()}


def without_rules(policy: AdmissionPolicy, rules: frozenset[str]) -> AdmissionPolicy:
    """``policy`` with its ``validations[i]`` and ``warnings[i]`` named in ``rules`` holding
    always (``true``): their places, and so every other rule's name, unchanged. Audit
    annotations stay (the apiserver's are keyed by the VAP, the webhook's by the webhook)."""
    data = policy.model_dump(mode="json", exclude_none=True)
    spec = data["spec"]
    for section in ("validations", "warnings"):
        for i, rule in enumerate(spec.get(section) or ()):
            if f"{section}[{i}]" in rules:
                rule["expression"] = "true"
                rule.pop("messageExpression", None)
                rule.setdefault("message", "handed over to the apiserver")
    return AdmissionPolicy.model_validate(data)


def stored_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (str(obj.get("kind", "")), str((obj.get("metadata") or {}).get("name", "")))
