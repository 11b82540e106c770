"""Every permission the chart grants, and why: the rendered (Cluster)Roles, in every
certificate mode, must grant exactly the table below. A new verb, resource or scope fails
here until it is added with its reason (docs/rbac.md shows the same table). The
webhook's grants are also checked against what its code watches."""

from __future__ import annotations


import helm_python as helm
import pytest
import yaml

from webhook.inputs.watches import webhook_crd_names, webhook_watches
from tests.support.paths import CHART, REPO

NAMESPACE, RELEASE = "infergate-system", "infergate"

# (role, scope, apiGroup, resource, resourceName or "*") -> (verbs, why)
GRANTS: dict[tuple[str, str, str, str, str], tuple[frozenset[str], str]] = {
    # the webhook: reads what its policies look up (a watch cache), manages its certificate
    ("webhook", "cluster", "ai.deckhouse.io", "inferenceserviceclasses", "*"): ("get list watch", "class policies of orders"),
    ("webhook", "cluster", "ai.deckhouse.io", "models", "*"): ("get list watch", "catalog facts (parameter count, format)"),
    ("webhook", "cluster", "ai.deckhouse.io", "clustermodels", "*"): ("get list watch", "catalog facts"),
    ("webhook", "cluster", "inference.networking.x-k8s.io", "inferencepools", "*"): ("get list watch", "the referenced pool exists"),
    ("webhook", "cluster", "inference.networking.x-k8s.io", "inferencemodels", "*"): ("get list watch", "model name already in use"),
    ("webhook", "cluster", "inference.networking.x-k8s.io", "inferenceobjectives", "*"): ("get list watch", "objectives of the legacy group"),
    ("webhook", "cluster", "inference.networking.x-k8s.io", "inferencemodelrewrites", "*"): ("get list watch", "rewrites of one pool overlap"),
    ("webhook", "cluster", "inference.networking.k8s.io", "inferencepools", "*"): ("get list watch", "routes and objectives name an existing pool"),
    ("webhook", "cluster", "llm-d.ai", "inferenceobjectives", "*"): ("get list watch", "objectives of the pool"),
    ("webhook", "cluster", "llm-d.ai", "inferencemodelrewrites", "*"): ("get list watch", "rewrites of one pool overlap"),
    ("webhook", "cluster", "", "pods", "*"): ("get list watch", "a pool's endpoints: labels, container ports, phase (the rest dropped on arrival)"),
    ("webhook", "cluster", "", "services", "*"): ("get list watch", "a pool's endpoint picker Service and its ports"),
    ("webhook", "cluster", "resource.k8s.io", "deviceclasses", "*"): ("get list watch", "ClaimDeviceMissing"),
    ("webhook", "cluster", "resource.k8s.io", "resourceslices", "*"): ("get list watch", "the device inventory"),
    ("webhook", "cluster", "scheduling.k8s.io", "priorityclasses", "*"): ("get list watch", "allowedPriorityClassNames"),
    ("webhook", "cluster", "", "namespaces", "*"): ("get list watch", "namespace labels for policy selectors"),
    ("webhook", "cluster", "", "configmaps", "kubeai-config"): ("get list watch", "KubeAI's system config, by name"),
    ("webhook", "cluster", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", RELEASE):
        ("get list watch patch", "caBundle injection into its own configuration, watched by name"),
    ("webhook", "cluster", "admissionregistration.k8s.io", "validatingwebhookconfigurations", RELEASE):
        ("get list watch patch", "caBundle injection into its own configuration, watched by name"),
    **{("webhook", "cluster", "apiextensions.k8s.io", "customresourcedefinitions", name):
       ("get list watch", "the CRD the cluster serves for a kind it judges, watched by name: its schema")
       for name in sorted(webhook_crd_names())},
    ("webhook", NAMESPACE, "", "secrets", f"{RELEASE}-tls"): ("get update", "its CA and serving pair (self-managed)"),
    ("webhook", NAMESPACE, "", "secrets", "*"): ("create", "the first replica creates that Secret (create takes no name)"),
    # the controller: reads its inputs, writes status only, its Lease and Events
    ("controller", "cluster", "kubeai.org", "models", "*"): ("get list watch", "audited; reconciled with statusWrites on"),
    ("controller", "cluster", "kubeai.org", "models/status", "*"): ("patch", "status only, never spec; only with statusWrites on"),
    ("controller", "cluster", "inference.networking.x-k8s.io", "inferencemodels", "*"): ("get list watch", "reconciled"),
    ("controller", "cluster", "inference.networking.x-k8s.io", "inferencepools", "*"): ("get list watch", "reconciled"),
    ("controller", "cluster", "inference.networking.x-k8s.io", "inferencemodels/status", "*"): ("patch", "status only"),
    ("controller", "cluster", "inference.networking.x-k8s.io", "inferencepools/status", "*"): ("patch", "status only"),
    ("controller", "cluster", "ai.deckhouse.io", "inferenceserviceclasses", "*"): ("get list watch", "reconciled"),
    ("controller", "cluster", "ai.deckhouse.io", "inferenceservices", "*"): ("get list watch", "reconciled"),
    ("controller", "cluster", "ai.deckhouse.io", "inferenceserviceclasses/status", "*"): ("patch", "status only"),
    ("controller", "cluster", "ai.deckhouse.io", "inferenceservices/status", "*"): ("patch", "status only"),
    ("controller", "cluster", "ai.deckhouse.io", "models", "*"): ("get list watch", "catalog facts (ModelResolved)"),
    ("controller", "cluster", "ai.deckhouse.io", "clustermodels", "*"): ("get list watch", "catalog facts"),
    ("controller", "cluster", "resource.k8s.io", "deviceclasses", "*"): ("get list watch", "placement planning"),
    ("controller", "cluster", "resource.k8s.io", "resourceslices", "*"): ("get list watch", "placement planning"),
    ("controller", "cluster", "resource.k8s.io", "resourceclaims", "*"): ("get list watch", "stuck claims: replan"),
    ("controller", "cluster", "", "pods", "*"): ("get list watch", "Model replicas, pool readiness"),
    ("controller", "cluster", "", "secrets", "*"): ("get list watch", "authSecretRef / API-key Secret exist, key names (values dropped on arrival)"),
    ("controller", "cluster", "", "namespaces", "*"): ("get list watch", "admission namespaces"),
    ("controller", "cluster", "", "services", "*"): ("get list watch", "endpoints"),
    ("controller", "cluster", "", "persistentvolumeclaims", "*"): ("get list watch", "model storage"),
    ("controller", "cluster", "apps", "statefulsets", "*"): ("get list watch", "WorkloadReady"),
    ("controller", "cluster", "apps", "deployments", "*"): ("get list watch", "WorkloadReady"),
    ("controller", "cluster", "scheduling.k8s.io", "priorityclasses", "*"): ("get list watch", "constraints.priorityClassName"),
    ("controller", "cluster", "storage.k8s.io", "storageclasses", "*"): ("get list watch", "modelStorageClassName exists"),
    ("controller", "cluster", "cert-manager.io", "clusterissuers", "*"): ("get list watch", "clusterIssuerName exists"),
    ("controller", "cluster", "deckhouse.io", "moduleconfigs", "*"): ("get list watch", "global publicDomainTemplate / https"),
    ("controller", "cluster", "", "events", "*"): ("create patch", "Events on reconciled objects"),
    # the controller's background audit (audit.enabled): what it judges and what the policies
    # read, its reports (never deleted: the garbage collector removes one with its object)
    ("controller", "cluster", "inference.networking.k8s.io", "inferencepools", "*"): ("get list watch", "audited"),
    ("controller", "cluster", "inference.networking.x-k8s.io", "inferenceobjectives", "*"): ("get list watch", "audited"),
    ("controller", "cluster", "inference.networking.x-k8s.io", "inferencemodelrewrites", "*"): ("get list watch", "audited"),
    ("controller", "cluster", "inference.networking.x-k8s.io", "inferencepoolimports", "*"): ("get list watch", "audited"),
    ("controller", "cluster", "llm-d.ai", "inferenceobjectives", "*"): ("get list watch", "audited"),
    ("controller", "cluster", "llm-d.ai", "inferencemodelrewrites", "*"): ("get list watch", "audited"),
    ("controller", "cluster", "gateway.networking.k8s.io", "httproutes", "*"): ("get list watch", "audited (those with an InferencePool backendRef)"),
    ("controller", "cluster", "", "configmaps", "kubeai-config"): ("get list watch", "KubeAI's system config the policies read, by name"),
    ("controller", "cluster", "openreports.io", "reports", "*"): ("get list watch create update", "its reports: watched (its own, by label), written only when changed"),
    ("controller", "cluster", "openreports.io", "clusterreports", "*"): ("get list watch create update", "the same, for cluster-scoped objects"),
    ("controller", "cluster", "wgpolicyk8s.io", "policyreports", "*"): ("get list watch create update", "the same where only the Policy WG's reports are served"),
    ("controller", "cluster", "wgpolicyk8s.io", "clusterpolicyreports", "*"): ("get list watch create update", "the same, cluster-scoped"),
    ("controller", NAMESPACE, "coordination.k8s.io", "leases", f"{RELEASE}-controller"): ("get update", "renew or take over"),
    ("controller", NAMESPACE, "coordination.k8s.io", "leases", "*"): ("create", "the first leader creates it"),
    # policies.native.enabled (docs/native-policies.md, "In a cluster"): the generated admission
    # policies applied by the controller, owned by its own ClusterRole, proven by dry-run probes;
    # the webhook's watch of them
    **{("controller", "cluster", "admissionregistration.k8s.io", resource, "*"):
       ("list create patch delete", "the generated objects: listed by label, server-side applied, marked, pruned")
       for resource in ("validatingadmissionpolicies", "validatingadmissionpolicybindings",
                        "mutatingadmissionpolicies", "mutatingadmissionpolicybindings")},
    ("controller", "cluster", "rbac.authorization.k8s.io", "clusterroles", f"{RELEASE}-controller-native-policies"):
        ("get", "its uid for the generated objects' ownerReferences (uninstall deletes them)"),
    ("controller", NAMESPACE, "", "configmaps", "*"): ("create", "the dry-run probes (nothing stored)"),
    **{("webhook", "cluster", "admissionregistration.k8s.io", resource, "*"):
       ("get list watch", "which generated policies are marked enforced, and their bindings")
       for resource in ("validatingadmissionpolicies", "validatingadmissionpolicybindings",
                        "mutatingadmissionpolicies", "mutatingadmissionpolicybindings")},
    # `helm test`: a pod sends dry-run creates through the webhook (hook objects, deleted after)
    ("helm test", "default", "kubeai.org", "models", "*"): ("create", "dry-run creates in tests.namespace"),
}
GRANTS = {key: (frozenset(verbs.split()), why) for key, (verbs, why) in GRANTS.items()}

# what audit.nativePolicies adds (docs/native-policies.md, "Auditing the cluster's own VAPs"):
# reads of the cluster's VAPs and bindings, and of the params' kinds
# (audit.nativePolicyParamResources, by default every ConfigMap)
NATIVE_AUDIT_GRANTS = {key: (frozenset(verbs.split()), why) for key, (verbs, why) in {
    ("controller", "cluster", "admissionregistration.k8s.io", "validatingadmissionpolicies", "*"):
        ("get list watch", "the cluster's own policies the audit judges by (read, never written)"),
    ("controller", "cluster", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "*"):
        ("get list watch", "their bindings: which objects, which actions, which params"),
    ("controller", "cluster", "", "configmaps", "*"):
        ("get list watch", "params (audit.nativePolicyParamResources' default): a paramRef may name any "
                           "ConfigMap in any namespace, or select them by labels"),
}.items()}


def allowed(key: tuple[str, str, str, str, str]) -> frozenset[str]:
    """The verbs a key may have, whichever values are on (a key both tables name: either's)."""
    return frozenset().union(*(table[key][0] for table in (GRANTS, NATIVE_AUDIT_GRANTS) if key in table))


def granted(values: dict) -> dict[tuple[str, str, str, str, str], frozenset[str]]:
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    grants: dict = {}
    for path, text in rendered.items():
        if path.endswith("NOTES.txt"):
            continue
        for obj in yaml.safe_load_all(text):
            if not obj or obj.get("kind") not in ("ClusterRole", "Role"):
                continue
            hooked = "helm.sh/hook" in (obj["metadata"].get("annotations") or {})
            role = "helm test" if hooked else "controller" if "controller" in obj["metadata"]["name"] else "webhook"
            scope = "cluster" if obj["kind"] == "ClusterRole" else obj["metadata"]["namespace"]
            for rule in obj.get("rules", []):
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for name in rule.get("resourceNames") or ["*"]:
                            key = (role, scope, group, resource, name)
                            grants[key] = grants.get(key, frozenset()) | frozenset(rule["verbs"])
    return grants


MODEL_STATUS_ON = {"controller": {"statusWrites": {"models.kubeai.org": True}}}
NATIVE_POLICIES_ON = {"policies": {"native": {"enabled": True}}}
NATIVE_AUDIT_ON = {"audit": {"nativePolicies": True}}


@pytest.mark.parametrize("values", [{}, {"certificates": {"mode": "cert-manager"}}, {"controller": {"enabled": False}},
                                    MODEL_STATUS_ON, NATIVE_POLICIES_ON, NATIVE_AUDIT_ON,
                                    NATIVE_AUDIT_ON | NATIVE_POLICIES_ON],
                         ids=["self-managed", "cert-manager", "no-controller", "model-status-writes", "native-policies",
                              "native-audit", "native-audit-and-policies"])
def test_every_grant_is_listed_with_its_reason(values):
    actual = granted(values)
    unexplained = {k: sorted(v) for k, v in actual.items() if not v <= allowed(k)}
    assert not unexplained, f"grants without a reason in GRANTS or NATIVE_AUDIT_GRANTS: {unexplained}"
    assert all("*" not in verbs for verbs in actual.values())
    if values.get("certificates", {}).get("mode") == "cert-manager":  # no certificate Secret to manage
        assert not [k for k in actual if k[0] == "webhook" and k[3] == "secrets" and k[1] != "cluster"]


def test_the_table_has_no_stale_rows():
    actual = granted({}) | granted(MODEL_STATUS_ON) | granted(NATIVE_POLICIES_ON)
    stale = [k for k in GRANTS if k not in actual]
    assert not stale, stale


def added(values: dict) -> dict[tuple[str, str, str, str, str], frozenset[str]]:
    """The grants ``values`` add to the defaults' (new keys, and new verbs of a key)."""
    defaults = granted({})
    out = {k: v - defaults.get(k, frozenset()) for k, v in granted(values).items()}
    return {k: v for k, v in out.items() if v}


def test_the_audit_of_native_policies_adds_exactly_its_reads_and_they_cover_its_watches():
    """audit.nativePolicies adds reads of the cluster's VAPs, bindings and every ConfigMap, and
    nothing else; what the controller then watches (``native_policy_watches``, a ConfigMap
    param) is granted; nothing it adds is writable."""
    from webhook.apiversion import group_of
    from webhook.inputs.watches import native_policy_watches

    assert added(NATIVE_AUDIT_ON) == {k: verbs for k, (verbs, _) in NATIVE_AUDIT_GRANTS.items()}
    actual = granted(NATIVE_AUDIT_ON)
    for watch in native_policy_watches({("v1", "ConfigMap")}):
        key = ("controller", "cluster", group_of(watch.api_version), watch.plural, "*")
        assert {"get", "list", "watch"} <= actual.get(key, frozenset()), watch
    # off by default: no VAP read, no ConfigMap but KubeAI's by name
    assert not [k for k in granted({}) if k in NATIVE_AUDIT_GRANTS]


def test_the_param_resources_value_replaces_the_configmap_read():
    """audit.nativePolicyParamResources: the params' kinds read (get, list, watch), in place of
    every ConfigMap: an operator whose VAPs use no ConfigMap param drops that read."""
    values = {"audit": {"nativePolicies": True, "nativePolicyParamResources": [
        {"apiGroups": ["n6.example.com"], "resources": ["widgets", "gadgets"]}]}}
    assert added(values) == {
        **{k: verbs for k, (verbs, _) in NATIVE_AUDIT_GRANTS.items() if k[3] != "configmaps"},
        ("controller", "cluster", "n6.example.com", "widgets", "*"): frozenset({"get", "list", "watch"}),
        ("controller", "cluster", "n6.example.com", "gadgets", "*"): frozenset({"get", "list", "watch"})}
    values["audit"]["nativePolicyParamResources"] = []
    assert not [k for k in added(values) if k[3] == "configmaps"]


def test_what_the_webhook_watches_is_granted_and_nothing_writable_beyond_its_own_objects():
    from webhook import shipped_data
    from webhook.policy import PolicySet
    from tests.support.cel import EVALUATOR

    actual = granted({})
    for kind in webhook_watches(PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR)):
        group = kind.api_version.rpartition("/")[0]
        name = (kind.field_selector or "").removeprefix("metadata.name=") or "*"
        assert {"list", "watch"} <= actual.get(("webhook", "cluster", group, kind.plural, name), frozenset()), kind
    for (role, scope, group, resource, name), verbs in actual.items():
        if role == "webhook" and verbs - {"get", "list", "watch"}:
            assert name != "*" or verbs == {"create"}, (resource, verbs)  # writes only to named objects


def rows(values: dict | None = None, table: dict = GRANTS) -> str:
    """The table docs/rbac.md shows: each grant of the chart as rendered with its defaults (with
    ``values``: each grant those values add), its verbs as granted, its reason from ``table``."""
    actual = granted(values or {})
    if values:
        defaults = granted({})
        actual = {k: v for k, v in actual.items() if k not in defaults}
    lines = ["| component | scope | API group | resource | name | verbs | why |", "|---|---|---|---|---|---|---|"]
    for key, (_, why) in table.items():
        if key in actual:
            role, scope, group, resource, name = key
            lines.append(f"| {role} | {scope} | {group or 'core'} | {resource} | {name} | {', '.join(sorted(actual[key]))} | {why} |")
    return "\n".join(lines)


def test_the_rbac_page_shows_the_rendered_grants():
    shown = (REPO / "docs" / "rbac.md").read_text()
    assert rows() in shown, "docs/rbac.md's table differs from the chart: paste rows() there"
    assert rows(NATIVE_POLICIES_ON) in shown, \
        "docs/rbac.md's policies.native.enabled table differs from the chart: paste rows(NATIVE_POLICIES_ON) there"
    assert rows(NATIVE_AUDIT_ON, NATIVE_AUDIT_GRANTS) in shown, \
        "docs/rbac.md's audit.nativePolicies table differs from the chart: paste rows(NATIVE_AUDIT_ON, " \
        "NATIVE_AUDIT_GRANTS) there"
