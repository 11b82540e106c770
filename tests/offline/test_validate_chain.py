"""`infergate validate`: the whole chain by default (docs/decisions.md's rules, offline), with
--state, --policies, --explain and --crd-only; errors end in messages, not tracebacks."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap

import pytest

from webhook import shipped_data
from webhook.cli import main

MANIFESTS = shipped_data.example_manifests_dir()
# the example cluster the example manifests are written against: named, as a user names it
DEMO = ("--state", str(shipped_data.examples_dir()))


def validate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", *argv])
    return code, out.getvalue(), err.getvalue()


def validate_json(*argv: str) -> tuple[int, list[dict]]:
    code, out, _ = validate(*argv, "-o", "json")
    return code, json.loads(out)


def test_valid_manifests_pass_the_whole_chain_with_their_defaults():
    code, results = validate_json(*DEMO, "-f", str(MANIFESTS / "valid"))
    assert code == 0 and all(r["allowed"] for r in results)
    for r in results:
        obj = r["object"]
        if obj["kind"] == "InferenceService":
            assert obj["spec"]["launchStrategy"] in ("Latency", "Throughput", "Balance")
            assert obj["spec"]["inferenceServiceClassName"]
        if obj["apiVersion"] == "kubeai.org/v1":
            assert "minReplicas" in obj["spec"]
    (defaulted,) = [r for r in results if {"op": "add", "path": "/spec/inferenceServiceClassName", "value": "general"}
                    in r.get("patch", [])]
    assert defaulted["object"]["spec"]["inferenceServiceClassName"] == "general"


@pytest.mark.parametrize("path", sorted((MANIFESTS / "denied-by-webhook").glob("*.yaml")), ids=lambda p: p.name)
def test_webhook_denied_manifests_are_denied_for_the_reason_they_state(path):
    word = path.read_text().splitlines()[0].removeprefix("# denied:").strip()
    code, results = validate_json(*DEMO, "-f", str(path))
    (result,) = results
    assert code == 1 and not result["allowed"]
    message = result["status"]["message"]
    assert message.startswith('admission webhook "validate.infergate.io" denied the request: ')
    assert word in message


@pytest.mark.parametrize("path", sorted((MANIFESTS / "warned-by-webhook").glob("*.yaml")), ids=lambda p: p.name)
def test_webhook_warned_manifests_are_admitted_with_the_warning_they_state(path):
    said = path.read_text().splitlines()[0].removeprefix("# warns:").strip()
    code, results = validate_json("-f", str(path))
    (result,) = results
    assert code == 0 and result["allowed"], result["status"]
    assert any(said in w for w in result["warnings"]), result["warnings"]


def test_warnings_fit_the_apiservers_recommended_length():
    # the apiserver truncates long warnings; ours name field, value and object within 120 characters
    for folder in ("valid", "denied-by-webhook", "warned-by-webhook"):
        _, results = validate_json(*DEMO, "-f", str(MANIFESTS / folder))
        assert all(len(w) <= 120 for r in results for w in r["warnings"]), [r["warnings"] for r in results]


def test_crd_only_skips_the_policies():
    code, results = validate_json("--crd-only", "-f", str(MANIFESTS / "denied-by-webhook"))
    assert code == 0 and all(r["allowed"] and "patch" not in r for r in results)


def test_state_directory_changes_the_answer(tmp_path):
    (tmp_path / "classes.yaml").write_text(textwrap.dedent("""\
        apiVersion: ai.deckhouse.io/v1alpha1
        kind: InferenceServiceClass
        metadata: {name: only}
        spec: {exposurePolicy: {type: ClusterLocal, authentication: Token}}
        """))
    manifest = MANIFESTS / "valid" / "inferenceservice-default-class.yaml"
    assert validate("-f", str(manifest))[0] == 0
    code, out, _ = validate("--state", str(tmp_path), "-f", str(manifest))
    assert code == 1
    assert "no InferenceServiceClass is annotated ai.deckhouse.io/is-default-class" in out and "classes: only" in out


def test_explain_shows_each_rule(tmp_path):
    code, out, _ = validate("--explain", "-f", str(MANIFESTS / "warned-by-webhook" / "kubeai-model-speech-on-vllm.yaml"))
    assert code == 0  # a warning
    assert "  kubeai-model-engine warnings[1] => false\n" in out
    assert "      !('SpeechToText' in object.spec.?features.orValue([])) || variables.engine == 'FasterWhisper'\n" in out
    assert '      variables.engine = "VLLM"\n' in out
    assert '      object.spec.features = ["SpeechToText"]\n' in out
    code, results = validate_json("--explain", "-f", str(MANIFESTS / "valid" / "kubeai-model-ollama.yaml"))
    assert code == 0 and any(t["policy"] == "kubeai-model-defaults" for t in results[0]["explain"])


def test_broken_policies_are_a_clear_error(tmp_path):
    (tmp_path / "p.yaml").write_text("apiVersion: policy.infergate.io/v1alpha1\nkind: AdmissionPolicy\n"
                                     "metadata: {name: p}\nspec:\n  matchConstraints: {resourceRules: []}\n")
    code, out, err = validate("--policies", str(tmp_path), "-f", str(MANIFESTS / "valid"))
    assert code == 2 and out == ""
    assert err.startswith(f"infergate: error: --policies: {tmp_path / 'p.yaml'}:5: spec.matchConstraints.resourceRules:")
    assert "Traceback" not in err


def test_broken_state_is_a_clear_error(tmp_path):
    (tmp_path / "x.yaml").write_text("kind: [Namespace\n")
    code, _, err = validate("--state", str(tmp_path), "-f", str(MANIFESTS / "valid"))
    assert code == 2 and err.startswith(f"infergate: error: --state: {tmp_path / 'x.yaml'}:")


def test_state_documents_that_are_no_objects_are_skipped_and_counted(tmp_path):
    # a document without apiVersion (a Helm values file, a fragment) is not a Kubernetes object
    (tmp_path / "x.yaml").write_text("kind: Namespace\n")
    code, _, err = validate("--state", str(tmp_path), "-f", str(MANIFESTS / "valid"))
    assert code == 0 and "--state: 1 document skipped, not Kubernetes objects" in err
