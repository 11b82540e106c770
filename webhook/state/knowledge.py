"""What a cluster view knows: which kinds it holds *whole*, so that an object it does not hold
is a fact (absent), and which it holds only in part, so that an absent object is *unknown*.

A live cluster (the webhook's watch cache, ``infergate validate --kubeconfig``) lists every kind
it serves: absence is a fact for all of them (:data:`EVERYTHING`). A directory named with
``--state DIR`` is taken as a picture of the kinds it shows: a kind with at least one object
there is held whole, a kind it does not show at all is unknown (:func:`kinds_held`). The inputs
of ``infergate validate`` without ``--state`` are the state themselves, but a repository is a
part of a cluster: what they show is a fact, what they do not show is unknown (:data:`PRESENCE`).

The one decision is :func:`unknown_answer`: a lookup's answer is unknown when the state does not
hold its kind whole and it is no object found (an absence, or a list: "these are all"). The
policy layer (``webhook.policy.unknown``) leaves out the rules that read such an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from webhook.apiversion import group_of

__all__ = ["EVERYTHING", "PRESENCE", "Knowledge", "cluster_scoped_builtin", "kinds_held", "place_namespace",
           "presence", "unknown_answer"]

GroupKind = tuple[str, str]


@dataclass(frozen=True)
class Knowledge:
    """The kinds a cluster view holds whole (``None``: every kind, as a live cluster's list)."""

    whole: frozenset[GroupKind] | None
    source: str = "cluster"  # where the view came from, for the note: "cluster", "state", "inputs", "dump"
    # the kinds it shows at least one object of (for the note: "no Service in the input", or more
    # InferencePools than the input shows)
    shown: frozenset[GroupKind] = frozenset()
    # kinds held in no part, whatever ``whole`` says: a watch cache's kinds not synced yet
    missing: frozenset[GroupKind] = frozenset()

    def holds_whole(self, group: str, kind: str) -> bool:
        """Whether an object of this kind the view does not hold is absent (else: unknown)."""
        return (self.whole is None or (group, kind) in self.whole) and (group, kind) not in self.missing

    @property
    def partial(self) -> bool:
        """Whether some kind is not held whole (some answers may be unknown)."""
        return self.whole is not None or bool(self.missing)


EVERYTHING = Knowledge(None, "cluster")
PRESENCE = Knowledge(frozenset(), "inputs")


def kinds_held(objects: Iterable[Mapping[str, Any]], source: str = "state") -> Knowledge:
    """A directory's knowledge: the kinds it holds at least one object of, whole."""
    kinds = kinds_shown(objects)
    return Knowledge(kinds, source, kinds)


def presence(objects: Iterable[Mapping[str, Any]]) -> Knowledge:
    """The inputs' knowledge: nothing whole (a repository is a part of a cluster), the kinds they show."""
    return Knowledge(frozenset(), "inputs", kinds_shown(objects))


def kinds_shown(objects: Iterable[Mapping[str, Any]]) -> frozenset[GroupKind]:
    return frozenset((group_of(o.get("apiVersion")), str(o.get("kind", ""))) for o in objects)


def unknown_answer(found: Any, group: str, kind: str, knowledge: Knowledge) -> bool:
    """Whether a lookup's answer (an object or None for ``get``, a list for ``list``) is unknown.
    Where the view holds the kind whole, every answer is a fact. Elsewhere an object found is a
    fact, but neither an absence (None) nor a list is: a list says "these are all", which a
    part of a cluster cannot say (the default class, the Pods a pool selects, the rewrites of a
    pool may be among what it does not show)."""
    if knowledge.holds_whole(group, kind):
        return False
    return found is None or isinstance(found, list)


# The built-in kinds that are cluster-scoped (``kubectl api-resources --namespaced=false``); a
# CRD's kind says its scope itself.
_CLUSTER_SCOPED: frozenset[GroupKind] = frozenset({
    ("", "Namespace"), ("", "Node"), ("", "PersistentVolume"), ("", "ComponentStatus"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"), ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("scheduling.k8s.io", "PriorityClass"), ("storage.k8s.io", "StorageClass"), ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"), ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"), ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"), ("networking.k8s.io", "IPAddress"), ("networking.k8s.io", "ServiceCIDR"),
    ("resource.k8s.io", "DeviceClass"), ("resource.k8s.io", "ResourceSlice"),
    ("certificates.k8s.io", "CertificateSigningRequest"), ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
})


def cluster_scoped_builtin(group: str, kind: str) -> bool:
    return (group, kind) in _CLUSTER_SCOPED


def place_namespace(obj: dict[str, Any], namespace: str, namespaced: bool) -> dict[str, Any]:
    """``obj`` as ``kubectl apply -n NAMESPACE`` stores it: a namespaced object that names no
    namespace in ``namespace`` (a new dict; ``obj`` is left as it is); a cluster-scoped one as it is."""
    metadata = obj.get("metadata")
    if not namespaced or not isinstance(metadata, dict) or metadata.get("namespace"):
        return obj
    return {**obj, "metadata": {**metadata, "namespace": namespace}}
