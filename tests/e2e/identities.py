"""The chart's own identities for the local processes: its ServiceAccounts and RBAC, exactly
as ``helm template`` renders them, and a kubeconfig per ServiceAccount holding a token from the
TokenRequest API (what the kubelet mounts into the chart's Pods). ``infergate serve`` and
``infergate controller`` run here with those, so every scenario also proves the chart grants
enough; :func:`with_roles_less` makes the identity that proves each rule is needed.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from . import chart, cluster, selection
from .api import Kube

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
TOKEN_SECONDS = 3 * 3600  # longer than any run


@functools.cache
def chart_rbac(namespace: str, native: bool = False) -> tuple[dict[str, Any], ...]:
    """The ServiceAccounts and RBAC objects of the default install into ``namespace`` (``native``:
    with ``policies.native.enabled``)."""
    values = selection.NATIVE_VALUES if native else {}
    return tuple(o for o in chart.rendered_objects(values, namespace, hooks=False) if o["kind"] in RBAC_KINDS)


def native_owner(namespace: str) -> str:
    """The ClusterRole that owns the generated objects with ``policies.native.enabled``."""
    return next(o["metadata"]["name"] for o in chart_rbac(namespace, True)
                if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-controller-native-policies"))


def names(namespace: str) -> dict[str, str]:
    """component (webhook, controller) -> its ServiceAccount's name."""
    return {o["metadata"]["labels"]["app.kubernetes.io/component"]: o["metadata"]["name"]
            for o in chart_rbac(namespace) if o["kind"] == "ServiceAccount"}


def token(kube: Kube, namespace: str, service_account: str) -> str:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS}}
    reply = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token", body)
    return reply.expect_ok()["status"]["token"]


def token_kubeconfig(admin_kubeconfig: str, bearer: str, path: Path, user: str) -> str:
    """The admin kubeconfig's current cluster (server, CA) with ``bearer`` as its only user."""
    config = yaml.safe_load(Path(admin_kubeconfig).read_text())
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or ()}
    context = contexts[config.get("current-context") or next(iter(contexts))]
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or ()}
    server = dict(clusters[context["cluster"]])
    authority = server.get("certificate-authority")
    if authority and not Path(authority).is_absolute():  # relative to the kubeconfig it came from
        server["certificate-authority"] = str(Path(admin_kubeconfig).resolve().parent / authority)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": [{"name": "cluster", "cluster": server}],
        "users": [{"name": user, "user": {"token": bearer}}],
        "contexts": [{"name": user, "context": {"cluster": "cluster", "user": user,
                                                "namespace": context.get("namespace", "default")}}],
    }))
    path.chmod(0o600)
    return str(path)


def install(kube: Kube, owned: cluster.Owned, namespace: str, admin_kubeconfig: str, directory: Path) -> dict[str, str]:
    """The chart's RBAC in the cluster (with ``policies.native.enabled`` in a native run);
    component -> the kubeconfig of its ServiceAccount."""
    for obj in chart_rbac(namespace, selection.native_policies()):
        cluster.create_owned(kube, obj, owned)
    return {component: token_kubeconfig(admin_kubeconfig, token(kube, namespace, account),
                                         directory / f"{component}.kubeconfig", account)
            for component, account in names(namespace).items()}


def rule_label(rule: Mapping[str, Any]) -> str:
    groups = ",".join(g or "core" for g in rule.get("apiGroups") or ())
    return f"{groups}/{'+'.join(rule.get('resources') or ())}:{'+'.join(rule.get('verbs') or ())}"


def cluster_role(namespace: str, component: str) -> dict[str, Any]:
    account = names(namespace)[component]
    return next(o for o in chart_rbac(namespace) if o["kind"] == "ClusterRole" and o["metadata"]["name"] == account)


def roles_of(namespace: str, component: str) -> list[dict[str, Any]]:
    """The ClusterRole and Roles the default install binds to the component's ServiceAccount."""
    account = names(namespace)[component]
    bound = {(o["roleRef"]["kind"], o["roleRef"]["name"]) for o in chart_rbac(namespace)
             if o["kind"] in ("ClusterRoleBinding", "RoleBinding") and any(s["name"] == account for s in o["subjects"])}
    return [o for o in chart_rbac(namespace) if (o["kind"], o["metadata"]["name"]) in bound]


def with_roles_less(kube: Kube, owned: cluster.Owned, namespace: str, component: str, name: str,
                    dropped: tuple[str, int] | None, renamed: Mapping[str, str], admin_kubeconfig: str,
                    directory: Path) -> str:
    """A ServiceAccount ``name`` bound to copies of every Role and ClusterRole of the component,
    less rule number ``dropped[1]`` of the role named ``dropped[0]`` (None: all rules), the
    objects named in ``resourceNames`` renamed by ``renamed`` (the Secret, Lease and webhook
    configurations of the process under test, not the release's); returns its kubeconfig.
    :func:`remove` takes it all away."""
    cluster.create_owned(kube, {"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": name, "namespace": namespace}}, owned)
    for number, role in enumerate(roles_of(namespace, component)):
        copied = copy.deepcopy(role)
        rules = [rule for i, rule in enumerate(copied["rules"]) if (role["metadata"]["name"], i) != dropped]
        for rule in rules:
            if rule.get("resourceNames"):
                rule["resourceNames"] = [renamed.get(n, n) for n in rule["resourceNames"]]
        namespaced = role["kind"] == "Role"
        meta = {"name": f"{name}-{number}", **({"namespace": namespace} if namespaced else {})}
        cluster.create_owned(kube, {**copied, "metadata": meta, "rules": rules}, owned)
        cluster.create_owned(kube, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding" if namespaced else "ClusterRoleBinding",
            "metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"],
                                          "name": meta["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}, owned)
    return token_kubeconfig(admin_kubeconfig, token(kube, namespace, name), directory / f"{name}.kubeconfig", name)


def remove(kube: Kube, namespace: str, name: str, component: str) -> None:
    for number, role in enumerate(roles_of(namespace, component)):
        namespaced = role["kind"] == "Role"
        for kind in ("RoleBinding", "Role") if namespaced else ("ClusterRoleBinding", "ClusterRole"):
            kube.delete("rbac.authorization.k8s.io/v1", kind, f"{name}-{number}", namespace if namespaced else None)
    kube.delete("v1", "ServiceAccount", name, namespace)
