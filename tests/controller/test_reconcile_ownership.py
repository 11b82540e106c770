"""``infergate reconcile`` on today's kinds: it shows what the controller would write, and for
the kinds another controller owns, who writes their status (and that infergate writes none)."""

from __future__ import annotations

import json

import yaml

from webhook.cli import main
from webhook.shipped_data import example_manifests_dir

VALID = example_manifests_dir() / "valid"
NOW = "2026-11-29T12:00:00Z"


def reconcile(capsys, *args):
    code = main(["reconcile", "--now", NOW, *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_todays_kinds_are_named_with_their_status_writer(capsys):
    code, out, err = reconcile(capsys, VALID / "inferencepool-v1.yaml", VALID / "inferenceobjective.yaml",
                               VALID / "inferencemodelrewrite.yaml", VALID / "httproute-inferencepool.yaml",
                               VALID / "inferencemodel.yaml")
    assert code == 0, err
    assert out.splitlines() == [
        "InferenceModel ml-team/food-review Accepted=True (Accepted)",
        "InferencePool ml-team/qwen3-pool-b: status written by Gateway implementations (status.parents); "
        "infergate writes none of it",
        "InferenceObjective ml-team/qwen3-batch: status written by the endpoint picker; infergate writes none of it",
        "InferenceModelRewrite ml-team/llama-canary: status written by the endpoint picker; infergate writes none of it",
    ]  # an HTTPRoute has no status of infergate's nor a line


def test_kubeai_model_status_follows_status_writes(capsys):
    code, out, _ = reconcile(capsys, VALID / "kubeai-model-vllm.yaml", "-o", "json")
    assert code == 0 and json.loads(out)["items"] == []  # KubeAI's controller writes it
    code, out, _ = reconcile(capsys, VALID / "kubeai-model-vllm.yaml", "-o", "json",
                             "--status-writes", "models.kubeai.org=on")
    (item,) = json.loads(out)["items"]
    assert code == 0 and item["status"]["replicas"] == {"all": 0, "ready": 0}


def test_a_bad_status_writes_value_is_one_line(capsys):
    code, out, err = reconcile(capsys, "--status-writes", "models=on")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "expected <kind>=on|off" in err


def test_yaml_and_json_name_on_stderr_the_objects_whose_status_infergate_does_not_write(capsys):
    for output in ("yaml", "json"):
        code, out, err = reconcile(capsys, VALID / "inferencepool-v1.yaml", VALID / "inferenceobjective.yaml",
                                   VALID / "kubeai-model-vllm.yaml", "-o", output)
        assert code == 0
        items = json.loads(out)["items"] if output == "json" else yaml.safe_load_all(out)
        assert [item for item in items if item] == []  # none of them gets a status from infergate
        assert err.splitlines() == [
            "note: InferencePool ml-team/qwen3-pool-b: status written by Gateway implementations (status.parents); "
            "infergate writes none of it",
            "note: InferenceObjective ml-team/qwen3-batch: status written by the endpoint picker; "
            "infergate writes none of it",
            "note: Model ml-team/llama-3-1-8b-instruct-l4: status written by KubeAI's model controller "
            "(status.replicas, status.cache); infergate writes none of it",
        ]
