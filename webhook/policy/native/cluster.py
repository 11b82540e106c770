"""The cluster's own ValidatingAdmissionPolicies and bindings, read from a cluster view, for the
audit of native policies (``infergate controller --audit-native-policies``, ``infergate audit
--kubeconfig K --native-policies``).

- The policies and bindings infergate generated from its AdmissionPolicies (labelled
  ``app.kubernetes.io/managed-by: infergate``) are left out: their AdmissionPolicies are audited
  already, and a second result for the same rule would say the same thing twice.
- Each policy and binding is read on its own: one that does not load (an expression this
  evaluator does not compile) is left out and named in ``problems``; the others are audited.
- A policy whose ``paramKind`` is a custom resource is left out and named in ``unsupported``:
  the audit's view holds no CRDs to tell whether that kind is namespaced, and guessing would
  invent a cluster (a wrong scope makes the params "not found").

:class:`ClusterNativePolicies` is a policy-set provider: another provider's set (the
AdmissionPolicies) with the cluster's policies as its ``native`` ones, a new set whenever a
policy, a binding or what their params read changes, so that the audit re-audits every object.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from webhook.apiversion import group_of
from webhook.documents import Document, Origin
from webhook.policy.loader import PolicyLoadError
from webhook.policy.native.loader import NativePolicies, load_documents
from webhook.policy.native.model import API_VERSION, BINDING, POLICY
from webhook.state.knowledge import EVERYTHING
from webhook.state.selectors import SelectorError, from_label_selector

log = logging.getLogger(__name__)

MANAGED_BY = ("app.kubernetes.io/managed-by", "infergate")


@dataclass(frozen=True)
class ClusterPolicies:
    """What was read: the policies to audit by, those left out and why."""

    native: NativePolicies = field(default_factory=NativePolicies)
    generated: tuple[str, ...] = ()  # ``Kind name`` of each left out as infergate's own
    problems: tuple[str, ...] = ()  # ``Kind name: problem`` of each that does not load
    unsupported: tuple[str, ...] = ()  # ``ValidatingAdmissionPolicy name: why`` (a custom resource's params)

    @property
    def param_kinds(self) -> frozenset[tuple[str, str]]:
        """(apiVersion, kind) of the params the policies read."""
        return frozenset(p.definition.param_kind for p in self.native.policies if p.definition.param_kind)


def generated(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is one infergate generated (``infergate native-policies``, the chart)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and labels.get(MANAGED_BY[0]) == MANAGED_BY[1]


def custom_resource(api_version: str) -> bool:
    """Whether a group is a custom resource's (a dot, and not Kubernetes' own ``*.k8s.io``)."""
    group = group_of(api_version)
    return bool(group) and "." in group and not group.endswith(".k8s.io")


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    return str(meta.get("name", ""))


def read(policies: Iterable[Mapping[str, Any]], bindings: Iterable[Mapping[str, Any]], evaluator: Any,
         schemas: Any = None) -> ClusterPolicies:
    """The policies and bindings among the cluster's objects to audit by (see the module doc)."""
    out_generated: list[str] = []
    problems: list[str] = []
    unsupported: list[str] = []
    compiled = []
    warnings: list[str] = []
    found_bindings: dict[str, list[Any]] = {}
    for kind, objects in ((POLICY, policies), (BINDING, bindings)):
        for obj in sorted(objects, key=_name):
            name = _name(obj)
            if generated(obj):
                out_generated.append(f"{kind} {name}")
                continue
            doc = Document(Origin(f"{kind} {name}", None), {**obj, "apiVersion": API_VERSION, "kind": kind})
            try:
                loaded = load_documents([doc], evaluator, schemas)
            except PolicyLoadError as exc:  # (no file, no line: the object's kind and name say where)
                problems.append("; ".join(p.replace(f"{doc.where}:None", doc.where) for p in exc.problems))
                continue
            for policy in loaded.policies:
                param_kind = policy.definition.param_kind
                if param_kind is not None and custom_resource(param_kind[0]):
                    unsupported.append(f"{POLICY} {policy.name}: its params are a custom resource "
                                       f"({param_kind[1]}.{group_of(param_kind[0])}), whose scope the audit does "
                                       "not read")
                    continue
                compiled.append(policy)
            warnings += loaded.warnings
            for policy_name, found in loaded.bindings.items():
                found_bindings.setdefault(policy_name, []).extend(found)
    native = NativePolicies(tuple(compiled), {name: tuple(sorted(found, key=lambda b: b.name))
                                              for name, found in found_bindings.items()}, (), tuple(warnings))
    return ClusterPolicies(native, tuple(out_generated), tuple(problems), tuple(unsupported))


def params_read(native: NativePolicies, state: Any) -> tuple[Any, ...]:
    """What the bound policies' params are in ``state`` now: per binding with a ``paramRef``,
    whether its kind is known whole and the (namespace, name, resourceVersion) of every object its
    ref may select. A change means the verdicts may change (a param edited, created, deleted)."""
    knowledge = getattr(state, "knowledge", EVERYTHING)
    out: list[Any] = []
    for policy, bindings in native.bound():
        param_kind = policy.definition.param_kind
        if param_kind is None:
            continue
        api_version, kind = param_kind
        for binding in bindings:
            ref = binding.param_ref
            if ref is None:
                continue
            if ref.name:
                found = [o for o in state.list(api_version, kind, ref.namespace or None) if _name(o) == ref.name]
            else:
                try:
                    selector = from_label_selector(ref.selector or {})
                except (SelectorError, KeyError, TypeError, AttributeError):
                    continue  # a configuration error: the same whatever the params are
                found = state.list(api_version, kind, ref.namespace or None, selector=selector)
            versions = sorted(((o.get("metadata") or {}).get("namespace") or "", _name(o),
                               str((o.get("metadata") or {}).get("resourceVersion", ""))) for o in found)
            out.append((policy.name, binding.name, knowledge.holds_whole(group_of(api_version), kind),
                        tuple(versions)))
    return tuple(out)


def _versions(objects: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((_name(o), str((o.get("metadata") or {}).get("resourceVersion", ""))) for o in objects))


def merged(own: NativePolicies | None, cluster: NativePolicies) -> NativePolicies:
    """``own`` (the policy files') with ``cluster``'s added; a cluster policy of a name the files
    define is left out (the files are what the user asked to be judged by)."""
    if not own:
        return cluster
    names = {p.name for p in own.policies}
    policies = tuple(sorted(own.policies + tuple(p for p in cluster.policies if p.name not in names),
                            key=lambda p: p.name))
    bindings = dict(own.bindings)
    for name, found in cluster.bindings.items():
        if name not in names:
            bindings[name] = tuple(sorted(bindings.get(name, ()) + found, key=lambda b: b.name))
    return NativePolicies(policies, bindings, own.unsupported, own.warnings + cluster.warnings)


class ClusterNativePolicies:
    """A policy-set provider: ``policies``' current set (a ``PolicyDirectory`` or a
    ``PolicySet``) with the ValidatingAdmissionPolicies and bindings ``state`` holds (it must
    watch them, and the params they name: :attr:`param_kinds`) as its native policies. The set
    is new whenever the files' set, a policy, a binding or its params change; ``on_params`` is
    called with the param kinds whenever they change (the watch list must follow them)."""

    def __init__(self, policies: Any, state: Any, evaluator: Any, *, schemas: Any = None,
                 policy_kind: Any = None, binding_kind: Any = None) -> None:
        from webhook import kinds

        self.policies, self.state, self.evaluator, self.schemas = policies, state, evaluator, schemas
        self.policy_kind = policy_kind or kinds.VALIDATING_ADMISSION_POLICY
        self.binding_kind = binding_kind or kinds.VALIDATING_ADMISSION_POLICY_BINDING
        self.on_params: list[Callable[[frozenset[tuple[str, str]]], None]] = []
        self.read: ClusterPolicies = ClusterPolicies()
        self._objects_key: Any = None
        self._base: Any = None
        self._key: Any = None
        self._set: Any = None
        self._reported: set[str] = set()

    @property
    def on_load(self) -> list:
        """The wrapped directory's reload hooks (the watch cache follows what its policies read)."""
        return getattr(self.policies, "on_load", [])

    @property
    def param_kinds(self) -> frozenset[tuple[str, str]]:
        return self.read.param_kinds

    def poll(self) -> bool:
        poll = getattr(self.policies, "poll", None)
        return bool(poll()) if poll is not None else False

    def current(self) -> Any:
        base = self.policies.current()
        vaps = self.state.list(self.policy_kind.api_version, self.policy_kind.kind)
        bindings = self.state.list(self.binding_kind.api_version, self.binding_kind.kind)
        objects_key = (_versions(vaps), _versions(bindings))
        if objects_key != self._objects_key:
            before = self.read.param_kinds
            self.read = read(vaps, bindings, self.evaluator, self.schemas)
            self._objects_key = objects_key
            self._report()
            if self.read.param_kinds != before:
                for listener in self.on_params:
                    listener(self.read.param_kinds)
        key = (objects_key, params_read(self.read.native, self.state))
        if base is not self._base or key != self._key or self._set is None:
            self._base, self._key = base, key
            self._set = dataclasses.replace(base, native=merged(getattr(base, "native", None), self.read.native))
        return self._set

    def _report(self) -> None:
        """Log each policy left out once (until it changes)."""
        for line in (*self.read.problems, *self.read.unsupported):
            if line not in self._reported:
                self._reported.add(line)
                log.warning("native policies: left out of the audit: %s", line.splitlines()[0])
