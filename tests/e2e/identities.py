"""The chart's own identities for the local processes: its ServiceAccounts and RBAC, exactly
as ``helm template`` renders them, and a kubeconfig per ServiceAccount holding a token from the
TokenRequest API (what the kubelet mounts into the chart's Pods). ``infergate serve`` and
``infergate controller`` run here with those, so every scenario also proves the chart grants
enough; :func:`without_rule` makes the identity that proves each rule is needed.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from . import chart, cluster
from .api import Kube

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
TOKEN_SECONDS = 3 * 3600  # longer than any run


@functools.cache
def chart_rbac(namespace: str) -> tuple[dict[str, Any], ...]:
    """The ServiceAccounts and RBAC objects of the default install into ``namespace``."""
    return tuple(o for o in chart.rendered_objects({}, namespace, hooks=False) if o["kind"] in RBAC_KINDS)


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
    """The chart's RBAC in the cluster; component -> the kubeconfig of its ServiceAccount."""
    for obj in chart_rbac(namespace):
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


def without_rule(kube: Kube, owned: cluster.Owned, namespace: str, component: str, dropped: int,
                 admin_kubeconfig: str, directory: Path, name: str) -> str:
    """A ServiceAccount ``name`` bound to a copy of the component's ClusterRole less its rule
    number ``dropped``; returns its kubeconfig."""
    role = copy.deepcopy(cluster_role(namespace, component))
    del role["rules"][dropped]
    role["metadata"] = {"name": name}
    for obj in (
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        role,
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ):
        cluster.create_owned(kube, obj, owned)
    return token_kubeconfig(admin_kubeconfig, token(kube, namespace, name), directory / f"{name}.kubeconfig", name)


def remove(kube: Kube, namespace: str, name: str) -> None:
    kube.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name)
    kube.delete("rbac.authorization.k8s.io/v1", "ClusterRole", name)
    kube.delete("v1", "ServiceAccount", name, namespace)
