"""``infergate validate`` and ``infergate test`` end to end, through the real command."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

from webhook.cli import main
from tests.support.paths import KUBEAI_V0_12_CRD, LEGACY_CRDS


GOOD = """\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: good
spec:
  features: [TextGeneration]
  url: hf://org/model
  engine: VLLM
  resourceProfile: cpu:1
"""
BAD = """\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: bad
spec:
  features: [TextGeneration]
  url: hf://org/model
  engine: Nope
  bogus: 1
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_validate_valid_manifest(tmp_path, capsys):
    path = _write(tmp_path, "good.yaml", GOOD)
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{path}:1: model.kubeai.org/good valid",
                                                    "1 valid, 0 invalid, 0 skipped, 0 errors, in 1 file"]
    assert main(["validate", "-f", str(path)]) == 0  # kubectl's spelling, kept as an alias


def test_validate_reports_like_kubectl(tmp_path, capsys):
    path = _write(tmp_path, "all.yaml", GOOD + "---\n" + BAD)
    bad_line = GOOD.count("\n") + 2
    assert main(["validate", "-f", str(path)]) == 1  # Strict, kubectl's default: refused at decoding
    out = capsys.readouterr()
    assert out.err.startswith("note: not checked: no KubeAI config in the input")  # (no --state)
    assert out.out.splitlines() == [
        f"{path}:1: model.kubeai.org/good valid",
        f'{path}:{bad_line}: Error from server (BadRequest): Model in version "v1" cannot be handled as a Model: '
        'strict decoding error: unknown field "spec.bogus"',
        "1 valid, 1 invalid, 0 skipped, 0 errors, in 1 file",
    ]
    assert main(["validate", "-f", str(path), "--field-validation", "Warn"]) == 1
    out = capsys.readouterr()
    assert f'Warning: {path}:{bad_line}: unknown field "spec.bogus"' in out.err
    assert out.out.splitlines() == [
        f"{path}:1: model.kubeai.org/good valid",
        f'{path}:{bad_line}: The Model "bad" is invalid: ',
        '* spec.engine: Unsupported value: "Nope": supported values: "OLlama", "VLLM", "FasterWhisper", "Infinity"',
        "* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
        "correct the existing errors to complete validation",
        "1 valid, 1 invalid, 0 skipped, 0 errors, in 1 file",
    ]


def test_validate_json_output(tmp_path, capsys):
    path = _write(tmp_path, "all.yaml", GOOD + "---\n" + BAD)
    assert main(["validate", "-f", str(path), "-o", "json", "--crd-only", "--crd", str(KUBEAI_V0_12_CRD),
                 "--field-validation", "Warn"]) == 1
    out = capsys.readouterr()
    answers = json.loads(out.out)
    assert [a["allowed"] for a in answers] == [True, False]
    assert [a["result"] for a in answers] == ["valid", "invalid"]
    assert set(answers[0]) == {"source", "result", "allowed", "status", "warnings", "object"}
    assert answers[0]["source"] == {"file": str(path), "line": 1, "index": 0}
    assert answers[1]["source"] == {"file": str(path), "line": GOOD.count("\n") + 2, "index": 1}
    assert out.err.strip().splitlines()[-1] == "1 valid, 1 invalid, 0 skipped, 0 errors, in 1 file"
    assert answers[0]["object"]["spec"]["targetRequests"] == 100  # the CRD's default
    assert answers[0]["object"]["metadata"]["namespace"] == "default"
    assert answers[1]["status"]["code"] == 422 and answers[1]["warnings"] == ['unknown field "spec.bogus"']


def test_validate_update_and_status(tmp_path, capsys):
    old = _write(tmp_path, "old.yaml", GOOD)
    new = _write(tmp_path, "new.yaml", GOOD.replace("hf://org/model", "hf://org/other"))
    assert main(["validate", "-f", str(new), "--old", str(old), "--kubeai-crd", "v0.12.0"]) == 1
    assert 'spec.url: Invalid value: "hf://org/other": url is immutable.' in capsys.readouterr().out
    status = _write(tmp_path, "status.yaml", GOOD + "status:\n  replicas: {all: 2, ready: 1}\n")
    assert main(["validate", "-f", str(status), "--old", str(old), "--subresource", "status", "-o", "yaml"]) == 0
    (answer,) = yaml.safe_load(capsys.readouterr().out)
    assert answer["object"]["status"] == {"replicas": {"all": 2, "ready": 1}}


def test_validate_input_errors_exit_2(tmp_path, capsys):
    broken = _write(tmp_path, "broken.yaml", "apiVersion: v1\nkind: [\n")
    assert main(["validate", "-f", str(broken)]) == 2
    assert f"infergate: error: {broken}:3: invalid YAML" in capsys.readouterr().err
    widget = _write(tmp_path, "widget.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x}\n")
    assert main(["validate", "-f", str(widget)]) == 0  # skipped, and counted
    assert "1 skipped" in capsys.readouterr().out
    assert main(["validate", "-f", str(widget), "--strict"]) == 2
    assert f"infergate: error: {widget}:1: Widget/x (example.com/v1): no schema for this kind\n" in \
        capsys.readouterr().err
    assert main(["validate", "-f", str(tmp_path / "missing.yaml")]) == 2
    assert f"infergate: error: {tmp_path / 'missing.yaml'}: no such file or directory" in capsys.readouterr().err


SUITE = """\
suite: tiny
crds: [{crd}]
cases:
- name: ok
  operation: CREATE
  object: {{apiVersion: kubeai.org/v1, kind: Model, metadata: {{name: m, namespace: d}},
           spec: {{features: [TextGeneration], url: "hf://a/b", engine: VLLM}}}}
  expect: {{allowed: true, code: 201}}
- name: wrong-expectation
  operation: CREATE
  object: {{apiVersion: kubeai.org/v1, kind: Model, metadata: {{name: m, namespace: d}},
           spec: {{features: [TextGeneration], url: "hf://a/b", engine: VLLM}}}}
  expect:
    allowed: false
    code: 422
    errors: ["spec.engine: Required value"]
"""


def test_test_command_reports_each_failure_and_a_summary(tmp_path, capsys):
    suite = _write(tmp_path, "suite.yaml", SUITE.format(crd=KUBEAI_V0_12_CRD))
    assert main(["test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {suite}:9: wrong-expectation" in out  # the line its case starts on
    assert "errors: missing  spec.engine: Required value" in out
    assert out.strip().splitlines()[-1] == "1 passed, 1 failed"
    assert main(["test", str(suite), "--crd", str(LEGACY_CRDS)]) == 1


def test_test_command_on_a_broken_suite_is_an_input_error(tmp_path, capsys):
    bad = _write(tmp_path, "bad.yaml", "suite: x\ncases: [\n")
    assert main(["test", str(tmp_path)]) == 2
    assert f"infergate: error: {bad}:3: invalid YAML" in capsys.readouterr().err


def test_validate_expands_lists_and_reads_stdin(tmp_path, capsys, monkeypatch):
    import io

    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(GOOD)]})
    monkeypatch.setattr("sys.stdin", io.StringIO(listed))
    assert main(["validate", "-"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "-:1: model.kubeai.org/good valid"


def test_manifest_yaml_keeps_timestamps_as_text():
    from webhook.documents import parse

    (doc,) = parse("when: 2024-01-01T00:00:00Z\nday: 2024-06-02\nflag: yes\n", "x.yaml").documents
    assert doc.content == {"when": "2024-01-01T00:00:00Z", "day": "2024-06-02", "flag": True}


def test_test_command_skips_other_yaml_in_directories_but_not_an_empty_run(tmp_path, capsys):
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "crd.yaml").write_text(KUBEAI_V0_12_CRD.read_text())
    assert main(["test", str(tmp_path)]) == 2
    assert "no suite files" in capsys.readouterr().err
    one_case = SUITE.format(crd="crds/crd.yaml").split("- name: wrong-expectation")[0]
    _write(tmp_path, "suite.yaml", one_case)
    assert main(["test", str(tmp_path), "-q"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1 passed, 0 failed"


def test_test_command_runs_crd_admission_probes(tmp_path, capsys):
    crd = yaml.safe_load(KUBEAI_V0_12_CRD.read_text())
    broken = json.loads(json.dumps(crd))
    spec_schema = broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"]["bad"] = {"type": "array"}
    probes = {"suite": "probes", "probes": [
        {"name": "shipped-accepted", "kind": "crd-accepted", "crd": crd, "expect": {"code": 201, "warnings": []}},
        {"name": "array-without-items", "kind": "crd-rejection", "crd": broken, "expect": {"code": 422, "errors": [
            "spec.validation.openAPIV3Schema.properties[spec].properties[bad].items: Required value: must be specified"
        ]}},
    ]}
    (tmp_path / "probes.yaml").write_text(yaml.safe_dump(probes))
    assert main(["test", str(tmp_path / "probes.yaml")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "2 passed, 0 failed"


def test_generated_names_match_any_generated_name(tmp_path, capsys):
    suite = {"suite": "gen", "crds": [str(KUBEAI_V0_12_CRD)], "cases": [{
        "name": "generated", "operation": "CREATE",
        "object": {"apiVersion": "kubeai.org/v1", "kind": "Model",
                   "metadata": {"generateName": "m-", "namespace": "d"},
                   "spec": {"features": ["TextGeneration"], "url": "hf://a/b", "engine": "VLLM"}},
        "expect": {"allowed": True, "code": 201, "stored": {
            "apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m-x7k2p", "namespace": "d"},
            "spec": {"features": ["TextGeneration"], "url": "hf://a/b", "engine": "VLLM",
                     "targetRequests": 100, "scaleDownDelaySeconds": 30}}}}]}
    (tmp_path / "gen.yaml").write_text(yaml.safe_dump(suite))
    assert main(["test", str(tmp_path / "gen.yaml"), "-q"]) == 0
    suite["cases"][0]["expect"]["stored"]["metadata"]["name"] = "other-x7k2p"
    (tmp_path / "gen.yaml").write_text(yaml.safe_dump(suite))
    assert main(["test", str(tmp_path / "gen.yaml"), "-q"]) == 1
    assert "stored.metadata.name" in capsys.readouterr().out


def test_validate_refuses_crds_the_apiserver_would_refuse(tmp_path, capsys):
    crd = yaml.safe_load(KUBEAI_V0_12_CRD.read_text())
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["bad"] = {
        "type": "array"}
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    good = tmp_path / "manifests"
    good.mkdir()
    _write(good, "good.yaml", GOOD)
    assert main(["validate", "-f", str(good), "--crd", str(tmp_path / "crd.yaml"), "--crd-only"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"infergate: error: --crd: {tmp_path / 'crd.yaml'}:1: ")
    assert 'CustomResourceDefinition.apiextensions.k8s.io "models.kubeai.org" is invalid: ' in err
    assert "properties[bad].items: Required value: must be specified" in err


def test_the_current_kubeai_model_crd_is_the_default_and_v0_12_0_is_selectable(tmp_path, capsys):
    """KubeAI's Model is one kind with two schemas: oci:// URLs came after v0.12.0."""
    path = _write(tmp_path, "oci.yaml", GOOD.replace("hf://org/model", "oci://registry.example/model:1"))
    assert main(["validate", "-f", str(path), "--crd-only"]) == 0
    assert main(["validate", "-f", str(path), "--crd-only", "--kubeai-crd", "v0.12.0"]) == 1
    assert 'url must start with "hf://"' in capsys.readouterr().out
