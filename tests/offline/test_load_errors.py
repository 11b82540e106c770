"""Errors at load, not silence (issue #33, 4): a policy whose resourceRules name a group or kind
nothing knows (the bundled CRDs, the CRDs given, the built-in kinds) is a load error with file,
line and a did-you-mean; a policy file that holds no policy, and a --crd path that holds no CRD,
are errors; the shipped policies load as they are."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from tests.support.paths import POLICIES
from webhook.cli import main

MODEL = """\
apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: llama
spec:
  features: [TextGeneration]
  url: hf://meta-llama/Llama-3.1-8B-Instruct
  engine: VLLM
  minReplicas: 0
  maxReplicas: 3
"""

POLICY = """\
apiVersion: policy.infergate.io/v1alpha1
kind: AdmissionPolicy
metadata:
  name: pool-labels
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [{groups}]
        kinds: [{kinds}]
  validations:
    - expression: has(object.metadata.labels)
      message: label it
"""

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}}}
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def policies(tmp_path: Path, text: str, name: str = "labels.yaml") -> Path:
    directory = tmp_path / "policies"
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(text)
    return directory


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(MODEL)
    return path


@pytest.mark.parametrize("command", ["validate", "audit"])
def test_a_kind_written_as_its_plural_is_a_load_error_with_line_and_did_you_mean(tmp_path, model, command):
    directory = policies(tmp_path, POLICY.format(groups="inference.networking.k8s.io", kinds="InferencePools"))
    code, out, err = cli(command, "--policies", str(directory), str(model))
    assert code == 2 and out == "", out + err
    assert err == (f"infergate: error: --policies: {directory / 'labels.yaml'}:9: "
                   "spec.matchConstraints.resourceRules[0].kinds[0]: no kind InferencePools is known in "
                   "'inference.networking.k8s.io' (neither the bundled CRDs, the loaded CRDs nor the built-in "
                   "kinds name it); did you mean InferencePool?\n")


def test_a_group_typo_is_a_load_error_naming_the_group_meant(tmp_path, model):
    directory = policies(tmp_path, POLICY.format(groups="inference.networking.k8s.io, llm-d.io",
                                                 kinds="InferencePool, InferenceObjective"))
    code, out, err = cli("validate", "--policies", str(directory), str(model))
    assert code == 2, out + err
    assert f"{directory / 'labels.yaml'}:8: spec.matchConstraints.resourceRules[0].apiGroups[1]: " \
           "no API group 'llm-d.io' is known" in err and "did you mean llm-d.ai?" in err, err


def test_a_kind_of_another_group_names_the_group_it_is_of(tmp_path, model):
    directory = policies(tmp_path, POLICY.format(groups="inference.networking.k8s.io", kinds="Model"))
    code, out, err = cli("validate", "--policies", str(directory), str(model))
    assert code == 2, out + err
    assert "resourceRules[0].kinds[0]: no kind Model in 'inference.networking.k8s.io': Model is of 'kubeai.org'" \
        in err, err


def test_built_in_kinds_and_wildcards_load(tmp_path, model):
    text = "\n---\n".join([
        POLICY.format(groups='""', kinds="ConfigMap, Service"),
        POLICY.replace("pool-labels", "apps-labels").format(groups="apps", kinds="Deployment, StatefulSet"),
        POLICY.replace("pool-labels", "any-labels").format(groups='"*"', kinds="Model"),
        POLICY.replace("pool-labels", "kubeai-any").format(groups="kubeai.org", kinds='"*"'),
    ])
    directory = policies(tmp_path, text)
    code, out, err = cli("validate", "--policies", str(directory), str(model))
    assert code == 1, out + err  # loaded: the Model without labels is denied by any-labels
    assert "label it" in out + err


def test_a_kind_of_a_crd_given_with_crd_loads(tmp_path, model):
    crd = tmp_path / "widget-crd.yaml"
    crd.write_text(WIDGET_CRD)
    directory = policies(tmp_path, POLICY.format(groups="example.com", kinds="Widget"))
    code, out, err = cli("validate", "--policies", str(directory), str(model))
    assert code == 2 and "no API group 'example.com' is known" in err, out + err
    code, out, err = cli("validate", "--policies", str(directory), "--crd", str(crd), str(model))
    assert code == 0, out + err


def test_the_shipped_policies_load_with_any_crd_given(tmp_path, model):
    crd = tmp_path / "widget-crd.yaml"
    crd.write_text(WIDGET_CRD)
    for command in ("validate", "audit"):
        code, out, err = cli(command, "--policies", str(POLICIES), "--crd", str(crd), str(model))
        assert code == 0, (command, out, err)


@pytest.mark.parametrize("text, holds", [
    ("# policies go here\n", "it holds no Kubernetes object"),
    (MODEL, "it holds Model"),
])
@pytest.mark.parametrize("command", ["validate", "audit"])
def test_crd_path_holding_no_crd_is_an_error(tmp_path, model, command, text, holds):
    given = tmp_path / "not-a-crd.yaml"
    given.write_text(text)
    code, out, err = cli(command, "--crd", str(given), str(model))
    assert code == 2, out + err
    assert err == f"infergate: error: --crd: {given}: no CustomResourceDefinition in it ({holds})\n"


@pytest.mark.parametrize("command", ["validate", "audit"])
def test_a_policy_file_holding_no_policy_is_an_error(tmp_path, model, command):
    directory = policies(tmp_path, "# TODO: the pool policies\n", "pools.yaml")
    code, out, err = cli(command, "--policies", str(directory), str(model))
    assert code == 2, out + err
    assert err == (f"infergate: error: --policies: {directory / 'pools.yaml'}: no AdmissionPolicy "
                   "(policy.infergate.io/v1alpha1) and no ValidatingAdmissionPolicy, MutatingAdmissionPolicy or "
                   "binding (admissionregistration.k8s.io) in the file\n")


def test_a_policy_file_of_suites_beside_the_policies_is_fine(tmp_path, model):
    directory = policies(tmp_path, POLICY.format(groups="kubeai.org", kinds="Model"))
    (directory / "tests").mkdir()
    (directory / "tests" / "labels.yaml").write_text(
        "apiVersion: policy.infergate.io/v1alpha1\nkind: PolicySuite\nmetadata: {name: labels}\ncases: []\n")
    code, out, err = cli("validate", "--policies", str(directory), str(model))
    assert code == 1 and "label it" in out + err, out + err
