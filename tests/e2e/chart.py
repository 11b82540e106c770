"""``INFERGATE_E2E_MODE=chart``: the Helm chart installed in the cluster (which must run Pods).

The chart is installed, upgraded and uninstalled by Helm itself (the Helm v4 SDK through
helm-python-sdk, what ``helm install`` runs), as release ``infergate`` in the run's namespace,
with the chart's default values but for the image (``INFERGATE_E2E_IMAGE``, ``repository:tag``,
built from this checkout's Dockerfile), two server processes per webhook Pod
(:data:`SESSION_PROCESSES`), the controller's replan settings the scenarios need, and the run
label on every object (``commonLabels``: the final sweep finds whatever stays).
Rendering (:func:`rendered_objects`) uses the same Helm, ``helm template`` semantics.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import yaml

from tests.support.paths import CHART

from . import cluster, selection
from .api import wait_for
from .processes import REPLAN_LIMIT, REPLAN_TIMEOUT_S

if TYPE_CHECKING:
    from .conftest import Run


RELEASE = "infergate"
# ``webhook.processes`` of the run's release. The default (auto) runs one process at the chart's
# 100m request, the path local mode already takes (``serve`` without --processes): two here make
# every chart scenario (rollout, eviction, apiserver restart, CA injection) go through the forked
# group of processes sharing one port. The request stays at its default: it only schedules, and a
# matching 2 CPUs per replica would not fit two replicas on a 2-core node (docs/e2e.md).
SESSION_PROCESSES = 2
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def values(image: str) -> dict:
    repository, _, tag = image.rpartition(":")
    if not repository or "/" in tag:
        raise ValueError(f"INFERGATE_E2E_IMAGE must be repository:tag, got {image!r}")
    return {"image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
            "controller": {"replanTimeoutSeconds": REPLAN_TIMEOUT_S, "replanLimit": REPLAN_LIMIT}}


def render(namespace: str, image: str) -> list[dict]:
    return rendered_objects(values(image), namespace, hooks=False)


def rendered_objects(chart_values: dict, namespace: str, *, release: str = RELEASE, hooks: bool = True,
                     crds: bool = False) -> list[dict]:
    """What ``helm template`` prints for ``chart_values`` (``hooks``: with the ``helm test``
    objects; ``crds``: with ``crds/``, as ``--include-crds`` and every install)."""
    import helm_python as helm

    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(chart_values, name=release, namespace=namespace)
        texts = [text for path, text in sorted(rendered.items())
                 if not path.endswith("NOTES.txt") and (hooks or "/templates/tests/" not in path)]
        if crds:
            texts = [crd["data"] for crd in chart.crds] + texts
    return [doc for text in texts for doc in yaml.safe_load_all(text) if doc]


def default_values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def _flipped(defaults: dict) -> dict:
    """Every boolean of ``defaults`` (nested mappings too) turned the other way."""
    return {key: (not value if isinstance(value, bool) else _flipped(value))
            for key, value in defaults.items() if isinstance(value, bool | dict)}


def documented_value_sets() -> dict[str, dict]:
    """The default values and each documented non-default choice of chart/values.yaml on its
    own (the opt-in ``crds.*`` switches read from values.yaml, so a new one is covered at once)."""
    sets: dict[str, dict] = {
        "default": {},
        "certificates.mode=cert-manager": {"certificates": {"mode": "cert-manager"}},
        "certificates.certManager.issuerRef": {"certificates": {"mode": "cert-manager", "certManager": {
            "issuerRef": {"name": "e2e-ca", "kind": "ClusterIssuer"}}}},
        "networkPolicy.enabled": {"networkPolicy": {"enabled": True}},
        "networkPolicy.apiServerCIDRs": {"networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"]}},
        "serviceMonitor.enabled": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
        "controller.enabled=false": {"controller": {"enabled": False}},
        "controller.replicas=2": {"controller": {"replicas": 2, "replanTimeoutSeconds": 120, "replanLimit": 5}},
        "webhook": {"webhook": {"replicas": 3, "port": 10250, "failurePolicy": "Ignore", "timeoutSeconds": 3,
                                "failureMode": "allow", "antiAffinity": "required",
                                "clientCAConfigMap": "apiserver-client-ca",
                                "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}]}},
        "image.digest": {"image": {"repository": "registry.example.com/infergate", "digest": "sha256:" + "ab" * 32},
                         "imagePullSecrets": [{"name": "registry"}]},
        "names-and-labels": {"fullnameOverride": "gate", "commonLabels": {"team": "platform"}},
        "policies": {"policies": {"user": {"team-labels.yaml": "apiVersion: v1\nkind: Example\n# a user policy\n"},
                                  "existingConfigMap": "gitops-policies"}},
        "kubeai.systemConfig": {"kubeai": {"systemConfig": {
            "resourceProfiles": {"cpu": {"imageName": "cpu", "requests": {"cpu": "1"}}}}}},
        "priorityClassName": {"priorityClassName": "system-cluster-critical"},
        "autoscaling.enabled": {"autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 4}},
        "webhook.drainSeconds": {"webhook": {"drainSeconds": 15}},
        "webhook.processes": {"webhook": {"processes": 2, "idleTimeoutSeconds": 150}},
        "rbac.create=false": {"rbac": {"create": False}},
        "policies.native.enabled": selection.NATIVE_VALUES,
    }
    for key, flipped in _flipped(default_values().get("crds") or {}).items():
        sets[f"crds.{key}"] = {"crds": {key: flipped}}
    return sets


def release_values(image: str, run_id: str, native: bool = False) -> dict:
    """The values of the run's release: the defaults but for the image, the server processes, the
    replan settings and the run label (``native``: and ``policies.native.enabled``)."""
    base = {**values(image), "webhook": {"processes": SESSION_PROCESSES}, "commonLabels": {cluster.RUN_LABEL: run_id}}
    return merged(base, selection.NATIVE_VALUES) if native else base


def merged(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` merged in, mapping by mapping (what ``--set`` does)."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


@dataclass
class Release:
    """A Helm release of the chart, and the values it was last installed or upgraded with."""

    name: str
    namespace: str
    kubeconfig: str
    values: dict

    def _config(self):
        import helm_python as helm

        return helm.Config(kubeconfig_path=self.kubeconfig, namespace=self.namespace)

    def install(self, timeout: int = 300) -> None:
        import helm_python as helm

        with self._config() as config, helm.Chart.load(CHART) as loaded:
            config.install(loaded, self.name, self.values, namespace=self.namespace, timeout=timeout)

    def upgrade(self, changes: dict, timeout: int = 300) -> None:
        """``helm upgrade`` with ``changes`` merged into the values in force."""
        import helm_python as helm

        self.values = merged(self.values, changes)
        with self._config() as config, helm.Chart.load(CHART) as loaded:
            config.upgrade(loaded, self.name, self.values, namespace=self.namespace, timeout=timeout)

    def uninstall(self, timeout: int = 300) -> None:
        with self._config() as config:
            config.uninstall(self.name, ignore_not_found=True, timeout=timeout)

    def objects(self, *, hooks: bool = False) -> list[dict]:
        """What the release holds now (its templates rendered with its values)."""
        return rendered_objects(self.values, self.namespace, release=self.name, hooks=hooks)

    def fullname(self) -> str:
        return next(o["metadata"]["name"] for o in self.objects() if o["kind"] == "Service")

    def selector(self, component: str) -> str:
        return f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component={component}"


def image() -> str:
    found = os.environ.get("INFERGATE_E2E_IMAGE")
    if not found:
        raise RuntimeError("INFERGATE_E2E_MODE=chart needs INFERGATE_E2E_IMAGE=repository:tag "
                           "(the infergate image the cluster can pull)")
    return found


def session_release(run: Run, name: str = RELEASE, namespace: str | None = None) -> Release:
    """A release of the chart with the run's values (not installed yet). In a native run
    (``INFERGATE_E2E_NATIVE_POLICIES=1``) only the run's own release generates the native
    policies: one writer of the cluster-wide objects."""
    native = selection.native_policies() and name == RELEASE and namespace is None
    return Release(name, namespace or run.system_namespace, run.kubeconfig,
                   release_values(image(), run.run_id, native))


def install(kube, release: Release) -> list[dict]:
    """``helm install`` of ``release``; returns its two webhook configurations once its
    Deployments are rolled out and the webhook has injected its CA into both."""
    release.install()
    objects = release.objects()
    for obj in objects:
        if obj["kind"] == "Deployment":
            name = obj["metadata"]["name"]
            wait_for(f"Deployment {name} rolled out", lambda n=name: rolled_out(kube, release.namespace, n),
                     timeout=300, interval=1)
    configurations = [obj for obj in objects if obj["kind"] in WEBHOOK_KINDS]
    wait_for("the caBundle injected", lambda: ca_bundles(kube, configurations), timeout=120, interval=1)
    return configurations


def ca_bundles(kube, configurations: list[dict]) -> set[str] | None:
    """The caBundles in every webhook of ``configurations`` as stored; None while one lacks it."""
    found = set()
    for config in configurations:
        stored = kube.get(config["apiVersion"], config["kind"], config["metadata"]["name"]) or {}
        for hook in stored.get("webhooks") or [{}]:
            bundle = (hook.get("clientConfig") or {}).get("caBundle")
            if not bundle:
                return None
            found.add(bundle)
    return found


def rolled_out(kube, namespace: str, name: str) -> bool:
    """As ``kubectl rollout status``: the newest template's replicas all updated and available,
    and no replica of an older template left."""
    deployment = kube.get("apps/v1", "Deployment", name, namespace) or {}
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted = spec.get("replicas", 1)
    return (status.get("observedGeneration", 0) >= (deployment.get("metadata") or {}).get("generation", 1)
            and status.get("updatedReplicas", 0) == wanted and status.get("replicas", 0) == wanted
            and status.get("availableReplicas", 0) == wanted)


def pods(kube, namespace: str, selector: str) -> list[dict]:
    return kube.list("v1", "Pod", namespace, label_selector=selector)


def ready(pod: dict) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or ())
