"""Native policies as the offline commands read them: a bad ValidatingAdmissionPolicy is an error
naming file, line and field; the apiserver's type-check warnings are shown at load; what has no
answer offline (the authorizer, a namespace the state does not show) is left out and named in
the note; ``serve``'s policy set leaves native documents to the apiserver."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap
from pathlib import Path

from tests.support.cel import EVALUATOR
from webhook.cli import main
from webhook.policy import PolicySet

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: replicas}}
spec:
  failurePolicy: {failure}
  matchConstraints:
    resourceRules:
    - apiGroups: [kubeai.org]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [models]
    namespaceSelector:
      matchLabels: {{team: ml}}
  validations:
  - expression: "object.spec.?maxReplicas.orValue(0) <= 3"
    message: at most 3 replicas
  - expression: "{second}"
    message: the second rule
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: replicas}}
spec:
  policyName: replicas
  validationActions: [Deny]
"""

MODEL = """\
apiVersion: kubeai.org/v1
kind: Model
metadata: {name: llama, namespace: ml}
spec: {features: [TextGeneration], url: "hf://org/m", engine: VLLM, minReplicas: 0, maxReplicas: 5}
"""

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml, labels: {team: ml}}\n"


def validate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "-j", "1", *argv])
    return code, out.getvalue(), err.getvalue()


def setup(tmp: Path, policy: str, state: str | None = NAMESPACE) -> list[str]:
    (tmp / "policies").mkdir()
    (tmp / "policies" / "native.yaml").write_text(policy)
    (tmp / "model.yaml").write_text(MODEL)
    argv = ["--policies", str(tmp / "policies")]
    if state is not None:
        (tmp / "state").mkdir()
        (tmp / "state" / "ns.yaml").write_text(state)
        argv += ["--state", str(tmp / "state")]
    return [*argv, str(tmp / "model.yaml")]


def test_a_denial_in_the_apiservers_words(tmp_path: Path) -> None:
    code, out, _ = validate("-o", "json", *setup(tmp_path, POLICY.format(failure="Fail", second="true")))
    assert code == 1
    [result] = json.loads(out)
    message = ("ValidatingAdmissionPolicy 'replicas' with binding 'replicas' denied request: at most 3 replicas")
    assert result["status"] == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'models.kubeai.org "llama" is forbidden: {message}', "reason": "Invalid",
        "details": {"name": "llama", "group": "kubeai.org", "kind": "models", "causes": [{"message": message}]},
        "code": 422}


def test_a_bad_policy_names_file_line_and_field(tmp_path: Path) -> None:
    code, _, err = validate(*setup(tmp_path, POLICY.format(failure="Maybe", second="true")))
    assert code == 2
    assert f"{tmp_path / 'policies' / 'native.yaml'}:5: spec.failurePolicy: Unsupported value: \"Maybe\"" in err


def test_an_expression_that_does_not_compile(tmp_path: Path) -> None:
    code, _, err = validate(*setup(tmp_path, POLICY.format(failure="Fail", second="object.spec.(")))
    assert code == 2
    assert ('native.yaml:17: spec.validations[1].expression: Invalid value: "object.spec.(": compilation failed: '
            "ERROR: <input>:1:13: Syntax error: no viable alternative at input '.('") in err


def test_type_check_warnings_at_load(tmp_path: Path) -> None:
    code, _, err = validate(*setup(tmp_path, POLICY.format(failure="Fail", second="object.spec.nothere == 1")))
    assert code == 1
    assert (f"Warning: {tmp_path / 'policies' / 'native.yaml'}:17: spec.validations[1].expression: kubeai.org/v1, "
            "Kind=Model: ERROR: <input>:1:12: undefined field 'nothere'") in err


def test_the_authorizer_is_unknown_offline(tmp_path: Path) -> None:
    second = "authorizer.group('kubeai.org').resource('models').check('create').allowed()"
    policy = POLICY.format(failure="Fail", second=second).replace("at most 3 replicas", "x").replace(
        "<= 3", "<= 9")
    code, out, err = validate(*setup(tmp_path, policy))
    assert code == 0, out + err
    assert "authorizer (1 rule)" in err


def test_a_namespace_the_inputs_do_not_show_is_unknown(tmp_path: Path) -> None:
    code, out, err = validate(*setup(tmp_path, POLICY.format(failure="Fail", second="true"), state=None))
    assert code == 0, out + err
    assert "Namespace ml (1 binding)" in err


def test_serve_leaves_native_policies_to_the_apiserver(tmp_path: Path) -> None:
    (tmp_path / "native.yaml").write_text(POLICY.format(failure="Fail", second="true"))
    served = PolicySet.load(tmp_path, evaluator=EVALUATOR, builtin=False)
    assert served.policies == () and served.native is None
    offline = PolicySet.load(tmp_path, evaluator=EVALUATOR, builtin=False, native=True)
    assert [p.name for p in offline.native.policies] == ["replicas"]


def test_a_mutating_policy_the_apiserver_refuses_is_named(tmp_path: Path) -> None:
    """A MutatingAdmissionPolicy is read as the apiserver's API validation reads it: without
    mutations or a reinvocationPolicy it is refused, each field named with file and line."""
    mutating = ("apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\n"
                "metadata: {name: add-label}\nspec:\n  matchConstraints:\n    resourceRules:\n"
                "    - {apiGroups: [kubeai.org], apiVersions: [v1], operations: [CREATE, DELETE], resources: [models]}\n")
    code, _, err = validate(*setup(tmp_path, mutating))
    assert code == 2
    where = tmp_path / "policies" / "native.yaml"
    assert f"{where}:6: spec.matchConstraints.resourceRules.operations: Unsupported value: \"DELETE\": supported " \
           'values: "*", "CONNECT", "CREATE", "UPDATE"' in err
    assert f"{where}:4: spec.mutations: Required value: mutations must contain at least one item" in err
    assert f"{where}:4: spec.reinvocationPolicy: Required value" in err


def test_params_among_the_inputs(tmp_path: Path) -> None:
    """Without --state the inputs are the state: a ConfigMap among them is the params."""
    policy = POLICY.format(failure="Fail", second="object.spec.?maxReplicas.orValue(0) <= int(params.data.max)")
    policy = policy.replace("spec:\n  failurePolicy", "spec:\n  paramKind: {apiVersion: v1, kind: ConfigMap}\n"
                            "  failurePolicy").replace("validationActions: [Deny]",
                                                       "validationActions: [Deny]\n  paramRef: {name: limits, "
                                                       "parameterNotFoundAction: Deny}").replace("<= 3", "<= 9")
    argv = setup(tmp_path, policy, state=None)
    (tmp_path / "more.yaml").write_text(NAMESPACE + "---\napiVersion: v1\nkind: ConfigMap\n"
                                        "metadata: {name: limits, namespace: ml}\ndata: {max: '4'}\n")
    code, out, err = validate("-o", "json", *argv, str(tmp_path / "more.yaml"))
    assert code == 1, err
    denied = [r for r in json.loads(out) if not r["allowed"]]
    assert [r["status"]["details"]["causes"][0]["message"] for r in denied] == [
        "ValidatingAdmissionPolicy 'replicas' with binding 'replicas' denied request: the second rule"]


def test_an_apply_configuration_beyond_metadata_of_a_kind_without_merge_types_is_unknown(tmp_path: Path) -> None:
    """A built-in kind is merged by the apiserver's OpenAPI (a ConfigMap's data applied); one
    whose merge types infergate does not hold (RuntimeClass) is known only for its metadata: an
    ApplyConfiguration that sets more is left out (the object as it was) and named in the note."""
    (tmp_path / "policies").mkdir()
    rules = "resourceRules: [{apiGroups: ['', node.k8s.io], apiVersions: [v1], operations: [CREATE], " \
            "resources: [configmaps, runtimeclasses]}]"
    (tmp_path / "policies" / "map.yaml").write_text(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata: {name: data}\n"
        f"spec:\n  matchConstraints:\n    {rules}\n  reinvocationPolicy: Never\n  mutations:\n"
        "  - patchType: ApplyConfiguration\n"
        "    applyConfiguration: {expression: 'object.kind == \"ConfigMap\" ? Object{data: {\"added\": \"yes\"}} : "
        "Object{handler: \"crun\"}'}\n---\n"
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: data}\n"
        "spec: {policyName: data}\n")
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n"
                                      "data: {a: b}\n---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\n"
                                      "metadata: {name: r}\nhandler: runc\n")
    code, out, err = validate("-o", "json", "--policies", str(tmp_path / "policies"), str(tmp_path / "cm.yaml"))
    assert code == 0, err
    config_map, runtime_class = json.loads(out)
    assert config_map["allowed"] is True and config_map["object"]["data"] == {"a": "b", "added": "yes"}
    assert runtime_class["allowed"] is True and runtime_class["object"]["handler"] == "runc"
    assert "not checked: the merge types of RuntimeClass fields (an ApplyConfiguration beyond metadata) " \
           "(1 mutation)" in err
    assert "ConfigMap fields" not in err


def _reinvocation_policies(tmp: Path, reinvocation: str) -> Path:
    """Our AdmissionPolicy that defaults minReplicas (the mutating webhook, IfNeeded) and a
    MutatingAdmissionPolicy that records whether it saw minReplicas set."""
    folder = tmp / reinvocation
    folder.mkdir()
    (folder / "defaults.yaml").write_text(textwrap.dedent("""\
        apiVersion: policy.infergate.io/v1alpha1
        kind: AdmissionPolicy
        metadata: {name: defaults}
        spec:
          matchConstraints:
            resourceRules: [{apiGroups: [kubeai.org], kinds: [Model]}]
          mutations:
          - patchType: JSONPatch
            expression: >-
              !has(object.spec.minReplicas) ? [{'op': 'add', 'path': '/spec/minReplicas', 'value': dyn(0)}] : []
        """))
    (folder / "map.yaml").write_text(textwrap.dedent(f"""\
        apiVersion: admissionregistration.k8s.io/v1
        kind: MutatingAdmissionPolicy
        metadata: {{name: seen}}
        spec:
          matchConstraints:
            resourceRules: [{{apiGroups: [kubeai.org], apiVersions: [v1], operations: [CREATE], resources: [models]}}]
          reinvocationPolicy: {reinvocation}
          mutations:
          - patchType: ApplyConfiguration
            applyConfiguration:
              expression: >-
                Object{{metadata: Object.metadata{{annotations: {{"seen-min-replicas":
                has(object.spec.minReplicas) ? "yes" : "no"}}}}}}
        ---
        apiVersion: admissionregistration.k8s.io/v1
        kind: MutatingAdmissionPolicyBinding
        metadata: {{name: seen}}
        spec: {{policyName: seen}}
        """))
    return folder


def test_an_if_needed_policy_runs_again_after_our_webhook_changed_the_object(tmp_path: Path) -> None:
    """The apiserver's reinvocation (``mutating/reinvocationcontext.go``): the policy changed the
    object, so the chain makes a second pass; our webhook changed it after the policy, so an
    IfNeeded policy runs again and sees what the webhook set; a Never one does not."""
    (tmp_path / "model.yaml").write_text(MODEL.replace("minReplicas: 0, ", ""))
    seen = {}
    for reinvocation in ("IfNeeded", "Never"):
        folder = _reinvocation_policies(tmp_path, reinvocation)
        code, out, err = validate("-o", "json", "--policies", str(folder), str(tmp_path / "model.yaml"))
        assert code == 0, err
        [result] = json.loads(out)
        assert result["object"]["spec"]["minReplicas"] == 0
        seen[reinvocation] = result["object"]["metadata"]["annotations"]["seen-min-replicas"]
    assert seen == {"IfNeeded": "yes", "Never": "no"}
