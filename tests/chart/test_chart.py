"""The Helm chart, linted and rendered by Helm's own engine (the Helm v4 Go SDK through
helm-python-sdk), for the default and for non-default values; every rendered object checked
against the Kubernetes JSON schemas and for the safety properties the chart promises."""

from __future__ import annotations

from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from tests.support.paths import CHART, POLICIES
from tests.support.cel import EVALUATOR

KUBERNETES_VERSION = "1.36.0"
NAMESPACE = "infergate-system"
RELEASE = "infergate"

NON_DEFAULT = {
    "fullnameOverride": "gate",
    "commonLabels": {"team": "platform"},
    "image": {"repository": "registry.example.com/infergate", "digest": "sha256:" + "ab" * 32},
    "imagePullSecrets": [{"name": "registry"}],
    "webhook": {"replicas": 3, "port": 10250, "failurePolicy": "Ignore", "timeoutSeconds": 3,
                "antiAffinity": "required", "extraArgs": ["--max-body-bytes=1048576"],
                "clientCAConfigMap": "apiserver-client-ca",
                "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}]},
    "controller": {"replicas": 2, "replanTimeoutSeconds": 120, "replanLimit": 5},
    "certificates": {"mode": "cert-manager", "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}},
    "policies": {"user": {"team-labels.yaml": "apiVersion: v1\nkind: Example\n# a user policy\n"},
                 "existingConfigMap": "gitops-policies",
                 "actions": {"kubeai-model-engine": ["Warn"],
                             "inferencepool-endpoint-picker": [
                                 {"namespaceSelector": {"matchLabels": {"team": "research"}},
                                  "actions": ["Warn", "Audit"]},
                                 {"namespaceSelector": "tier in (prod, staging)", "actions": ["Deny", "Audit"]},
                                 {"actions": ["Audit"]}]}},
    "kubeai": {"systemConfig": {"resourceProfiles": {"cpu": {"imageName": "cpu", "requests": {"cpu": "1"}}},
                                "cacheProfiles": {"efs": {"sharedFilesystem": {"storageClassName": "efs"}}}}},
    "priorityClassName": "system-cluster-critical",
    "networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"]},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "tests": {"namespace": "ml-team"},
}
CERT_MANAGER_SELF_SIGNED = {"certificates": {"mode": "cert-manager"}}
THIRD_PARTY_CRDS = {"crds": {"kubeai": True, "inferenceExtension": True, "llmd": True, "openReports": True}}
AUTOSCALING = {"autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 8, "targetCPUUtilizationPercentage": 60}}
NATIVE_AUDIT = {"audit": {"nativePolicies": True, "nativePolicyParamResources": [
    {"apiGroups": [""], "resources": ["configmaps"]}, {"apiGroups": ["example.com"], "resources": ["limits"]}]}}
VALUE_SETS = {"default": {}, "non-default": NON_DEFAULT, "cert-manager-self-signed": CERT_MANAGER_SELF_SIGNED,
              "no-controller": {"controller": {"enabled": False}}, "third-party-crds": THIRD_PARTY_CRDS,
              "autoscaling": AUTOSCALING, "no-audit": {"audit": {"enabled": False}}, "native-audit": NATIVE_AUDIT,
              "native-policies": {"policies": {"native": {"enabled": True}}}}
# kinds that are not Kubernetes' own (no JSON schema in kubernetes-validate): checked by hand below
CRD_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}


def render(values: dict) -> dict[str, list[dict]]:
    """template path -> the objects it renders (Helm's engine, `helm template` semantics)."""
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    return {path: [doc for doc in yaml.safe_load_all(text) if doc]
            for path, text in rendered.items() if not path.endswith("NOTES.txt")}


_CACHE: dict[str, dict[str, list[dict]]] = {}


def rendered(name: str) -> dict[str, list[dict]]:
    if name not in _CACHE:
        _CACHE[name] = render(VALUE_SETS[name])
    return _CACHE[name]


def objects(name: str, *, tests: bool = False) -> list[dict]:
    return [obj for path, docs in rendered(name).items() if tests or "/templates/tests/" not in path for obj in docs]


def one(name: str, kind: str, suffix: str = "") -> dict:
    found = [o for o in objects(name) if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"{kind} *{suffix}: {[o['metadata']['name'] for o in found]}"
    return found[0]


def webhook_deployment(name: str) -> dict:
    (deployment,) = [o for o in objects(name) if o["kind"] == "Deployment"
                     and o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"]
    return deployment


# --- Helm itself -----------------------------------------------------------------------


def test_helm_lint_strict_finds_nothing_above_info():
    for values in VALUE_SETS.values():
        result = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
        problems = [m for m in result["messages"] if m["severity"] > 1]  # 1 = INFO
        assert not result["errors"] and not problems, problems


@pytest.mark.parametrize("values", [
    {"webhook": {"replicas": 1}},
    {"webhook": {"timeoutSeconds": 10}},
    {"webhook": {"failurePolicy": "Maybe"}},
    {"webhook": {"port": 80}},
    {"certificates": {"mode": "vault"}},
    {"policies": {"user": {"no-extension": "x"}}},
    {"unknownKey": True},
    {"autoscaling": {"enabled": True, "minReplicas": 1}},
    {"webhook": {"drainSeconds": -1}},
    {"webhook": {"idleTimeoutSeconds": 90}},
    {"webhook": {"processes": 0}},
    {"webhook": {"processes": "all"}},  # the apiserver keeps idle connections 90 s
    {"policies": {"actions": {"kubeai-model-engine": ["Deny", "Warn"]}}},
    {"policies": {"actions": {"kubeai-model-engine": ["Warn", "Warn"]}}},
    {"policies": {"actions": {"kubeai-model-engine": []}}},
    {"policies": {"actions": {"kubeai-model-engine": ["dryrun"]}}},
    {"policies": {"actions": {"Not_A_Name": ["Warn"]}}},
    {"policies": {"actions": {"kubeai-model-engine": [{"namespaceSelector": {"labels": {"a": "b"}},
                                                       "actions": ["Warn"]}]}}},
    {"policies": {"actions": {"kubeai-model-engine": [{"namespaceSelector": "team=a"}]}}},
], ids=lambda v: str(v))
def test_values_schema_rejects_unsafe_or_unknown_values(values):
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError):
        chart.validate_schema(values)


# --- every rendered object -------------------------------------------------------------


def _all_objects():
    for name in VALUE_SETS:
        for obj in objects(name, tests=True):
            yield pytest.param(obj, id=f"{name}:{obj['kind']}/{obj['metadata']['name']}")


@pytest.mark.parametrize("obj", list(_all_objects()))
def test_rendered_object_is_valid_kubernetes(obj):
    if obj["kind"] in CRD_KINDS:
        assert obj["apiVersion"] in ("cert-manager.io/v1", "monitoring.coreos.com/v1") and obj["spec"]
        return
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:  # its str() dumps the whole schema
        pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")


@pytest.mark.parametrize("name", VALUE_SETS)
def test_names_are_unique_and_namespaced_objects_live_in_the_release_namespace(name):
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects(name)]
    assert len(keys) == len(set(keys))
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                      "CustomResourceDefinition"}
    for obj in objects(name):
        assert ("namespace" in obj["metadata"]) == (obj["kind"] not in cluster_scoped)
        if obj["kind"] not in cluster_scoped:
            assert obj["metadata"]["namespace"] == NAMESPACE


# --- the webhook Deployment ------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_webhook_deployment_is_highly_available_and_restricted(name):
    deployment = webhook_deployment(name)
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    autoscaler = [o for o in objects(name) if o["kind"] == "HorizontalPodAutoscaler"]
    if autoscaler:  # the autoscaler sets the replicas: the Deployment must not fight it
        assert "replicas" not in spec and autoscaler[0]["spec"]["minReplicas"] >= 2
    else:
        assert spec["replicas"] >= 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    anti = pod["affinity"]["podAntiAffinity"]
    assert anti.get("requiredDuringSchedulingIgnoredDuringExecution") or anti.get("preferredDuringSchedulingIgnoredDuringExecution")
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    security = container["securityContext"]
    assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_a_terminating_webhook_pod_drains_within_its_grace_period():
    """docs/install.md, "Rollouts without a failed write": after SIGTERM the server answers for
    drainSeconds with /readyz failing, then finishes in-flight reviews for up to 25 s; the
    grace period covers both. A rollout adds a Ready pod before it stops an old one."""
    for values, drain in (({}, 5), ({"webhook": {"drainSeconds": 12}}, 12)):
        deployment = webhook_deployment_of(values)
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert f"--shutdown-delay={drain}" in container["args"] and "--shutdown-timeout=25" in container["args"]
        assert pod["terminationGracePeriodSeconds"] == drain + 30
        assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
        assert container["readinessProbe"]["periodSeconds"] == 2


def webhook_deployment_of(values: dict) -> dict:
    (deployment,) = [o for docs in render(values).values() for o in docs if o["kind"] == "Deployment"
                     and o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"]
    return deployment


def test_the_autoscaler_scales_the_webhook_on_cpu_and_only_when_asked():
    assert not [o for o in objects("default") if o["kind"] == "HorizontalPodAutoscaler"]
    hpa = one("autoscaling", "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": webhook_deployment("autoscaling")["metadata"]["name"]}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 8)
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]
    # utilization is a share of the request: the webhook must ask for CPU
    (container,) = webhook_deployment("autoscaling")["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["cpu"]


def test_replicas_spread_over_zones_and_nodes_by_default():
    selector = {"app.kubernetes.io/name": "infergate", "app.kubernetes.io/instance": RELEASE}
    pod = webhook_deployment("default")["spec"]["template"]["spec"]
    assert [(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in pod["topologySpreadConstraints"]] == [
        ("topology.kubernetes.io/zone", 1, "ScheduleAnyway"), ("kubernetes.io/hostname", 1, "ScheduleAnyway")]
    for constraint in pod["topologySpreadConstraints"]:
        assert constraint["labelSelector"]["matchLabels"] == {**selector, "app.kubernetes.io/component": "webhook"}
    own = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]
    assert webhook_deployment_of({"webhook": {"topologySpreadConstraints": own}})["spec"]["template"]["spec"][
        "topologySpreadConstraints"] == own
    # the controller's standby prefers another node than the leader's, unless told otherwise
    controller = one("default", "Deployment", "-controller")["spec"]["template"]["spec"]
    (term,) = controller["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {**selector, "app.kubernetes.io/component": "controller"}
    mine = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["infra"]}]}]}}}
    (deployment,) = [o for docs in render({"controller": {"affinity": mine}}).values() for o in docs
                     if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-controller")]
    assert deployment["spec"]["template"]["spec"]["affinity"] == mine


def test_priority_class_is_settable_for_both_deployments():
    for deployment in (o for o in objects("non-default") if o["kind"] == "Deployment"):
        assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"
    for deployment in (o for o in objects("default") if o["kind"] == "Deployment"):
        assert "priorityClassName" not in deployment["spec"]["template"]["spec"]


def test_mtls_client_ca_comes_from_a_configmap_and_leaves_the_probes_alone():
    (default,) = webhook_deployment("default")["spec"]["template"]["spec"]["containers"]
    assert not any(a.startswith("--client-ca-file") for a in default["args"])
    pod = webhook_deployment("non-default")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--client-ca-file=/etc/infergate/client-ca/ca.crt" in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "client-ca")
    assert mount == {"name": "client-ca", "mountPath": "/etc/infergate/client-ca", "readOnly": True}
    volume = next(v for v in pod["volumes"] if v["name"] == "client-ca")
    assert volume["configMap"] == {"name": "apiserver-client-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    # the probes present no client certificate: the server answers them without one
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_webhook_pdb_selects_the_webhook_pods():
    pdb = one("default", "PodDisruptionBudget")
    pod_labels = webhook_deployment("default")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["minAvailable"] >= 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_port_is_configurable_and_the_service_keeps_443():
    (container,) = webhook_deployment("non-default")["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "https", "containerPort": 10250, "protocol": "TCP"}]
    assert "--port=10250" in container["args"]
    service = one("non-default", "Service")
    assert service["spec"]["ports"][0]["port"] == 443 and service["spec"]["ports"][0]["targetPort"] == "https"


def test_server_flags_per_certificate_mode():
    (default,) = webhook_deployment("default")["spec"]["template"]["spec"]["containers"]
    assert default["args"][:4] == ["serve", "--port=8443", "--cert-mode=secret", f"--cert-secret={NAMESPACE}/infergate-tls"]
    assert f"--service={NAMESPACE}/infergate" in default["args"] and "--kube-state" in default["args"]
    (managed,) = webhook_deployment("non-default")["spec"]["template"]["spec"]["containers"]
    assert "--cert-mode=files" in managed["args"] and "--cert-dir=/etc/infergate/certs" in managed["args"]
    assert {"name": "certs", "mountPath": "/etc/infergate/certs", "readOnly": True} in managed["volumeMounts"]


# --- certificates ----------------------------------------------------------------------


def test_cert_manager_mode_wires_certificate_secret_and_cainjector():
    certificate = one("non-default", "Certificate")
    assert certificate["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert certificate["spec"]["dnsNames"][0] == f"gate.{NAMESPACE}.svc"
    volumes = {v["name"]: v for v in webhook_deployment("non-default")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["certs"]["secret"]["secretName"] == certificate["spec"]["secretName"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one("non-default", kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{certificate['metadata']['name']}"
    assert not [o for o in objects("non-default") if o["kind"] == "Issuer"]  # the given issuer is used
    issuer = one("cert-manager-self-signed", "Issuer")
    assert one("cert-manager-self-signed", "Certificate")["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]


def test_self_managed_mode_has_no_cert_manager_objects_and_no_rendered_ca_bundle():
    assert not [o for o in objects("default") if o["kind"] in ("Certificate", "Issuer")]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in one("default", kind)["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]  # injected at runtime, kept by Helm's 3-way merge


# --- webhook configurations --------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_webhook_configurations_have_safe_defaults(name):
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        (hook,) = one(name, kind)["webhooks"]
        assert hook["sideEffects"] == "None"
        assert 1 <= hook["timeoutSeconds"] <= 5
        assert hook["failurePolicy"] in ("Fail", "Ignore")
        excluded = hook["namespaceSelector"]["matchExpressions"][0]
        assert excluded["key"] == "kubernetes.io/metadata.name" and excluded["operator"] == "NotIn"
        assert {"kube-system", NAMESPACE} <= set(excluded["values"])
        assert hook["matchConditions"]
        assert hook["clientConfig"]["service"]["path"] == path
        assert all("/" not in r for rule in hook["rules"] for r in rule["resources"])  # never /status


def test_webhook_rules_cover_every_served_crd():
    """infergate's own kinds and every bundled third-party kind, installed by this chart or not
    (a rule for a kind the cluster does not serve matches nothing)."""
    served = set()
    # the bundled sets only (webhook.schema.bundled): files/crds/reports holds CRDs of reports
    # infergate may write, not kinds it judges
    bundled_sets = [CHART / "files" / "crds" / name for name in ("upstream", "legacy")]
    for path in [*(CHART / "crds").glob("*.yaml"), *(p for d in bundled_sets for p in d.glob("*.yaml"))]:
        crd = yaml.safe_load(path.read_text())
        served |= {(crd["spec"]["group"], v["name"], crd["spec"]["names"]["plural"]) for v in crd["spec"]["versions"] if v["served"]}
    (hook,) = one("default", "ValidatingWebhookConfiguration")["webhooks"]
    covered = {(g, v, r) for rule in hook["rules"] for g in rule["apiGroups"] for v in rule["apiVersions"] for r in rule["resources"]}
    assert covered == served
    assert {("inference.networking.k8s.io", "v1", "inferencepools"), ("llm-d.ai", "v1alpha2", "inferenceobjectives"),
            ("kubeai.org", "v1", "models"), ("gateway.networking.k8s.io", "v1", "httproutes")} <= covered
    assert one("third-party-crds", "ValidatingWebhookConfiguration")["webhooks"] == \
        one("default", "ValidatingWebhookConfiguration")["webhooks"]


# the webhook's rules, pinned: a kind joins them only with a policy that applies to it
WEBHOOK_RULES = [
    ("ai.deckhouse.io", "v1alpha1", ["inferenceserviceclasses", "inferenceservices"]),
    ("gateway.networking.k8s.io", "v1", ["httproutes"]),
    ("gateway.networking.k8s.io", "v1beta1", ["httproutes"]),
    ("inference.networking.k8s.io", "v1", ["inferencepools"]),
    ("inference.networking.x-k8s.io", "v1alpha1", ["inferencemodels", "inferencepoolimports", "inferencepools"]),
    # GIE's v1alpha2 InferenceModel and InferencePool: policy removed-api-versions (migration.yaml)
    ("inference.networking.x-k8s.io", "v1alpha2",
     ["inferencemodelrewrites", "inferencemodels", "inferenceobjectives", "inferencepools"]),
    ("kubeai.org", "v1", ["models"]),
    ("llm-d.ai", "v1alpha2", ["inferencemodelrewrites", "inferenceobjectives"]),
]


@pytest.mark.parametrize("kind", ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"])
def test_webhook_rules_are_the_policy_targeted_kinds_not_the_schema_only_ones(kind):
    """Gateway, GatewayClass, GRPCRoute and ReferenceGrant have schemas for `validate` but no
    policy: the webhook is not on their write path."""
    (hook,) = one("default", kind)["webhooks"]
    rules = [(r["apiGroups"][0], r["apiVersions"][0], r["resources"]) for r in hook["rules"]]
    assert rules == WEBHOOK_RULES
    assert all(len(r["apiGroups"]) == len(r["apiVersions"]) == 1 for r in hook["rules"])


def crds(name: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects(name) if o["kind"] == "CustomResourceDefinition"}


def test_by_default_no_third_party_crd_is_templated():
    """Helm installs crds/ (infergate's own two) before the templates; the third-party CRDs only
    when asked for: their own charts install them (docs/helm.md)."""
    for name in ("default", "non-default", "cert-manager-self-signed", "no-controller"):
        assert crds(name) == {}, name
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml")) == [
        "ai.deckhouse.io_inferenceserviceclasses.yaml", "ai.deckhouse.io_inferenceservices.yaml"]


@pytest.mark.parametrize(("value", "names"), [
    ("kubeai", {"models.kubeai.org"}),
    ("inferenceExtension", {"inferencepools.inference.networking.k8s.io", "inferencepoolimports.inference.networking.x-k8s.io",
                            "inferenceobjectives.inference.networking.x-k8s.io",
                            "inferencemodelrewrites.inference.networking.x-k8s.io"}),
    ("llmd", {"inferenceobjectives.llm-d.ai", "inferencemodelrewrites.llm-d.ai"}),
])
def test_third_party_crds_are_opt_in_at_the_current_upstream_versions_and_kept(value, names):
    templated = {o["metadata"]["name"]: o for path, docs in render({"crds": {value: True}}).items() for o in docs
                 if o["kind"] == "CustomResourceDefinition"}
    assert set(templated) == names
    upstream = {}
    for path in (CHART / "files" / "crds" / "upstream").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        upstream[crd["metadata"]["name"]] = crd
    for name, crd in templated.items():
        assert crd["spec"] == upstream[name]["spec"], name  # the upstream text, parsed: nothing lost
        annotations = crd["metadata"]["annotations"]
        assert annotations.pop("helm.sh/resource-policy") == "keep"  # helm uninstall leaves it (and its objects)
        assert annotations == upstream[name]["metadata"]["annotations"]
        assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert set(crds("third-party-crds")) >= names


def test_default_failure_policy_is_fail_and_configurable():
    assert one("default", "ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"] == "Fail"
    assert one("non-default", "ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"] == "Ignore"
    assert one("non-default", "MutatingWebhookConfiguration")["webhooks"][0]["timeoutSeconds"] == 3


# --- RBAC --------------------------------------------------------------------------------


def rbac_rules(name: str) -> list[tuple[str, dict]]:
    return [(o["metadata"]["name"], rule) for o in objects(name) if o["kind"] in ("ClusterRole", "Role") for rule in o["rules"]]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_rbac_is_least_privilege(name):
    for role, rule in rbac_rules(name):
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"], role
        writes = set(rule["verbs"]) - {"get", "list", "watch"}
        if not writes:
            continue
        resources = set(rule["resources"])
        if resources == {"secrets"} or resources & {"mutatingwebhookconfigurations", "validatingwebhookconfigurations", "leases"}:
            # only named objects, except create (not limitable by name; namespaced Roles only)
            assert rule.get("resourceNames") or writes == {"create"}, (role, rule)
            assert "delete" not in writes and "deletecollection" not in writes
        elif resources == {"events"}:
            assert writes <= {"create", "patch"}
        elif resources <= REPORTS:  # the audit's reports: created and replaced, never deleted
            assert writes <= {"create", "update"}, (role, rule)
        elif resources <= NATIVE_POLICIES:  # policies.native: the controller's generated objects
            assert name == "native-policies" and role.endswith("-controller-native-policies"), (role, rule)
            assert writes == {"create", "patch", "delete"}, (role, rule)
        elif resources == {"configmaps"}:  # policies.native: the dry-run probe, in the release namespace
            assert name == "native-policies" and writes == {"create"} and role.endswith("-native-policies-probe")
            (owner,) = [o for o in objects(name) if o["metadata"]["name"] == role and o["kind"] == "Role"]
            assert owner["metadata"]["namespace"] == NAMESPACE
        else:
            assert all(r.endswith("/status") for r in resources), (role, rule)  # status of owned kinds only


REPORTS = {"reports", "clusterreports", "policyreports", "clusterpolicyreports"}
NATIVE_POLICIES = {"validatingadmissionpolicies", "validatingadmissionpolicybindings",
                   "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"}


def test_cluster_wide_secret_and_configmap_access_is_read_only_or_named():
    for role, rule in rbac_rules("default"):
        if "configmaps" in rule["resources"]:
            assert rule["resourceNames"] == ["kubeai-config"]
        if "secrets" in rule["resources"] and set(rule["verbs"]) - {"get", "list", "watch"}:
            (owner,) = [o for o in objects("default") if o["metadata"]["name"] == role and o["kind"] == "Role"]
            assert owner["metadata"]["namespace"] == NAMESPACE


def test_rbac_rules_carry_a_reason_per_verb():
    """Each rule in the RBAC templates is justified by a comment (reviewers read the template)."""
    for template in ("rbac-webhook.yaml", "rbac-controller.yaml", "rbac-native-policies.yaml"):
        lines = (CHART / "templates" / template).read_text().splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("- apiGroups:"):
                window = lines[max(0, i - 3): i + 5]
                assert any("#" in w for w in window), f"{template}:{i + 1}: rule without a reason"


def test_controller_flags_are_the_controllers_own():
    """The rendered args parse with `infergate controller`'s own parser, leader election on."""
    import argparse

    from webhook.controller.runner import ControllerConfig, add_arguments

    for name in ("default", "non-default"):
        (container,) = [o for o in objects(name) if o["kind"] == "Deployment"
                        and o["metadata"]["name"].endswith("-controller")][0]["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["infergate"] and container["args"][0] == "controller"
        parser = argparse.ArgumentParser(exit_on_error=False)
        add_arguments(parser)
        config = ControllerConfig.from_flags(parser.parse_args(container["args"][1:]), EVALUATOR)
        assert config.lease is not None and config.lease.namespace == NAMESPACE
        assert config.identity == "$(POD_NAME)" and {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
        lease_names = {n for _, r in rbac_rules(name) if r["resources"] == ["leases"] for n in r.get("resourceNames", [])}
        assert lease_names == {config.lease.name}
    assert config.reconcile.replan_timeout.total_seconds() == 120 and config.reconcile.replan_limit == 5


@pytest.mark.parametrize("name", ["default", "non-default", "no-audit"])
def test_the_controller_audits_with_the_webhooks_policies_and_exemptions(name):
    """audit.*: the controller audits (or not) with the policies the webhook enforces (the same
    projected volume of the same ConfigMaps), and the namespaces the webhook's namespaceSelector
    leaves out are the ones its reports mark exempt."""
    import argparse

    from webhook.controller.runner import ControllerConfig, add_arguments

    controller, webhook = one(name, "Deployment", "-controller"), one(name, "Deployment", f"{'gate' if name == 'non-default' else RELEASE}")
    (container,) = controller["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    config = ControllerConfig.from_flags(parser.parse_args(container["args"][1:]), EVALUATOR)
    settings = config.audit
    assert (settings is not None) == (name != "no-audit")
    volumes = {v["name"]: v for v in controller["spec"]["template"]["spec"]["volumes"]}
    if settings is None:
        assert "policies" not in volumes
        return
    assert settings.interval == 3600 and settings.max_results == 100
    (webhook_container,) = webhook["spec"]["template"]["spec"]["containers"]
    webhook_policies = next(a for a in webhook_container["args"] if a.startswith("--policies-dir=")).partition("=")[2]
    assert config.policies.directory == Path(webhook_policies)
    webhook_actions = [a.partition("=")[2] for a in webhook_container["args"] if a.startswith("--policy-actions=")]
    assert list(config.policies.actions) == webhook_actions and (name != "non-default" or webhook_actions)
    assert volumes["policies"] == next(v for v in webhook["spec"]["template"]["spec"]["volumes"] if v["name"] == "policies")
    mount = next(m for m in container["volumeMounts"] if m["name"] == "policies")
    assert mount["mountPath"] == webhook_policies and mount["readOnly"]
    for configuration in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in one(name, configuration)["webhooks"]:
            (expression,) = hook["namespaceSelector"]["matchExpressions"]
            assert expression["operator"] == "NotIn"
            assert set(expression["values"]) == settings.exempt_namespaces == {"kube-system", NAMESPACE}


def test_audit_interval_values_are_the_controllers_durations():
    """audit.interval: what values.schema.json lets through, the controller parses."""
    import json

    from webhook.controller.runner import audit_interval

    pattern = json.loads((CHART / "values.schema.json").read_text())["properties"]["audit"]["properties"]["interval"]["pattern"]
    import re
    for value, seconds in (("1h", 3600), ("30m", 1800), ("0", 0), ("90", 90), ("1h30m", 5400), ("2.5s", 2.5)):
        assert re.match(pattern, value) and audit_interval(value) == seconds
    for value in ("-1h", "soon", "1d", ""):
        assert not re.match(pattern, value)
        with pytest.raises(ValueError):
            audit_interval(value)


def test_controller_has_leader_election_and_its_own_lease():
    lease_rules = [r for _, r in rbac_rules("default") if r["resources"] == ["leases"]]
    assert {"get", "update"} <= {v for r in lease_rules for v in r["verbs"]}
    assert not [o for o in objects("no-controller") if o["metadata"]["name"].endswith("-controller")]


# --- policies and KubeAI config ----------------------------------------------------------


def shipped_policy_files() -> dict[str, bytes]:
    """The files under policies/ that hold policies (as the server's loader reads them): the
    policy test suites in policies/tests/ stay out of the cluster."""
    from webhook.policy.loader import load_file, policy_files

    return {str(p.relative_to(POLICIES)): p.read_bytes() for p in policy_files(POLICIES) if load_file(p, EVALUATOR)}


def test_shipped_policies_configmap_holds_policies_byte_for_byte():
    data = one("default", "ConfigMap", "-policies").get("data") or {}
    assert {k.replace("__", "/"): v.encode() for k, v in data.items()} == shipped_policy_files()


def test_policies_volume_projects_shipped_user_and_existing_policies():
    volumes = {v["name"]: v for v in webhook_deployment("non-default")["spec"]["template"]["spec"]["volumes"]}
    sources = volumes["policies"]["projected"]["sources"]
    shipped, user, existing = (s["configMap"] for s in sources)
    assert sorted(i["path"] for i in shipped.get("items") or []) == sorted(f"shipped/{p}" for p in shipped_policy_files())
    assert user["items"] == [{"key": "team-labels.yaml", "path": "user/team-labels.yaml"}]
    assert existing == {"name": "gitops-policies"}
    user_map = one("non-default", "ConfigMap", "-user-policies")
    assert user_map["data"]["team-labels.yaml"] == NON_DEFAULT["policies"]["user"]["team-labels.yaml"]
    (container,) = webhook_deployment("non-default")["spec"]["template"]["spec"]["containers"]
    assert "--policies-dir=/etc/infergate/policies" in container["args"]


def test_kubeai_system_config_from_values_is_kubeais_configmap():
    config_map = one("non-default", "ConfigMap", "kubeai-config")
    assert yaml.safe_load(config_map["data"]["system.yaml"]) == NON_DEFAULT["kubeai"]["systemConfig"]
    assert not [o for o in objects("default") if o["metadata"]["name"] == "kubeai-config"]


# --- optional objects, helm test, NOTES --------------------------------------------------


def test_optional_network_policy_and_service_monitor():
    assert not [o for o in objects("default") if o["kind"] in ("NetworkPolicy", "ServiceMonitor")]
    policy = one("non-default", "NetworkPolicy")
    assert policy["spec"]["ingress"][0]["ports"] == [{"port": 10250, "protocol": "TCP"}]
    monitor = one("non-default", "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics" and monitor["metadata"]["labels"]["release"] == "prometheus"


def test_helm_test_sends_dry_run_objects_through_the_webhook():
    docs = rendered("non-default")[f"{'infergate'}/templates/tests/dry-run.yaml"]
    pod = [d for d in docs if d["kind"] == "Pod"][0]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = pod["spec"]["containers"][0]["args"][0]
    compile(script, "dry-run", "exec")  # the test's own code is valid Python
    assert 'dry_run="All"' in script and '"ml-team"' in script
    role = [d for d in docs if d["kind"] == "Role"][0]
    assert role["metadata"]["namespace"] == "ml-team" and role["rules"][0]["verbs"] == ["create"]


def test_notes_say_how_to_verify():
    with helm.Chart.load(CHART) as chart:
        notes = chart.render({}, name=RELEASE, namespace=NAMESPACE)["infergate/templates/NOTES.txt"]
    assert "helm test infergate" in notes and "rollout status deployment/infergate" in notes


# --- agreement with the server: flags and webhook configurations ------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_webhook_flags_are_the_servers_own(name):
    """The rendered args parse with `infergate serve`'s parser and make valid Settings."""
    import argparse

    from webhook.server import add_arguments
    from webhook.server.settings import Settings

    (container,) = webhook_deployment(name)["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["infergate"] and container["args"][0] == "serve"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    given = {k: v for k, v in vars(parser.parse_args(container["args"][1:])).items() if v is not None}
    settings = Settings(**given)
    fullname = one(name, "Service")["metadata"]["name"]
    assert settings.port == container["ports"][0]["containerPort"]
    assert settings.service == f"{NAMESPACE}/{fullname}" and settings.kube_state
    if settings.cert_mode == "secret":
        assert settings.webhook_name == one(name, "ValidatingWebhookConfiguration")["metadata"]["name"]
        assert settings.cert_secret == f"{NAMESPACE}/{fullname}-tls"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(settings.policies_dir) in mounts


def test_policy_actions_values_become_the_servers_overrides_of_shipped_policies():
    """``policies.actions`` reaches ``serve --policy-actions`` as one JSON argument that parses
    back into the same overrides, naming shipped policies (what the server checks at start)."""
    from webhook import shipped_data
    from webhook.policy.actions import parse_overrides
    from webhook.policy.builtin import BUILTIN_POLICIES
    from webhook.policy.loader import policy_names

    (container,) = webhook_deployment("non-default")["spec"]["template"]["spec"]["containers"]
    (arg,) = [a for a in container["args"] if a.startswith("--policy-actions")]
    overrides = parse_overrides([arg.removeprefix("--policy-actions=")])
    assert overrides.describe() == NON_DEFAULT["policies"]["actions"] | {
        "kubeai-model-engine": [{"actions": ["Warn"]}]}
    overrides.check(policy_names(shipped_data.policies_dir()) + [p.name for p in BUILTIN_POLICIES])
    (default,) = webhook_deployment("default")["spec"]["template"]["spec"]["containers"]
    assert not any(a.startswith("--policy-actions") for a in default["args"])  # the policies' own actions


@pytest.mark.parametrize("name", VALUE_SETS)
def test_webhook_configurations_equal_infergate_webhook_config(name, capsys):
    """`infergate webhook-config --service NS/NAME` prints exactly what the chart installs."""
    from webhook.cli import main

    validating = one(name, "ValidatingWebhookConfiguration")
    (hook,) = validating["webhooks"]
    fullname = validating["metadata"]["name"]
    argv = ["webhook-config", "--service", f"{NAMESPACE}/{fullname}", "--port", str(hook["clientConfig"]["service"]["port"]),
            "--ca-file", "", "--name", fullname, "--failure-policy", hook["failurePolicy"],
            "--timeout-seconds", str(hook["timeoutSeconds"])]
    assert main(argv) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    for expected in printed:
        chart_object = one(name, expected["kind"])
        assert chart_object["apiVersion"] == expected["apiVersion"]
        assert chart_object["metadata"]["name"] == expected["metadata"]["name"]
        assert expected["metadata"]["labels"].items() <= chart_object["metadata"]["labels"].items()
        assert chart_object["webhooks"] == expected["webhooks"]
    assert sorted(o["kind"] for o in printed) == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


def test_packaged_chart_carries_crds_and_policies_and_renders_the_same(tmp_path):
    """`helm package` resolves the files/policies link: the .tgz users install is self-contained."""
    import tarfile

    archive = helm.package(CHART, destination=tmp_path)
    names = set(tarfile.open(archive).getnames())
    assert {f"infergate/crds/{p.name}" for p in (CHART / "crds").glob("*.yaml")} <= names
    assert {f"infergate/files/crds/{p.relative_to(CHART / 'files' / 'crds')}"
            for p in (CHART / "files" / "crds").rglob("*.yaml")} <= names
    assert {f"infergate/files/policies/{p}" for p in shipped_policy_files()} <= names
    with helm.Chart.load(archive) as packaged, helm.Chart.load(CHART) as source:
        assert packaged.render(NON_DEFAULT, name=RELEASE, namespace=NAMESPACE) == \
            source.render(NON_DEFAULT, name=RELEASE, namespace=NAMESPACE)


def grants(name: str, role_suffix: str) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) granted by the ClusterRole named *role_suffix."""
    (role,) = [o for o in objects(name) if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith(role_suffix)]
    return {(g, r, v) for rule in role["rules"] if not rule.get("resourceNames")
            for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


@pytest.mark.parametrize("audit", [True, False], ids=["audit", "no-audit"])
def test_controller_rbac_covers_exactly_what_the_controller_watches_and_writes(audit):
    from webhook import kinds
    from webhook.controller.report_writes import REPORT_APIS
    from webhook.controller.ownership import status_writes
    from webhook.controller.runner import controller_watches
    from webhook.apiversion import group_of

    name = "default" if audit else "no-audit"
    granted = grants(name, "-controller")
    # an owned kind whose status it does not write it does not watch either: by default
    # KubeAI's Model (KubeAI's controller owns it), so it reads no Model but to audit it
    watched = [k for k in kinds.WATCHED if k not in kinds.OWNED or k in status_writes()]
    assert kinds.KUBEAI_MODEL not in watched
    watches = controller_watches(tuple(watched), audit)
    assert any(w.kind == "Model" and w.api_version == "kubeai.org/v1" for w in watches) == audit
    by_name = {(group_of(w.api_version), w.plural) for w in watches if w.names}
    for watch in watches:
        if (group_of(watch.api_version), watch.plural) in by_name:
            continue  # granted by name (below)
        for verb in ("get", "list", "watch"):
            assert (group_of(watch.api_version), watch.plural, verb) in granted, (watch, verb)
    # status by server-side apply (a PATCH of /status), of exactly the kinds it writes; its reports
    writes = {(g, r, v) for g, r, v in granted if v not in ("get", "list", "watch")}
    report_writes = {(k.group, k.plural, v) for api in REPORT_APIS for k in api.kinds
                     for v in ("create", "update")} if audit else set()
    assert writes == {(k.group, f"{k.plural}/status", "patch") for k in status_writes()} | \
        {("", "events", "create")} | report_writes
    reads = {(g, r) for g, r, v in granted if v == "watch"}
    # nothing more than it watches
    assert reads == {(group_of(w.api_version), w.plural) for w in watches} - by_name
    (role,) = [o for o in objects(name) if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-controller")]
    named = {(g, r): rule["resourceNames"] for rule in role["rules"] if rule.get("resourceNames")
             for g in rule["apiGroups"] for r in rule["resources"]}
    assert named == {(group_of(w.api_version), w.plural): sorted(w.names) for w in watches if w.names}


@pytest.mark.parametrize("name", ["default", "native-audit"])
def test_the_audit_of_native_policies_is_a_flag_and_reads_what_it_watches(name):
    """audit.nativePolicies: the controller's --audit-native-policies, and RBAC reads of the
    cluster's VAPs, bindings and every ConfigMap (the params it watches whole), plus
    audit.nativePolicyParamResources' other kinds; off by default (no VAP, no cluster-wide
    ConfigMap read)."""
    import argparse

    from webhook.apiversion import group_of
    from webhook.controller.runner import add_arguments
    from webhook.inputs.watches import native_policy_watches

    (container,) = one(name, "Deployment", "-controller")["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    args = parser.parse_args(container["args"][1:])
    assert args.audit_native_policies == (name == "native-audit")
    granted = grants(name, "-controller")
    wanted = {(group_of(w.api_version), w.plural, verb) for w in native_policy_watches({("v1", "ConfigMap")})
              for verb in ("get", "list", "watch")}
    (role,) = [o for o in objects(name) if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-controller")]
    unnamed = [r for r in role["rules"] if "configmaps" in r["resources"] and not r.get("resourceNames")]
    if name == "default":
        assert not wanted & granted and not unnamed
        return
    assert wanted <= granted and unnamed == [{"apiGroups": [""], "resources": ["configmaps"],
                                              "verbs": ["get", "list", "watch"]}]
    assert {("example.com", "limits", v) for v in ("get", "list", "watch")} <= granted  # audit.nativePolicyParamResources
    assert not {(g, r, v) for g, r, v in granted if g == "admissionregistration.k8s.io"
                and v not in ("get", "list", "watch")}


def test_webhook_rbac_reads_exactly_what_its_cluster_state_watches():
    """The webhook's ClusterRole grants list/watch on every kind its KubeState watches with the
    shipped policies (by name where the watch is by name: RBAC authorizes a metadata.name field
    selector as that name), on its own two webhook configurations by name (the caBundle watch,
    webhook.certs), and reads nothing else (``rbac.extraLookupRules`` adds your policies' kinds)."""
    from webhook import certs, shipped_data
    from webhook.inputs.watches import webhook_watches
    from webhook.apiversion import group_of
    from webhook.policy import PolicySet
    from tests.support.cel import EVALUATOR

    (role,) = [o for o in objects("default") if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "infergate"]
    expected: dict[tuple[str, str], list[str] | None] = {}
    for kind in webhook_watches(PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR)):
        by_name = (kind.field_selector or "").removeprefix("metadata.name=")
        key = (group_of(kind.api_version), kind.plural)
        expected[key] = sorted([*(expected.get(key) or ()), by_name]) if by_name else None
    for call in certs.WEBHOOK_CONFIGURATIONS.values():
        expected[("admissionregistration.k8s.io", call.replace("_", "") + "s")] = ["infergate"]
    reads: dict[tuple[str, str], list[str] | None] = {}
    for rule in role["rules"]:
        if {"list", "watch"} <= set(rule["verbs"]):
            granted = {(group, resource) for group in rule["apiGroups"] for resource in rule["resources"]}
            # a rule is one grant: it is needed when a kind of it is watched (the e2e suite
            # removes each rule and sees the 403), e.g. deviceclasses beside resourceslices
            assert granted & set(expected), rule
            for key in granted:
                reads[key] = rule.get("resourceNames")
    assert {key: reads.get(key, "not granted") for key in expected} == expected


def test_the_controller_writes_status_as_the_values_say():
    """controller.statusWrites becomes --status-writes flags the controller parses: by default
    KubeAI's Model is left to KubeAI's controller."""
    from webhook import kinds
    from webhook.controller.ownership import status_writes

    def flags(values):
        (deployment,) = [o for docs in render(values).values() for o in docs if o["kind"] == "Deployment"
                         and o["metadata"]["name"].endswith("-controller")]
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        return [a.removeprefix("--status-writes=") for a in args if a.startswith("--status-writes=")]

    assert flags({}) == ["models.kubeai.org=off"] and kinds.KUBEAI_MODEL not in status_writes(flags({}))
    on = flags({"controller": {"statusWrites": {"models.kubeai.org": True}}})
    assert kinds.KUBEAI_MODEL in status_writes(on)
    # and the ClusterRole lets it patch the status of exactly those kinds (least privilege)
    # (the audit reads every kind the webhook judges: without it, a kind whose status it leaves
    # alone is not even read)
    for values in ({"audit": {"enabled": False}},
                   {"audit": {"enabled": False},
                    "controller": {"statusWrites": {"models.kubeai.org": True,
                                                    "inferencepools.inference.networking.x-k8s.io": False}}}):
        (role,) = [o for docs in render(values).values() for o in docs
                   if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-controller")]
        patched = {(g, r) for rule in role["rules"] if "patch" in rule["verbs"]
                   for g in rule["apiGroups"] for r in rule["resources"]}
        assert patched == {(k.group, f"{k.plural}/status") for k in status_writes(flags(values))}
        read = {(g, r) for rule in role["rules"] if "watch" in rule["verbs"]
                for g in rule["apiGroups"] for r in rule["resources"]}
        assert {(k.group, k.plural) for k in kinds.OWNED} & read == {(k.group, k.plural)
                                                                    for k in status_writes(flags(values))}


def test_webhook_pods_keep_idle_connections_longer_than_the_apiserver():
    """The apiserver's client keeps an idle connection 90 s: the server keeps it longer."""
    for values, idle in (({}, 120), ({"webhook": {"idleTimeoutSeconds": 300}}, 300)):
        (container,) = webhook_deployment_of(values)["spec"]["template"]["spec"]["containers"]
        assert f"--idle-timeout={idle}" in container["args"]
        assert idle > 90


def test_webhook_processes_follow_the_cpu_request_unless_set():
    """--processes auto reads the CPU request the Downward API gives (the cgroup quota first,
    where a limit sets one); a count is passed as is."""
    for values, processes in (({}, "auto"), ({"webhook": {"processes": 2, "resources": {"requests": {"cpu": "2"}}}}, "2")):
        (container,) = webhook_deployment_of(values)["spec"]["template"]["spec"]["containers"]
        assert f"--processes={processes}" in container["args"]
        (variable,) = [e for e in container["env"] if e["name"] == "INFERGATE_CPU_REQUEST_MILLICORES"]
        assert variable["valueFrom"]["resourceFieldRef"] == {"containerName": "webhook", "resource": "requests.cpu",
                                                              "divisor": "1m"}


def test_native_policies_wire_the_controller_the_webhook_and_their_rbac():
    """policies.native.enabled: the controller exports from the webhook's policies and actions, owned
    by the ClusterRole rendered only then (so turning the value off or uninstalling deletes the
    generated objects through the garbage collector); the webhook leaves the marked rules to the
    apiserver; the RBAC is exactly what the two do, and nothing of it is rendered by default."""
    import argparse

    from webhook.controller.native_policies import KIND_OF
    from webhook.controller.runner import add_arguments
    from webhook.inputs.watches import handover_watches
    from webhook.server.command import add_arguments as serve_arguments
    from webhook.apiversion import group_of

    for name in VALUE_SETS:
        if name != "native-policies":
            names = [o["metadata"]["name"] for o in objects(name)]
            assert not [n for n in names if n.endswith("native-policies") or n.endswith("native-policies-probe")], name
    name = "native-policies"
    (container,) = one(name, "Deployment", "-controller")["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    args = parser.parse_args(container["args"][1:])
    owner = one(name, "ClusterRole", "-controller-native-policies")
    assert args.native_policies and args.native_policies_owner == owner["metadata"]["name"]
    (webhook_container,) = webhook_deployment(name)["spec"]["template"]["spec"]["containers"]
    serve = argparse.ArgumentParser(exit_on_error=False)
    serve_arguments(serve)
    served = serve.parse_args(webhook_container["args"][1:])
    assert served.native_policies and served.kube_state
    assert args.policies == served.policies_dir and args.policy_actions == (served.policy_actions or [])
    # the controller: its generated kinds listed, applied, deleted; its owner read by name; the probe
    controller = {(g, r, v) for rule in owner["rules"] if not rule.get("resourceNames")
                  for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    generated = {(k.group, k.plural) for k in KIND_OF.values()}  # VAPs, MAPs and their bindings
    assert controller == {(g, r, v) for g, r in generated for v in ("list", "create", "patch", "delete")}
    assert [r for r in owner["rules"] if r.get("resourceNames")] == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
         "resourceNames": [owner["metadata"]["name"]], "verbs": ["get"]}]
    probe = one(name, "Role", "-native-policies-probe")
    assert probe["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]
    # the webhook: a watch of each generated kind
    webhook = grants(name, f"{RELEASE}-native-policies")
    assert webhook == {(group_of(w.api_version), w.plural, v) for w in handover_watches()
                       for v in ("get", "list", "watch")}
    for binding_kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding in [o for o in objects(name) if o["kind"] == binding_kind and "native-policies" in o["metadata"]["name"]]:
            assert binding["roleRef"]["name"] == binding["metadata"]["name"]
            (subject,) = binding["subjects"]
            assert subject["name"] == (f"{RELEASE}-controller" if "controller" in binding["metadata"]["name"] else RELEASE)
