"""``infergate validate``'s CRDs: the bundled ones (schema-only Gateway API kinds, GIE's earlier
versions combined into one CRD per name), ``--crd`` adding to them and replacing one of a name,
``--no-bundled-crds``, two different CRDs of one name refused, and the did-you-mean of a skip.
Real upstream files only (tests/upstream, chart/files/crds: provenance in their SOURCES)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.support.paths import KUBEAI_V0_12_CRD, LEGACY_CRDS, REPO, UPSTREAM_CRDS
from webhook.cli import main

CORPUS = REPO / "tests" / "upstream"
GATEWAY = CORPUS / "gie-v1.0.2" / "config" / "manifests" / "gateway" / "istio" / "gateway.yaml"
V1ALPHA2_MODELS = CORPUS / "gie-v0.5.1" / "config" / "manifests" / "inferencemodel.yaml"
V1ALPHA2_POOL_CRD = LEGACY_CRDS / "inference.networking.x-k8s.io_inferencepools_v1alpha2-gie-v1.4.0.yaml"
V1ALPHA1_POOL_CRD = LEGACY_CRDS / "inference.networking.x-k8s.io_inferencepools_v1alpha1-gie-v0.1.0.yaml"
MODEL_CRD = UPSTREAM_CRDS / "kubeai.org_models_v1-kubeai-main-2b0ab6e-2026-07-17.yaml"
MODEL = REPO / "examples" / "manifests" / "valid" / "kubeai-model-vllm.yaml"


def _json(capsys, *args: str) -> tuple[int, list[dict], str]:
    code = main(["validate", *map(str, args), "-o", "json"])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else [], out.err


def _pool(api_version: str, spec: dict) -> str:
    return yaml.safe_dump({"apiVersion": api_version, "kind": "InferencePool",
                           "metadata": {"name": "pool", "namespace": "default"}, "spec": spec})


def test_gateway_documents_are_validated_by_the_bundled_schema(capsys):
    code, results, _ = _json(capsys, GATEWAY, "--crd-only")
    assert code == 0 and [r["result"] for r in results] == ["valid"]
    assert results[0]["object"]["kind"] == "Gateway"


def test_a_bad_gateway_is_refused_by_gateway_apis_schema(tmp_path, capsys):
    bad = yaml.safe_load(GATEWAY.read_text())
    bad["spec"]["listeners"][0]["protocol"] = "HTTP"
    bad["spec"]["listeners"][0]["port"] = 70000
    (tmp_path / "gw.yaml").write_text(yaml.safe_dump(bad))
    code, results, _ = _json(capsys, tmp_path / "gw.yaml", "--crd-only")
    assert code == 1 and results[0]["result"] == "invalid"
    assert "spec.listeners[0].port" in json.dumps(results[0]["status"])


def test_gie_v1alpha2_models_are_validated_and_warned_toward_their_successor(capsys):
    code, results, _ = _json(capsys, V1ALPHA2_MODELS)
    assert code == 0 and {r["result"] for r in results} == {"valid"}
    for result in results:
        assert any("removed upstream: use llm-d.ai/v1alpha2 InferenceObjective" in w for w in result["warnings"])


def test_one_crd_name_serves_both_gie_versions(tmp_path, capsys):
    path = tmp_path / "pools.yaml"
    path.write_text(_pool("inference.networking.x-k8s.io/v1alpha1",
                          {"selector": {"app": "a"}, "targetPortNumber": 8000, "extensionRef": {"name": "epp"}})
                    + "---\n"
                    + _pool("inference.networking.x-k8s.io/v1alpha2",
                            {"selector": {"app": "a"}, "targetPortNumber": 8000, "extensionRef": {"name": "epp"}}))
    code, results, _ = _json(capsys, path, "--crd-only")
    assert code == 0 and [r["result"] for r in results] == ["valid", "valid"]
    assert results[0]["object"]["spec"]["extensionRef"]["failureMode"] == "FailClose"  # v0.1.0's default


def test_crd_adds_to_the_bundled_crds_and_replaces_one_of_its_name(tmp_path, capsys):
    # v1.4.0's CRD alone for inferencepools.inference.networking.x-k8s.io: v1alpha1 is gone
    v1alpha1 = tmp_path / "v1alpha1.yaml"
    v1alpha1.write_text(_pool("inference.networking.x-k8s.io/v1alpha1",
                              {"selector": {"app": "a"}, "targetPortNumber": 8000, "extensionRef": {"name": "e"}}))
    code, results, _ = _json(capsys, v1alpha1, "--crd-only", "--crd", V1ALPHA2_POOL_CRD)
    assert code == 0 and results[0]["result"] == "skipped"
    # the other bundled CRDs stay: a Gateway is still validated
    code, results, _ = _json(capsys, GATEWAY, "--crd-only", "--crd", V1ALPHA2_POOL_CRD)
    assert code == 0 and results[0]["result"] == "valid"
    # KubeAI v0.12.0's Model CRD in place of the current one
    code, results, _ = _json(capsys, MODEL, "--crd-only", "--crd", KUBEAI_V0_12_CRD)
    assert results[0]["result"] in ("valid", "invalid")
    assert _json(capsys, MODEL, "--crd-only", "--crd", MODEL_CRD)[1][0]["result"] == "valid"


def test_a_crd_among_the_manifests_replaces_the_bundled_one_of_its_name(tmp_path, capsys):
    v1alpha1 = tmp_path / "v1alpha1.yaml"
    v1alpha1.write_text(_pool("inference.networking.x-k8s.io/v1alpha1",
                              {"selector": {"app": "a"}, "targetPortNumber": 8000, "extensionRef": {"name": "e"}}))
    code, results, _ = _json(capsys, V1ALPHA2_POOL_CRD, v1alpha1, "--crd-only")
    assert [r["result"] for r in results] == ["valid", "skipped"]


def test_no_bundled_crds_leaves_only_the_given_ones(capsys):
    code, results, _ = _json(capsys, GATEWAY, MODEL, "--crd-only", "--no-bundled-crds", "--crd", MODEL_CRD)
    assert code == 0 and [r["result"] for r in results] == ["skipped", "valid"]


def test_two_different_crds_of_one_name_are_an_error_naming_both_files(tmp_path, capsys):
    code, results, err = _json(capsys, GATEWAY, "--crd", V1ALPHA1_POOL_CRD, "--crd", V1ALPHA2_POOL_CRD)
    assert code == 2 and results == []
    assert "two different CustomResourceDefinitions named 'inferencepools.inference.networking.x-k8s.io'" in err
    assert str(V1ALPHA1_POOL_CRD) in err and str(V1ALPHA2_POOL_CRD) in err
    # a directory holding both: the same
    assert _json(capsys, GATEWAY, "--crd", LEGACY_CRDS)[0] == 2
    # one given with --crd, the other among the manifests
    code, _, err = _json(capsys, V1ALPHA2_POOL_CRD, GATEWAY, "--crd", V1ALPHA1_POOL_CRD)
    assert code == 2 and str(V1ALPHA1_POOL_CRD) in err and str(V1ALPHA2_POOL_CRD) in err


def test_the_same_crd_twice_is_fine(tmp_path, capsys):
    copy = tmp_path / "copy.yaml"
    copy.write_bytes(V1ALPHA2_POOL_CRD.read_bytes())
    code, results, _ = _json(capsys, GATEWAY, "--crd-only", "--crd", V1ALPHA2_POOL_CRD, "--crd", copy)
    assert code == 0 and results[0]["result"] == "valid"
    code, results, _ = _json(capsys, copy, GATEWAY, "--crd-only", "--crd", V1ALPHA2_POOL_CRD)
    assert code == 0 and [r["result"] for r in results] == ["valid", "valid"]


def _reason(tmp_path: Path, capsys, api_version: str, kind: str) -> str:
    path = tmp_path / "doc.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}))
    code, results, _ = _json(capsys, path, "--crd-only")
    assert code == 0 and results[0]["result"] == "skipped"  # a hint never turns a skip into a verdict
    return results[0]["reason"]


def test_a_near_miss_apiversion_or_kind_gets_a_did_you_mean(tmp_path, capsys):
    def reason(api_version, kind):
        return _reason(tmp_path, capsys, api_version, kind)

    assert reason("inference.networking.x-k8s.io/v1", "InferencePool").endswith(
        "no schema for this kind; did you mean inference.networking.k8s.io/v1?")
    assert reason("gateway.networking.k8s.io/v1alpha2", "HTTPRoute").endswith(
        "; did you mean gateway.networking.k8s.io/v1 or gateway.networking.k8s.io/v1beta1?")
    assert reason("llm-d.ai/v1alpha1", "InferenceObjective").endswith("; did you mean llm-d.ai/v1alpha2?")
    assert reason("kubeai.org/v1", "model").endswith("; did you mean kubeai.org/v1 Model?")
    assert reason("gateway.networking.k8s.io/v1", "Gatway").endswith("; did you mean gateway.networking.k8s.io/v1 Gateway?")
    # no near miss: no hint
    assert reason("example.com/v1", "Widget").endswith("no schema for this kind")
    assert reason("gateway.networking.k8s.io/v1", "TCPRoute").endswith("no schema for this kind")


def test_strict_keeps_the_hint_in_its_error(tmp_path, capsys):
    path = tmp_path / "doc.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "inference.networking.x-k8s.io/v1", "kind": "InferencePool",
                                    "metadata": {"name": "x"}}))
    assert main(["validate", str(path), "--strict", "--crd-only"]) == 2
    assert "did you mean inference.networking.k8s.io/v1?" in capsys.readouterr().err


def test_help_says_crd_adds_and_replaces_by_name(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "They add to the bundled CRDs, and one named like a bundled CRD (metadata.name) replaces it" in text
    assert "--no-bundled-crds" in text and "GRPCRoute" in text
