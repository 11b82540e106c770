"""``INFERGATE_E2E_NATIVE_POLICIES=1``: what the run expects of ``policies.native.enabled``.

The shipped policies' generated ValidatingAdmissionPolicies and MutatingAdmissionPolicies, each
marked enforced with its hash once the controller's probes have passed; and for the offline
answers, the cluster as it then stands: the generated VAPs, MAPs and bindings (the apiserver's)
beside the shipped AdmissionPolicies with those rules handed over (the webhook's), in one policy
directory for ``infergate validate --policies`` (which runs MAPs and VAPs as the apiserver does,
MAPs before the mutating webhook, VAPs before the validating webhook).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import yaml

from webhook.cel import Evaluator
from webhook.policy import load_directory
from webhook.policy.native_export import Export, export, kind_resources
from webhook.policy.native_handover import (BINDING_OF, ENFORCED_ANNOTATION, MANAGED_BY_SELECTOR, enforced_rules,
                                            generated, handed_over as handed_over_rules, in_cluster, marks,
                                            stored_key, without_rules)
from webhook.schema.bundled import known_kinds
from webhook.shipped_data import policies_dir

from .api import Kube

# a manifest breaking exported warnings only: once switched, the apiserver's words, each once
SWITCH_PROBE = "warned-by-webhook/kubeai-model-speech-on-vllm.yaml"
VAP_PREFIX = "ValidatingAdmissionPolicy '"
VAP = ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
BINDING = ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding")
MAP = ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy")
MAP_BINDING = ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding")


@functools.cache
def _definitions() -> tuple[Any, ...]:
    return tuple(p.definition for p in load_directory(policies_dir(), Evaluator()))


@functools.cache
def exported() -> Export:
    """The shipped policies' export, as the controller makes it (no ``--policy-actions``)."""
    return export(_definitions(), kind_resources(known_kinds()))


def expected_marks() -> dict[tuple[str, str], str]:
    return marks(exported())


def stored(kube: Kube) -> dict[tuple[str, str], dict]:
    """The cluster's VAPs, MAPs and bindings labelled managed-by infergate, by (kind, name)."""
    # (a list's items carry no apiVersion and kind)
    return {stored_key({**o, "apiVersion": api_version, "kind": kind}): {**o, "apiVersion": api_version, "kind": kind}
            for api_version, kind in (VAP, BINDING, MAP, MAP_BINDING)
            for o in kube.list(api_version, kind, label_selector=MANAGED_BY_SELECTOR)}


def marked(kube: Kube) -> dict[tuple[str, str], str]:
    """(kind, name) -> its enforced mark, for every generated VAP and MAP that has one."""
    return {key: (o["metadata"].get("annotations") or {})[ENFORCED_ANNOTATION]
            for key, o in stored(kube).items()
            if key[0] in BINDING_OF and ENFORCED_ANNOTATION in (o["metadata"].get("annotations") or {})}


def handed_over_everything() -> dict[str, frozenset[str]]:
    """Every exported rule, by policy: what the webhook leaves to the apiserver once switched."""
    handed: dict[str, set[str]] = {}
    for policy, rules in handed_over_rules(exported()).values():
        handed.setdefault(policy, set()).update(rules)
    return {policy: frozenset(rules) for policy, rules in handed.items()}


def handed_over(kube: Kube) -> dict[str, frozenset[str]]:
    """The rules the webhook leaves to the apiserver, as it decides from the cluster's objects."""
    return enforced_rules(exported(), stored(kube))


@functools.cache
def policies_directory(*, webhook: bool = True) -> Path:
    """A policy directory of the switched cluster: the generated VAPs, MAPs and bindings, and
    (with ``webhook``) the shipped AdmissionPolicies with every exported rule handed over."""
    directory = Path(tempfile.mkdtemp(prefix="infergate-e2e-native-"))
    everything = exported()
    handed = handed_over_everything()
    (directory / "generated.yaml").write_text(yaml.safe_dump_all(in_cluster(generated(everything), None),
                                                                 sort_keys=False))
    if webhook:
        reduced = [without_rules(d, frozenset(handed.get(d.metadata.name, ()))).model_dump(mode="json", exclude_none=True)
                   for d in _definitions()]
        (directory / "policies.yaml").write_text(yaml.safe_dump_all(reduced, sort_keys=False))
    return directory
