"""``infergate reconcile`` gives the documented outcome of every scenario of the worked example (docs/design.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from webhook.cli import main

from tests.controller.helpers import CLUSTER, ORDERS

NOW = "2026-01-01T00:00:00Z"


def reconcile(capsys, *args):
    code = main(["reconcile", "--state", str(CLUSTER), "--now", NOW, *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def statuses(capsys, order_file):
    code, out, err = reconcile(capsys, ORDERS / order_file, "-o", "json")
    assert code == 0, err
    items = json.loads(out)["items"]
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [("InferenceService", "hf-embedding")]
    return items[0]["status"]


def conditions(status):
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_worked_example_lands_on_the_mps_partition(capsys):
    status = statuses(capsys, "hf-embedding.yaml")
    assert conditions(status)["ClassResolved"] == ("True", "ClassResolved")
    assert status["constraints"] == {
        "minReplicas": 1, "maxReplicas": 2, "priorityClassName": "inference-low", "modelScope": "Namespaced"}
    assert conditions(status)["ModelResolved"] == ("True", "ModelResolved")
    assert status["model"] == {"endpointType": "Embeddings"}
    # need: 4.022e9 × 0.5 (w4a16) × 1.2 (Latency) = 2.41e9 B -> 3 GiB; 26% of 12032Mi = 3.05 GiB
    assert status["resolved"] == {
        "deviceClass": "nvidia-a30-mig-2g12-mps", "placementMode": "Partition", "sharingMode": "Shared",
        "sharePercent": 26, "acceleratorMemoryGiB": 3, "acceleratorProductName": "a30-pcie", "replanCount": 0}
    assert 25 <= status["resolved"]["sharePercent"] <= 50
    assert status["endpoint"] == {
        "type": "ClusterLocal", "url": "http://hf-embedding.hardfest-demo.svc:80", "toolCallingSupported": False}
    assert status["authSecretName"] == "hf-embedding-api-key"
    assert conditions(status)["Planned"] == ("True", "Planned")
    assert status["phase"] == "Pending"  # no workload yet
    assert status["observedGeneration"] == 1
    assert all(c["lastTransitionTime"] == NOW for c in status["conditions"])


def test_narrowed_to_h100_is_claim_device_missing(capsys):
    status = statuses(capsys, "hf-embedding-h100.yaml")
    assert conditions(status)["Planned"] == ("False", "ClaimDeviceMissing")
    assert status["phase"] == "Failed"
    assert all(c["observedGeneration"] == 2 for c in status["conditions"])


def test_gguf_model_is_format_not_allowed(capsys):
    status = statuses(capsys, "hf-embedding-gguf.yaml")
    assert conditions(status)["ModelResolved"] == ("False", "FormatNotAllowed")
    assert status["phase"] == "Failed"


def test_text_output_says_where_it_lands_and_why_not(capsys):
    code, out, _ = reconcile(capsys, ORDERS / "hf-embedding.yaml")
    assert code == 0
    assert "lands on DeviceClass nvidia-a30-mig-2g12-mps: Partition, Shared 26%, 3 GiB, a30-pcie" in out
    code, out, _ = reconcile(capsys, ORDERS / "hf-embedding-h100.yaml")
    assert "Planned=False ClaimDeviceMissing" in out and "[nvidia-h100-physical]" in out


def test_whole_state_in_yaml(capsys):
    code, out, _ = reconcile(capsys, "-o", "yaml")
    assert code == 0
    documents = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [("InferenceServiceClass", "a30-shared")]
    assert documents[0]["status"]["phase"] == "Ready"


def test_bad_input_is_one_clear_line(capsys, tmp_path):
    code, _, err = reconcile(capsys, tmp_path / "missing.yaml")
    assert code == 1 and err.strip() == f"infergate reconcile: {tmp_path / 'missing.yaml'}: no such file or directory"
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    code, _, err = reconcile(capsys, broken)
    assert code == 1 and err.startswith(f"infergate reconcile: {broken}:2: invalid YAML") and "Traceback" not in err
    not_an_object = tmp_path / "list.yaml"
    not_an_object.write_text("- just\n- a list\n")
    code, _, err = reconcile(capsys, not_an_object)
    assert code == 1 and err.strip() == f"infergate reconcile: {not_an_object}:1: not a Kubernetes object (apiVersion, kind and metadata)"
    code = main(["reconcile", "--state", str(tmp_path / "nope")])
    assert code == 1 and "not a directory" in capsys.readouterr().err
    code = main(["reconcile", "--state", str(CLUSTER), "--now", "soon"])
    assert code == 1 and "RFC 3339" in capsys.readouterr().err


def test_the_installed_command():
    out = subprocess.run(
        [sys.executable, "-m", "webhook", "reconcile", "--state", str(CLUSTER), "--now", NOW, str(ORDERS / "hf-embedding-gguf.yaml")],
        capture_output=True, text=True,
    )
    assert out.returncode == 0
    assert out.stdout.splitlines()[0] == "InferenceService hardfest-demo/hf-embedding: Failed"


def test_a_malformed_object_is_reported_and_the_rest_reconciled(capsys, tmp_path):
    broken = tmp_path / "broken-order.yaml"
    broken.write_text(
        "apiVersion: ai.deckhouse.io/v1alpha1\nkind: InferenceService\n"
        "metadata: {name: broken, namespace: hardfest-demo}\nspec: [not, a, mapping]\n---\n"
        + (ORDERS / "hf-embedding.yaml").read_text()
    )
    code, out, err = reconcile(capsys, broken)
    assert code == 1
    assert "lands on DeviceClass nvidia-a30-mig-2g12-mps" in out
    assert err.startswith("infergate reconcile: InferenceService hardfest-demo/broken: malformed, not reconciled")
    assert "Traceback" not in err


def test_timestamps_as_yaml_writes_them(capsys, tmp_path):
    # an unquoted timestamp: YAML loaders make it a datetime; the controller reads both forms
    (tmp_path / "models.yaml").write_text(
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: InferencePool\n"
        "metadata: {name: pool, namespace: ns}\nspec: {selector: {app: x}, targetPortNumber: 8000}\n---\n"
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: InferenceModel\n"
        "metadata: {name: old, namespace: ns, creationTimestamp: 2025-01-01T00:00:00Z}\n"
        "spec: {modelName: llama, poolRef: {name: pool}}\n---\n"
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: InferenceModel\n"
        "metadata: {name: new, namespace: ns, creationTimestamp: '2026-01-01T00:00:00Z'}\n"
        "spec: {modelName: llama, poolRef: {name: pool}}\n"
    )
    code = main(["reconcile", "--state", str(tmp_path), "--now", NOW])
    out = capsys.readouterr().out
    assert code == 0
    assert "InferenceModel ns/old Accepted=True (Accepted)" in out
    assert "InferenceModel ns/new Accepted=False (ModelNameInUse)" in out


def test_previous_status_with_unquoted_times(capsys, tmp_path):
    (tmp_path / "pool.yaml").write_text(
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: InferencePool\n"
        "metadata: {name: pool, namespace: ns, generation: 1}\nspec: {selector: {app: x}, targetPortNumber: 8000}\n"
        "status:\n  conditions:\n  - {type: Ready, status: 'False', reason: NoMatchingPods, message: old,\n"
        "     lastTransitionTime: 2025-06-01T10:00:00Z}\n"
    )
    code = main(["reconcile", "--state", str(tmp_path), "--now", NOW, "-o", "json"])
    (item,) = json.loads(capsys.readouterr().out)["items"]
    assert code == 0
    assert item["status"]["conditions"][0]["lastTransitionTime"] == "2025-06-01T10:00:00Z"  # unchanged status
