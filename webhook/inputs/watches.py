"""What the watch caches watch, read from the registry of kinds (``webhook.kinds``): the
webhook's lookups and the CRDs of the kinds it serves, the controller's kinds, and the kinds an
audit lists. One watch per group and kind."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webhook import kinds
from webhook.admission.chain import guess_plural
from webhook.apiversion import api_version_of, group_of
from webhook.schema.bundled import version_priority
from webhook.schema.watched import CRD_API_VERSION, CRD_KIND, CRD_PLURAL
from webhook.policy.unknown import kinds_read
from webhook.state.kube import WatchedKind
from webhook.state.watch_list import watches_for

__all__ = ["audited_watches", "controller_watches", "crd_watches", "handover_watches", "lookup_watches",
           "lookup_watches_with", "native_policy_watches", "read_lookups", "webhook_crd_names", "webhook_watches"]


def _lookup_watch(declaration: kinds.Declaration) -> WatchedKind:
    names = declaration.lookup_names
    if len(names) > 1:  # one field selector names one object
        raise ValueError(f"{declaration.crd_name}: a lookup of several names cannot be one watch")
    return WatchedKind(declaration.read_as.api_version, declaration.kind, declaration.plural,
                       field_selector=f"metadata.name={names[0]}" if names else None,
                       metadata_only=declaration.lookup_metadata_only, older_versions=declaration.versions[1:])


def lookup_watches() -> tuple[WatchedKind, ...]:
    """What the admission policies may read: the registry's lookup kinds."""
    return tuple(_lookup_watch(d) for d in kinds.lookups())


def lookup_watches_with(wanted: Iterable[tuple[str, str]],
                        served: Callable[[str, str], Any] | None = None) -> tuple[WatchedKind, ...]:
    """The lookup watches, and every object of each ``wanted`` kind (apiVersion, kind) besides:
    the params of native policies (a ConfigMap param: every ConfigMap, not only KubeAI's
    config). A kind's plural: its declaration's (``webhook.kinds``), else the CRD ``served``
    (a ``CRDRegistry.served``) names, else a built-in kind's, its kind in lower case plus "s"."""
    watches = list(lookup_watches())
    for api_version, kind in sorted(wanted):
        if any(w.api_version == api_version and w.kind == kind
               and not (w.field_selector or w.label_selector or w.namespace) for w in watches):
            continue  # listed whole already
        declaration = kinds.declared(group_of(api_version), kind)
        crd = served(api_version, kind) if served is not None and declaration is None else None
        plural = declaration.plural if declaration is not None else crd.plural if crd is not None \
            else kind.lower() + "s"
        watches = [w for w in watches if not (w.api_version == api_version and w.kind == kind)]
        watches.append(WatchedKind(api_version, kind, plural))
    return tuple(watches)


def webhook_crd_names() -> frozenset[str]:
    """``metadata.name`` of every CRD of a kind the webhook serves (``<plural>.<group>``): the
    CRDs its watch cache watches in a cluster, and RBAC grants by name."""
    return frozenset(d.crd_name for d in kinds.served())


def crd_watches() -> tuple[WatchedKind, ...]:
    """One watch per CRD of a served kind (RBAC then grants exactly these CRDs by resourceNames,
    and no other CRD of the cluster travels)."""
    return tuple(WatchedKind(CRD_API_VERSION, CRD_KIND, CRD_PLURAL, field_selector=f"metadata.name={name}")
                 for name in sorted(webhook_crd_names()))


def read_lookups(policies: Any = None) -> tuple[WatchedKind, ...]:
    """Of the lookup kinds, those the loaded ``policies`` (a ``PolicySet``; None: every one) read
    (``webhook.state.watch_list``): a kind nothing reads is neither listed nor watched."""
    if policies is None:
        return lookup_watches()
    return watches_for(lookup_watches(), kinds_read(policies.policies))


HANDOVER_KINDS = (kinds.VALIDATING_ADMISSION_POLICY, kinds.VALIDATING_ADMISSION_POLICY_BINDING,
                  kinds.MUTATING_ADMISSION_POLICY, kinds.MUTATING_ADMISSION_POLICY_BINDING)


def handover_watches() -> tuple[WatchedKind, ...]:
    """``serve --native-policies``: the ValidatingAdmissionPolicies, MutatingAdmissionPolicies
    and their bindings labelled managed-by infergate (``webhook.policy.native_handover``).
    (Named apart from ``native_policy_watches``, the audit's watch of every VAP, which an
    earlier definition under the same name was shadowed by.)"""
    from webhook.policy.native_handover import MANAGED_BY_SELECTOR

    return tuple(WatchedKind(k.api_version, k.kind, k.plural, label_selector=MANAGED_BY_SELECTOR)
                 for k in HANDOVER_KINDS)


def webhook_watches(policies: Any = None, *, native: bool = False) -> tuple[WatchedKind, ...]:
    """What the webhook's watch cache watches: what the ``policies`` read (None: every lookup
    kind), the CRDs of the kinds it judges, and with ``native`` the generated VAPs, MAPs and bindings."""
    return read_lookups(policies) + crd_watches() + (handover_watches() if native else ())


def native_policy_watches(param_kinds: Iterable[tuple[str, str]] = (),
                          discovered: Mapping[tuple[str, str], kinds.Kind] | None = None) -> tuple[WatchedKind, ...]:
    """The cluster's ValidatingAdmissionPolicies and bindings (the registry's native policy
    kinds) and the params they name (``(apiVersion, kind)`` each): every object of a param kind,
    since a binding's ``paramRef`` may name any of them or select them by labels. A kind's
    plural: the registry's, else ``discovered``'s (a custom resource's, as the cluster's
    discovery serves it; its scope then travels with the watch, for the evaluation to read),
    else a built-in kind's guessed as apimachinery guesses it. Listed before the lookups: where
    a lookup watches less of the same kind (one ConfigMap by name, Secrets as metadata), this
    watch is the one kept."""
    out = [WatchedKind(d.read_as.api_version, d.kind, d.plural) for d in kinds.native_policies()]
    for api_version, kind in sorted(set(param_kinds)):
        declared = kinds.declared(group_of(api_version), kind)
        found = (discovered or {}).get((api_version, kind))
        plural = declared.plural if declared is not None else found.plural if found is not None \
            else guess_plural(kind)
        out.append(WatchedKind(api_version, kind, plural, namespaced=found.namespaced if found is not None else None))
    return tuple(out)


def _unique(watches: Iterable[WatchedKind]) -> list[WatchedKind]:
    unique: dict[tuple[str, str], WatchedKind] = {}
    for watch in watches:
        unique.setdefault((group_of(watch.api_version), watch.kind), watch)
    return list(unique.values())


def controller_watches(controller_kinds: Iterable[kinds.Kind], audited: Iterable[kinds.Kind] = (),
                       reports: Iterable[WatchedKind] = (), policies: Any = None,
                       native: Iterable[WatchedKind] = ()) -> tuple[WatchedKind, ...]:
    """The controller's watch cache: its kinds, and with the audit (``audited``, the kinds it
    judges, and its ``reports``) what its ``policies`` read (None: every lookup kind) and the
    ``native`` policies' watches (``native_policy_watches``); one watch per group and kind, the
    controller's own version first."""
    watches = [WatchedKind(k.api_version, k.kind, k.plural) for k in controller_kinds]
    if audited or reports:
        older = {(group_of(w.api_version), w.kind): w.older_versions for w in lookup_watches()}
        watches += native
        watches += read_lookups(policies)
        watches += [WatchedKind(k.api_version, k.kind, k.plural, older_versions=older.get((k.group, k.kind), ()))
                    for k in audited]
        watches += reports
    return tuple(_unique(watches))


def audited_watches(audited: Iterable[kinds.Kind], native: Iterable[WatchedKind] = ()
                    ) -> tuple[list[WatchedKind], list[WatchedKind]]:
    """(every watch, the watches of audited kinds) for ``audited`` (``Auditor.audited_kinds``,
    any versions): one per group and kind, the webhook's own where it watches the kind already,
    else the newest version with the older ones to fall back to; with the ``native`` policies'
    watches (``native_policy_watches``) in place of a lookup's of the same kind."""
    by_kind: dict[tuple[str, str], list[kinds.Kind]] = {}
    for kind in audited:
        by_kind.setdefault((kind.group, kind.kind), []).append(kind)
    native = list(native)
    replaced = {(group_of(w.api_version), w.kind) for w in native}
    lookups = native + [w for w in lookup_watches() if (group_of(w.api_version), w.kind) not in replaced]
    webhook = {(group_of(k.api_version), k.kind): k for k in lookups}
    watched: list[WatchedKind] = []
    extra: list[WatchedKind] = []
    for (group, kind), versions in sorted(by_kind.items()):
        if (group, kind) in webhook:
            watched.append(webhook[(group, kind)])
            continue
        versions.sort(key=lambda k: version_priority(k.version), reverse=True)
        watch = WatchedKind(api_version_of(group, versions[0].version), kind, versions[0].plural,
                            older_versions=tuple(k.version for k in versions[1:]))
        watched.append(watch)
        extra.append(watch)
    return list(lookups) + extra + list(crd_watches()), watched
