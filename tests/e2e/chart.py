"""``INFERGATE_E2E_MODE=chart``: the Helm chart installed in the cluster (which must run Pods).

The chart is rendered by the same Helm the chart tests use (the Helm v4 SDK through
helm-python-sdk, ``helm template`` semantics) and its objects are created like a
``helm install`` would, labelled for the run: everything but the webhook configurations,
then (once the webhook Pods are available) the configurations. The image comes from
``INFERGATE_E2E_IMAGE`` (``repository:tag``, built from this checkout's Dockerfile).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import yaml

from tests.support.paths import CHART

from . import cluster
from .api import wait_for
from .processes import REPLAN_LIMIT, REPLAN_TIMEOUT_S

if TYPE_CHECKING:
    from .conftest import Run


RELEASE = "infergate"
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
        "rbac.create=false": {"rbac": {"create": False}},
    }
    for key, flipped in _flipped(default_values().get("crds") or {}).items():
        sets[f"crds.{key}"] = {"crds": {key: flipped}}
    return sets


def install(run: Run) -> None:
    image = os.environ.get("INFERGATE_E2E_IMAGE")
    if not image:
        raise RuntimeError("INFERGATE_E2E_MODE=chart needs INFERGATE_E2E_IMAGE=repository:tag "
                           "(the infergate image the cluster can pull)")
    objects = render(run.system_namespace, image)
    for obj in objects:
        if obj["kind"] not in WEBHOOK_KINDS:
            if run.kube.resource_of(obj).namespaced:
                obj["metadata"].setdefault("namespace", run.system_namespace)
            cluster.create_owned(run.kube, obj, run.owned)
    for obj in objects:
        if obj["kind"] == "Deployment":
            name = obj["metadata"]["name"]
            wait_for(f"Deployment {name} available", lambda n=name: _available(run, n), timeout=300, interval=2)
    run.configurations = [obj for obj in objects if obj["kind"] in WEBHOOK_KINDS]
    for config in run.configurations:
        cluster.create_owned(run.kube, config, run.owned)
    # the webhook injects its CA into the configurations it was started for
    wait_for("the caBundle injected", lambda: all(
        hook.get("clientConfig", {}).get("caBundle")
        for config in run.configurations
        for hook in (run.kube.get(config["apiVersion"], config["kind"], config["metadata"]["name"]) or {}).get("webhooks", [{}])
    ), timeout=120, interval=2)


def _available(run: Run, name: str) -> bool:
    deployment = run.kube.get("apps/v1", "Deployment", name, run.system_namespace) or {}
    return any(c["type"] == "Available" and c["status"] == "True"
               for c in (deployment.get("status") or {}).get("conditions") or ())
