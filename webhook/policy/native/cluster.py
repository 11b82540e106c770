"""The cluster's own ValidatingAdmissionPolicies and bindings, read from a cluster view, for the
audit of native policies (``infergate controller --audit-native-policies``, ``infergate audit
--kubeconfig K --native-policies``).

- The policies and bindings infergate generated from its AdmissionPolicies (labelled
  ``app.kubernetes.io/managed-by: infergate``) are left out: their AdmissionPolicies are audited
  already, and a second result for the same rule would say the same thing twice.
- Each policy and binding is read on its own: one that does not load (an expression this
  evaluator does not compile) is left out and named in ``problems``; the others are audited.
- A policy whose ``paramKind`` is a custom resource is audited when the cluster's discovery
  (``discover``, the REST mapping the apiserver itself reads) says the kind's plural and scope:
  the watch list then follows that kind with its scope (``read.discovered``), and the evaluation
  reads the scope from the view. A kind discovery says is not served is kept: the apiserver's
  answer is then its own configuration error (``failed to find resource referenced by
  paramKind``). Without ``discover``, or when discovery does not answer, the policy is left out
  and named in ``unsupported``: guessing the scope would invent a cluster (a wrong scope makes
  the params "not found"). Both are looked up again every ``rediscover_interval`` (a CRD
  installed after its policy).
- A policy whose params the view cannot read (RBAC refuses the param kind's list) is judged by
  none of its bindings (their params unknown: ``webhook.policy.native.params``) and named in
  ``unknown`` (logged once per reason).

:class:`ClusterNativePolicies` is a policy-set provider: another provider's set (the
AdmissionPolicies) with the cluster's policies as its ``native`` ones, a new set whenever a
policy, a binding or what their params read changes, so that the audit re-audits every object.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from webhook.apiversion import group_of
from webhook.documents import Document, Origin
from webhook.kinds import Kind
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
    # (apiVersion, kind) -> the param kind as discovery serves it (custom resources only)
    discovered: Mapping[tuple[str, str], Kind] = field(default_factory=dict)
    # custom resources' param kinds discovery did not serve or did not answer: looked up again later
    undiscovered: frozenset[tuple[str, str]] = frozenset()

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


Discover = Callable[[str, str], "Kind | None"]  # (apiVersion, kind) -> served as, None: not served


def read(policies: Iterable[Mapping[str, Any]], bindings: Iterable[Mapping[str, Any]], evaluator: Any,
         schemas: Any = None, discover: Discover | None = None) -> ClusterPolicies:
    """The policies and bindings among the cluster's objects to audit by (see the module doc);
    ``discover``: the cluster's discovery of a custom resource's param kind (raises when it does
    not answer)."""
    out_generated: list[str] = []
    problems: list[str] = []
    unsupported: list[str] = []
    discovered: dict[tuple[str, str], Kind] = {}
    left_out: list[tuple[str, str]] = []
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
                    why = _undiscovered(param_kind, discover, discovered)
                    if why is not None:
                        left_out.append(param_kind)
                        unsupported.append(f"{POLICY} {policy.name}: its params are a custom resource "
                                           f"({param_kind[1]}.{group_of(param_kind[0])}), {why}")
                        continue
                compiled.append(policy)
            warnings += loaded.warnings
            for policy_name, found in loaded.bindings.items():
                found_bindings.setdefault(policy_name, []).extend(found)
    native = NativePolicies(tuple(compiled), {name: tuple(sorted(found, key=lambda b: b.name))
                                              for name, found in found_bindings.items()}, (), tuple(warnings))
    undiscovered = frozenset(p.definition.param_kind for p in compiled if p.definition.param_kind is not None
                             and custom_resource(p.definition.param_kind[0])
                             and p.definition.param_kind not in discovered) | frozenset(left_out)
    return ClusterPolicies(native, tuple(out_generated), tuple(problems), tuple(unsupported), discovered,
                           undiscovered if discover is not None else frozenset())


def _undiscovered(param_kind: tuple[str, str], discover: Discover | None,
                  discovered: dict[tuple[str, str], Kind]) -> str | None:
    """Why a custom resource's param kind cannot be audited (None: it can; what discovery said
    goes into ``discovered``, a kind not served included: the apiserver's own error follows)."""
    if discover is None:
        return "whose scope the audit does not read"
    if param_kind in discovered:
        return None
    try:
        found = discover(*param_kind)
    except Exception as exc:  # noqa: BLE001 - discovery's failure of any kind: named, tried again on the next read
        return f"whose scope discovery did not answer ({exc})"
    if found is not None:
        discovered[param_kind] = found
    return None


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
                 policy_kind: Any = None, binding_kind: Any = None, discover: Discover | None = None,
                 rediscover_interval: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        from webhook import kinds

        self.policies, self.state, self.evaluator, self.schemas = policies, state, evaluator, schemas
        # a param kind not served (its CRD installed later) or discovery away: looked up again this often
        self.discover, self.rediscover_interval, self.clock = discover, rediscover_interval, clock
        self._read_at = 0.0
        self.unknown: tuple[str, ...] = ()  # ``ValidatingAdmissionPolicy name: why`` (params unreadable)
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
        now = self.clock()
        rediscover = bool(self.read.undiscovered) and now - self._read_at >= self.rediscover_interval
        if objects_key != self._objects_key or rediscover:
            before = (self.read.param_kinds, dict(self.read.discovered))
            self.read = read(vaps, bindings, self.evaluator, self.schemas, self.discover)
            self._objects_key, self._read_at = objects_key, now
            self._report()
            if (self.read.param_kinds, dict(self.read.discovered)) != before:
                for listener in self.on_params:
                    listener(self.read.param_kinds)
        self.unknown = unreadable_params(self.read.native, self.state)
        self._report()
        # (what discovery says is part of the verdicts: a param kind's scope, or its absence)
        key = (objects_key, tuple(sorted(self.read.discovered.items())), params_read(self.read.native, self.state))
        if base is not self._base or key != self._key or self._set is None:
            self._base, self._key = base, key
            self._set = dataclasses.replace(base, native=merged(getattr(base, "native", None), self.read.native))
        return self._set

    def _report(self) -> None:
        """Log each policy left out, or not judged, once (until it or why changes)."""
        for line in (*self.read.problems, *self.read.unsupported):
            if line not in self._reported:
                self._reported.add(line)
                log.warning("native policies: left out of the audit: %s", line.splitlines()[0])
        for line in self.unknown:
            if line not in self._reported:
                self._reported.add(line)
                log.warning("native policies: not judged, params unknown: %s", line)


def unreadable_params(native: NativePolicies, state: Any) -> tuple[str, ...]:
    """``ValidatingAdmissionPolicy name: why`` of each bound policy whose param kind ``state``
    does not hold (its watch refused, e.g. by RBAC: its bindings' params are unknown and the
    policy judges nothing). A kind being synced for the first time is not named: the audit waits
    for it (``webhook.controller.background_audit``)."""
    missing = getattr(getattr(state, "knowledge", EVERYTHING), "missing", frozenset())
    reason = getattr(state, "pending_reason", None)
    out = []
    for policy, bindings in native.bound():
        param_kind = policy.definition.param_kind
        if param_kind is None or not any(b.param_ref is not None for b in bindings):
            continue
        api_version, kind = param_kind
        if (group_of(api_version), kind) not in missing:
            continue
        why = reason(api_version, kind) if reason is not None else None
        if why == "not synced yet":
            continue
        out.append(f"{POLICY} {policy.name}: its params ({kind}.{group_of(api_version) or 'core'}) cannot be read"
                   f"{f' ({why})' if why else ''}: its bindings are not judged")
    return tuple(out)
