"""``infergate validate`` for CI: GitHub annotations for errors and warnings, SARIF with
warnings and a rule per policy rule (and per apiserver problem), ``--exclude``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from webhook import shipped_data
from webhook.cli import main

MANIFESTS = shipped_data.examples_dir().parent / "manifests"
WARNED = MANIFESTS / "valid" / "inferencepool.yaml"  # v1alpha1: removed upstream, a warning
DENIED = MANIFESTS / "denied-by-webhook" / "kubeai-model-ollama-url-with-vllm.yaml"
SCHEMA_INVALID = textwrap.dedent("""\
    apiVersion: kubeai.org/v1
    kind: Model
    metadata: {name: bad-engine}
    spec: {features: [TextGeneration], url: "hf://org/model", engine: Nope, resourceProfile: "cpu:1"}
    ---
    apiVersion: kubeai.org/v1
    kind: Model
    metadata: {name: unknown-field}
    spec: {features: [TextGeneration], url: "hf://org/model", engine: VLLM, resourceProfile: "cpu:1", bogus: 1}
    """)


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["validate", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(text))


@pytest.fixture
def repository(tmp_path) -> Path:
    (tmp_path / "warned.yaml").write_text(WARNED.read_text())
    (tmp_path / "denied.yaml").write_text(DENIED.read_text())
    (tmp_path / "schema.yaml").write_text(SCHEMA_INVALID)
    return tmp_path


def test_github_annotations_are_errors_and_warnings_with_file_and_line(repository, capsys):
    code, out, _ = _run(capsys, repository, "-o", "github")
    annotations = [line for line in out.splitlines() if line.startswith("::")]
    warned, denied = repository / "warned.yaml", repository / "denied.yaml"
    assert code == 1
    warnings = [a for a in annotations if a.startswith("::warning ")]
    assert warnings and all(a.startswith(f"::warning file={warned},line={_line(warned, 'apiVersion')},title=") for a in warnings)
    assert "title=InferencePool/vllm-mistral-7b (removed-api-versions/warnings[0])::InferencePool v1alpha1 is removed" \
        in warnings[0]
    errors = [a for a in annotations if a.startswith("::error ")]
    assert len(errors) == 3  # the denied Model, the invalid engine, the unknown field
    assert errors[0].startswith(f"::error file={denied},line={_line(denied, 'apiVersion')},title=Model/gemma-on-vllm::")


def test_sarif_carries_warnings_and_a_rule_per_policy_rule_and_apiserver_problem(repository, capsys, monkeypatch):
    monkeypatch.chdir(repository)
    code, out, _ = _run(capsys, ".", "-o", "sarif")
    (run,) = json.loads(out)["runs"]
    rules = run["tool"]["driver"]["rules"]
    by_rule = {}
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]  # every rule listed in the driver
        by_rule.setdefault(result["ruleId"], []).append(result)
    assert code == 1
    (ollama,) = by_rule["kubeai-model-engine/validations[0]"]
    assert ollama["level"] == "error" and ollama["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "denied.yaml"
    (removed,) = by_rule["removed-api-versions/warnings[0]"]
    assert removed["level"] == "warning" and removed["message"]["text"].startswith(
        "InferencePool/vllm-mistral-7b: InferencePool v1alpha1 is removed upstream")
    (engine,) = by_rule["kube-apiserver/FieldValueNotSupported"]
    assert engine["level"] == "error" and engine["message"]["text"].startswith(
        'Model/bad-engine: spec.engine: Unsupported value: "Nope"')
    (unknown,) = by_rule["kube-apiserver/unknown-field"]
    assert unknown["level"] == "error" and unknown["message"]["text"].endswith(
        'strict decoding error: unknown field "spec.bogus"')
    descriptions = {rule["id"]: rule["shortDescription"]["text"] for rule in rules}
    assert descriptions["kubeai-model-engine/validations[0]"] == "Admission policy kubeai-model-engine, rule validations[0]"
    # under Warn the unknown field is a warning of its own rule
    code, out, _ = _run(capsys, "schema.yaml", "-o", "sarif", "--field-validation", "Warn")
    results = json.loads(out)["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results if "bogus" in r["message"]["text"]] == [
        ("kube-apiserver/unknown-field", "warning")]


def test_exclude_leaves_out_files_and_directories_under_a_directory(tmp_path, capsys):
    good = MANIFESTS / "valid" / "kubeai-model-vllm.yaml"
    for where in ("apps/model.yaml", "charts/app/templates/deploy.yaml", "apps/model.tpl.yaml", "vendor/x/model.yaml"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text("{{ .Values.broken\n" if "templates" in where or ".tpl." in where
                                      else good.read_text())
    code, out, _ = _run(capsys, tmp_path, "--exclude", "charts/*/templates/*", "--exclude", "*.tpl.yaml",
                        "--exclude", "vendor")
    assert code == 0 and out.splitlines() == [f"{tmp_path}/apps/model.yaml:{_line(good, 'apiVersion')}: "
                                              "model.kubeai.org/llama-3-1-8b-instruct-l4 valid",
                                              "1 valid, 0 invalid, 0 skipped, 0 errors, in 1 file"]
    named = tmp_path / "apps" / "model.tpl.yaml"  # a file named itself is read
    code, _, err = _run(capsys, named, "--exclude", "*.tpl.yaml")
    assert code == 2 and str(named) in err


def test_exclude_with_a_trailing_slash_leaves_out_the_directory_only(tmp_path, capsys):
    good = MANIFESTS / "valid" / "kubeai-model-vllm.yaml"
    for where in ("apps/model.yaml", "vendor/lib/model.yaml", "charts/app/model.yaml", "apps/vendor"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    for where in ("apps/model.yaml", "vendor/lib/model.yaml", "charts/app/model.yaml"):
        (tmp_path / where).write_text("{{ broken\n" if not where.startswith("apps/") else good.read_text())
    (tmp_path / "apps" / "vendor.yaml").write_text(good.read_text())  # a file: "vendor.yaml/" names no directory
    for patterns in (["vendor/", "charts/app/"], ["./vendor/", "./charts/app/"], ["vendor", "charts/app"]):
        code, out, err = _run(capsys, tmp_path, *[a for p in patterns for a in ("--exclude", p)])
        assert code == 0, (patterns, err)
        assert out.splitlines()[-1] == "2 valid, 0 invalid, 0 skipped, 0 errors, in 2 files", patterns
    code, out, _ = _run(capsys, tmp_path / "apps", "--exclude", "vendor.yaml/")
    assert code == 0 and out.splitlines()[-1] == "2 valid, 0 invalid, 0 skipped, 0 errors, in 2 files"
