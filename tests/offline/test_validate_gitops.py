"""``infergate validate`` on a GitOps repository as it is: inference objects mixed with
ConfigMaps, Services and Deployments, empty files, notes that are no YAML, a broken file. One
result per document naming its file and line, a closing summary, exit codes 0/1/2, and the CI
formats (JUnit, GitHub workflow commands, SARIF) read by real parsers."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.support.paths import KUBEAI_V0_12_CRD
from webhook import shipped_data
from webhook.cli import main

MANIFESTS = shipped_data.examples_dir().parent / "manifests"
VALID = MANIFESTS / "valid" / "kubeai-model-vllm.yaml"
DENIED = MANIFESTS / "denied-by-webhook" / "kubeai-model-ollama-url-with-vllm.yaml"

OTHERS = textwrap.dedent("""\
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: settings}
    data: {a: "1"}
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec: {ports: [{port: 80}]}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web}
    ---
    apiVersion: kustomize.config.k8s.io/v1beta1
    kind: Kustomization
    resources: [web.yaml]
    """)


@pytest.fixture
def repository(tmp_path) -> Path:
    (tmp_path / "apps" / "web").mkdir(parents=True)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "good.yaml").write_text(VALID.read_text())
    (tmp_path / "models" / "denied.yml").write_text(DENIED.read_text())
    (tmp_path / "apps" / "web" / "all.yaml").write_text(OTHERS)
    (tmp_path / "apps" / "empty.yaml").write_text("")
    (tmp_path / "README.md").write_text("# not YAML: not read\n")
    (tmp_path / "notes.txt").write_text("kind: [\n")
    return tmp_path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["validate", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(text))


def test_a_mixed_repository_gets_one_result_per_document_naming_its_source(repository, capsys):
    code, out, err = _run(capsys, repository)
    assert code == 1  # one object is denied
    others, good, denied = repository / "apps" / "web" / "all.yaml", repository / "models" / "good.yaml", \
        repository / "models" / "denied.yml"
    assert out.splitlines() == [
        f"{others}:1: configmap/settings valid",  # built-in kinds: against Kubernetes' own schemas
        f"{others}:6: service/web valid",
        f"{others}:11: deployment.apps/web valid",
        f"{others}:15: skipped kustomize file, not applied",  # input to kustomize, no Kubernetes object
        f'{denied}:{_line(denied, "apiVersion")}: The Model "gemma-on-vllm" is invalid: spec.engine: '
        'Unsupported value: "VLLM": url "ollama://gemma2:2b" is an ollama:// URL, which only engine "OLlama" serves',
        f"{good}:{_line(good, 'apiVersion')}: model.kubeai.org/llama-3-1-8b-instruct-l4 valid",
        "4 valid, 1 invalid, 1 skipped, 0 errors, in 4 files",
    ]
    # the repository holds no KubeAI config: the Models' profiles are not checked, and a note says so
    note = "note: not checked: no KubeAI config in the input (2 objects); pass --state DIR or --kubeconfig FILE\n"
    assert err == note

    code, out, err = _run(capsys, repository, "-o", "json")
    results = json.loads(out)
    assert code == 1 and [r["result"] for r in results] == ["valid"] * 3 + ["skipped", "invalid", "valid"]
    assert results[1]["source"] == {"file": str(others), "line": 6, "index": 1}
    assert results[3]["reason"] == "kustomize file, not applied"
    assert results[5]["source"] == {"file": str(good), "line": _line(good, "apiVersion"), "index": 0}
    assert results[4]["allowed"] is False and results[4]["status"]["code"] == 422
    assert err == note + "4 valid, 1 invalid, 1 skipped, 0 errors, in 4 files\n"  # the summary last
    assert yaml.safe_load(_run(capsys, repository, "-o", "yaml")[1]) == results

    code, _, err = _run(capsys, repository, "--strict")
    assert code == 2 and err.count("infergate: error: ") == 1 and "kustomize file, not applied" in err


def test_crds_may_come_as_a_list_given_with_crd_or_among_the_manifests(tmp_path, capsys):
    crd = yaml.safe_load(KUBEAI_V0_12_CRD.read_text())
    crd["metadata"]["name"], crd["spec"]["group"] = "models.example.com", "example.com"
    listed = tmp_path / "crds.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
                                      "items": [crd]}))
    model = yaml.safe_load(VALID.read_text())
    model["apiVersion"] = "example.com/v1"
    manifest = tmp_path / "model.yaml"
    manifest.write_text(yaml.safe_dump(model))
    code, out, _ = _run(capsys, manifest, "--crd", listed, "--crd-only")
    assert code == 0 and "model.example.com/llama-3-1-8b-instruct-l4 valid" in out
    code, out, _ = _run(capsys, listed, manifest, "--crd-only")  # a List of CRDs among the manifests
    assert code == 0 and out.splitlines()[:2] == [
        f"{listed}:1: customresourcedefinition.apiextensions.k8s.io/models.example.com valid",
        f"{manifest}:1: model.example.com/llama-3-1-8b-instruct-l4 valid"]


def test_built_in_kinds_are_checked_against_kubernetes_own_schemas(tmp_path, capsys):
    path = tmp_path / "web.yaml"
    path.write_text(textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        spec:
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec:
              containers:
              - {name: web, image: nginx, ports: [{containerPort: "80"}], imagePullPolcy: Always}
        ---
        apiVersion: apps.example.com/v1
        kind: Deployment
        metadata: {name: not-the-built-in-one}
        """))
    strict = ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
              'unknown field "spec.template.spec.containers[0].imagePullPolcy"')
    code, out, _ = _run(capsys, path)  # Strict, kubectl's default: the decoding refuses it first
    assert code == 1
    assert out.splitlines() == [
        f"{path}:1: Error from server (BadRequest): {strict}",
        f"{path}:12: skipped Deployment/not-the-built-in-one (apps.example.com/v1): no schema for this kind",
        "0 valid, 1 invalid, 1 skipped, 0 errors, in 1 file",
    ]
    (result, _) = json.loads(_run(capsys, path, "-o", "json")[1])
    assert result["status"] == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": strict, "reason": "BadRequest", "code": 400}
    code, out, err = _run(capsys, path, "--field-validation", "Warn")  # warned, then the schema's errors
    assert code == 1
    assert out.splitlines()[:2] == [
        f'{path}:1: The Deployment "web" is invalid: '
        "spec.template.spec.containers[0].ports[0].containerPort: '80' is not of type 'integer'",
        f"{path}:12: skipped Deployment/not-the-built-in-one (apps.example.com/v1): no schema for this kind"]
    assert err == f'Warning: {path}:1: unknown field "spec.template.spec.containers[0].imagePullPolcy"\n'
    (result, _) = json.loads(_run(capsys, path, "-o", "json", "--field-validation", "Ignore")[1])
    assert result["warnings"] == [] and result["status"]["message"] == (
        'Deployment.apps "web" is invalid: spec.template.spec.containers[0].ports[0].containerPort: '
        "'80' is not of type 'integer'")


def test_unknown_fields_of_built_in_kinds_are_listed_as_the_apiservers_strict_decoding_lists_them(tmp_path, capsys):
    """Every unknown field in one message, in the order of the body kubectl sends (keys sorted,
    depth first), map values and list items in the path; fields under an unknown one unmentioned."""
    path = tmp_path / "cm.yaml"
    path.write_text(textwrap.dedent("""        apiVersion: v1
        kind: Pod
        metadata: {name: p, labelz: {a: b}}
        zeta: 1
        spec:
          containers:
          - {name: a, image: x, bogus: {deep: 1}}
          - {name: b, image: x, env: [{name: E, value: v, valueFrum: y}]}
          nodeSelector: {anything: goes}
        """))
    (result,) = json.loads(_run(capsys, path, "-o", "json")[1])
    assert result["status"]["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "metadata.labelz", '
        'unknown field "spec.containers[0].bogus", unknown field "spec.containers[1].env[0].valueFrum", '
        'unknown field "zeta"')
    (result,) = json.loads(_run(capsys, path, "-o", "json", "--field-validation", "Warn")[1])
    assert result["result"] == "valid" and result["warnings"] == [
        'unknown field "metadata.labelz"', 'unknown field "spec.containers[0].bogus"',
        'unknown field "spec.containers[1].env[0].valueFrum"', 'unknown field "zeta"']


def test_a_broken_file_names_its_line_the_rest_is_still_reported_and_the_exit_is_2(repository, capsys):
    broken = repository / "apps" / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n")
    code, out, err = _run(capsys, repository)
    assert code == 2
    assert err.splitlines() == [f"infergate: error: {broken}:5: invalid YAML: did not find expected ',' or ']'",
                                "note: not checked: no KubeAI config in the input (2 objects); "
                                "pass --state DIR or --kubeconfig FILE"]
    assert len(out.splitlines()) == 7 and "model.kubeai.org/llama-3-1-8b-instruct-l4 valid" in out
    assert out.splitlines()[-1] == "4 valid, 1 invalid, 1 skipped, 1 error, in 5 files"


def test_empty_input_is_an_error_unless_allowed(tmp_path, capsys, monkeypatch):
    """A pipeline that lost its manifests (an empty stdin, a directory without any) must not pass."""
    empty = ("infergate: error: validate: no documents in the input (an empty stdin or file, or no .yaml, .yml or "
             ".json file under the directories); --allow-empty accepts that\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    assert _run(capsys, tmp_path) == (2, "0 objects, in 0 files\n", empty)
    assert _run(capsys, tmp_path, "--allow-empty") == (0, "0 objects, in 0 files\n", "")
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    assert _run(capsys, tmp_path) == (2, "0 objects, in 1 file\n", empty)
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert _run(capsys, "-") == (2, "0 objects, in 1 file\n", empty)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert _run(capsys, "-", "--allow-empty") == (0, "0 objects, in 1 file\n", "")
    assert _run(capsys)[0] == 2  # no input named at all is a usage error


def test_an_old_object_no_document_matches_is_an_error(tmp_path, capsys):
    old = tmp_path / "old.yaml"
    old.write_text(VALID.read_text().replace("llama-3-1-8b-instruct-l4", "someone-else"))
    code, out, err = _run(capsys, VALID, "--old", old)
    assert code == 2
    assert err.splitlines()[0] == (f"infergate: error: {old}:{_line(old, 'apiVersion')}: --old: no document to "
                                   "validate matches Model ml-team/someone-else (kubeai.org/v1)")
    assert out.splitlines()[-1] == "1 valid, 0 invalid, 0 skipped, 1 error, in 1 file"


def test_the_state_may_be_the_inputs_themselves(tmp_path, capsys):
    """A policy reads the Namespace from the same repository as the Model it judges."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text((shipped_data.examples_dir().parent / "policies" /
                                      "production-min-replicas.yaml").read_text())
    repo = tmp_path / "repo"
    repo.mkdir()
    model = yaml.safe_load(VALID.read_text())
    model["metadata"]["namespace"] = "shop"
    model["spec"]["minReplicas"] = 0
    (repo / "model.yaml").write_text(yaml.safe_dump(model))
    (repo / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n"
                                  "  labels: {environment: production}\n---\nnot: an object\n")
    code, out, _ = _run(capsys, repo, "--state", repo, "--policies", policies)
    assert code == 1 and "Models in production namespaces keep a replica warm" in out
    assert f"{repo / 'ns.yaml'}:7: skipped not a Kubernetes object (no apiVersion and kind)" in out
    (repo / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")
    assert _run(capsys, repo, "--state", repo, "--policies", policies)[0] == 0


def test_junit_is_valid_xml_with_a_failure_for_the_denial(repository, capsys):
    (repository / "apps" / "broken.yaml").write_text("a: [\n")
    code, out, err = _run(capsys, repository, "-o", "junit")
    assert code == 2 and err.strip().splitlines()[-1] == "4 valid, 1 invalid, 1 skipped, 1 error, in 5 files"
    root = ET.fromstring(out)
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "7", "failures": "1", "errors": "1", "skipped": "1"}
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {str(repository / p) for p in ("apps/broken.yaml", "apps/web/all.yaml", "models/denied.yml",
                                                         "models/good.yaml")}
    for suite in suites.values():  # every count matches its children
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        for tag, counter in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(suite.get(counter)) == sum(1 for c in cases if c.find(tag) is not None)
    (denied,) = suites[str(repository / "models" / "denied.yml")].findall("testcase")
    failure = denied.find("failure")
    assert denied.get("name") == "Model/gemma-on-vllm" and denied.get("line") == str(_line(repository / "models" / "denied.yml", "apiVersion"))
    assert failure.get("message").startswith('The Model "gemma-on-vllm" is invalid: spec.engine: Unsupported value')
    assert suites[str(repository / "apps" / "broken.yaml")].find("testcase/error").get("message").startswith("invalid YAML")


def test_github_annotations_carry_file_and_line(repository, capsys):
    code, out, _ = _run(capsys, repository, "-o", "github")
    denied = repository / "models" / "denied.yml"
    annotations = [line for line in out.splitlines() if line.startswith("::error")]
    assert code == 1 and len(annotations) == 1
    # what the repository does not show (KubeAI's config) was not checked: a notice says so
    assert [line for line in out.splitlines() if line.startswith("::notice ")] == [
        "::notice title=infergate validate::not checked: no KubeAI config in the input (2 objects); "
        "pass --state DIR or --kubeconfig FILE"]
    assert annotations[0].startswith(f"::error file={denied},line={_line(denied, 'apiVersion')},"
                                     "title=Model/gemma-on-vllm::The Model \"gemma-on-vllm\" is invalid: ")
    assert out.splitlines()[-1] == "4 valid, 1 invalid, 1 skipped, 0 errors, in 4 files"


# SARIF 2.1.0's required structure (OASIS SARIF 2.1.0, §3.13 sarifLog, §3.14 run, §3.18 toolComponent,
# §3.27 result, §3.28 location, §3.29 physicalLocation, §3.30 region), as a JSON schema of our own
SARIF_REQUIRED = {
    "type": "object", "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"}, "$schema": {"type": "string", "format": "uri"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "rules": {"type": "array", "items": {
                        "type": "object", "required": ["id"]}}}}}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"],
                    "properties": {
                        "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": 0},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]},
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {
                                "type": "object", "required": ["artifactLocation"],
                                "properties": {"artifactLocation": {"type": "object", "required": ["uri"]},
                                               "region": {"type": "object", "properties": {
                                                   "startLine": {"type": "integer", "minimum": 1}}}}}}}},
                    }}},
            }}},
    },
}


def test_sarif_has_the_required_structure_and_points_at_the_denial(repository, capsys):
    code, out, _ = _run(capsys, repository, "-o", "sarif")
    log = json.loads(out)
    jsonschema.validate(log, SARIF_REQUIRED)
    (run,) = log["runs"]
    (result,) = [r for r in run["results"] if r["level"] == "error"]
    rules = run["tool"]["driver"]["rules"]
    # the rule of the policy that denies (policies/kubeai-model.yaml: ollama:// only with OLlama)
    assert code == 1 and rules[result["ruleIndex"]]["id"] == result["ruleId"] == "kubeai-model-engine/validations[0]"
    location = result["locations"][0]["physicalLocation"]
    denied = repository / "models" / "denied.yml"
    assert location["artifactLocation"]["uri"] == str(denied)  # outside the working directory: as given
    assert location["region"]["startLine"] == _line(denied, "apiVersion")


def test_sarif_locations_are_relative_to_the_working_directory_the_repository(repository, capsys, monkeypatch):
    monkeypatch.chdir(repository)
    code, out, _ = _run(capsys, repository / "models", "-o", "sarif")
    (result,) = [r for r in json.loads(out)["runs"][0]["results"] if r["level"] == "error"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "models/denied.yml"
