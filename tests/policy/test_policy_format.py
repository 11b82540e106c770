"""The policy format: the shipped JSON schema is current, load errors point at file/line/expression,
hot reload swaps whole sets and never replaces a good set with a broken one, and the
format's features (selectors, match conditions, lookups, params, failure policy, audit
annotations, apply configurations) behave as documented."""

import json
import os
import textwrap
import time

import pytest

from tests.support.policy import chain, messages, request
from webhook import shipped_data
from webhook.policy import PolicyDirectory, PolicyLoadError, PolicySet, load_file
from webhook.policy.model import json_schema_text
from webhook.state import FileState
from tests.support.cel import EVALUATOR

HEADER = "apiVersion: policy.infergate.io/v1alpha1\nkind: AdmissionPolicy\n"


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def policy(name, body):
    return HEADER + f"metadata:\n  name: {name}\nspec:\n" + textwrap.indent(textwrap.dedent(body), "  ")


MODEL_RULES = """\
matchConstraints:
  resourceRules:
    - apiGroups: [kubeai.org]
      kinds: [Model]
"""


def kubeai_model(namespace="team", labels=None, **spec):
    meta = {"name": "m", "namespace": namespace, **({"labels": labels} if labels else {})}
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": meta,
            "spec": {"url": "hf://a/b", "engine": "VLLM", "features": ["TextGeneration"], **spec}}


def test_shipped_json_schema_is_current():
    shipped = (shipped_data.policies_dir() / "admission-policy.schema.json").read_text()
    assert shipped == json_schema_text(), (
        "regenerate: python -c 'from webhook.policy.model import json_schema_text as t; print(t(), end=\"\")' "
        "> policies/admission-policy.schema.json")
    assert json.loads(shipped)["properties"]["kind"]["const"] == "AdmissionPolicy"


def test_shipped_policies_and_the_example_policy_load():
    assert len(PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR).policies) >= 10
    assert [p.name for p in load_file(shipped_data.examples_dir().parent / "policies" / "production-min-replicas.yaml", EVALUATOR)] \
        == ["production-min-replicas"]


def test_compile_error_names_file_line_field_and_expression(tmp_path):
    file = write(tmp_path / "p.yaml", policy("bad", MODEL_RULES + """\
validations:
  - expression: object.spec.minReplicas >= 1
  - expression: "object.spec.minReplicas >="
    message: broken
"""))
    with pytest.raises(PolicyLoadError) as info:
        load_file(file, EVALUATOR)
    (problem,) = info.value.problems
    assert problem.startswith(f"{file}:12: spec.validations[1].expression: expression 'object.spec.minReplicas >=' "
                              "does not compile: ")
    assert "Syntax error" in problem or "mismatched input" in problem


@pytest.mark.parametrize(
    "body, expected",
    [
        ("matchConstraints: {resourceRules: []}\n",
         [":6: spec.matchConstraints.resourceRules: List should have at least 1 item after validation, not 0"]),
        (MODEL_RULES + "validations:\n  - expresion: x\n",
         [":11: spec.validations[0].expression: Field required",
          ":11: spec.validations[0].expresion: Extra inputs are not permitted"]),
        (MODEL_RULES + "lookups:\n  - name: x\n",
         [":11: spec.lookups[0]: Value error, exactly one of get or list is required"]),
        (MODEL_RULES + "failurePolicy: Sometimes\n", [":10: spec.failurePolicy: Input should be 'Fail' or 'Ignore'"]),
    ],
)
def test_format_errors_name_the_line(tmp_path, body, expected):
    file = write(tmp_path / "p.yaml", policy("bad", body))
    with pytest.raises(PolicyLoadError) as info:
        load_file(file, EVALUATOR)
    assert info.value.problems == [f"{file}{e}" for e in expected]


def test_not_a_policy_and_bad_yaml(tmp_path):
    file = write(tmp_path / "p.yaml", "apiVersion: v1\nkind: ConfigMap\n")
    with pytest.raises(PolicyLoadError, match=r"p.yaml:1: not an AdmissionPolicy"):
        load_file(file, EVALUATOR)
    write(file, "a: [\n")
    with pytest.raises(PolicyLoadError, match=r"p.yaml:2: invalid YAML"):
        load_file(file, EVALUATOR)


def test_duplicate_names_across_files(tmp_path):
    write(tmp_path / "a.yaml", policy("same", MODEL_RULES))
    write(tmp_path / "b.yaml", policy("same", MODEL_RULES))
    with pytest.raises(PolicyLoadError, match="policy name 'same' is also used in"):
        PolicySet.load(tmp_path, evaluator=EVALUATOR)


def _touch_later(path):
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_hot_reload_swaps_sets_and_keeps_the_last_good_one(tmp_path):
    file = write(tmp_path / "p.yaml", policy("min-one", MODEL_RULES + """\
validations:
  - expression: object.spec.?minReplicas.orValue(0) >= 1
    message: at least one
"""))
    provider = PolicyDirectory(tmp_path, EVALUATOR, builtin=False)
    first = provider.current()
    assert first.names == ["min-one"] and not provider.poll()

    write(file, policy("min-one", MODEL_RULES + "validations:\n  - expression: 'object.spec.minReplicas >='\n"))
    _touch_later(file)
    assert not provider.poll()
    assert provider.current() is first  # still enforcing
    assert "p.yaml:11: spec.validations[0].expression" in provider.error
    denied = chain(FileState(None), provider, schema=False).admit(
        request(kubeai_model(minReplicas=0)), mutating=False)
    assert messages(denied) == ["at least one"]

    write(file, policy("min-two", MODEL_RULES + "validations:\n  - expression: object.spec.minReplicas >= 2\n"))
    _touch_later(file)
    assert provider.poll() and provider.error is None
    assert provider.current().names == ["min-two"] and provider.current().generation == 1


def test_background_reload(tmp_path):
    file = write(tmp_path / "p.yaml", policy("one", MODEL_RULES))
    provider = PolicyDirectory(tmp_path, EVALUATOR, interval=0.02, builtin=False)
    provider.start()
    try:
        write(file, policy("two", MODEL_RULES))
        _touch_later(file)
        for _ in range(250):
            if provider.current().names == ["two"]:
                break
            time.sleep(0.02)
        assert provider.current().names == ["two"]
    finally:
        provider.stop()


def test_first_load_must_succeed(tmp_path):
    write(tmp_path / "p.yaml", "a: [\n")
    with pytest.raises(PolicyLoadError):
        PolicyDirectory(tmp_path, EVALUATOR)


def test_an_audit_annotation_key_the_apiserver_would_drop_is_a_load_error(tmp_path):
    # the answer's key is "<policy>.<key>", filed by the apiserver as "<webhook>/<policy>.<key>":
    # a name part over 63 characters is not a qualified name, and the apiserver drops the annotation
    name = "p" * 50
    file = write(tmp_path / "p.yaml", policy(name, MODEL_RULES + """\
auditAnnotations:
  - key: short
    valueExpression: "'x'"
  - key: a-key-of-thirteen
    valueExpression: "'x'"
"""))
    with pytest.raises(PolicyLoadError) as info:
        load_file(file, EVALUATOR)
    (problem,) = info.value.problems
    assert problem.startswith(f"{file}:13: spec.auditAnnotations[1].key: Invalid value: '{name}.a-key-of-thirteen': ")
    assert "no more than 63 characters" in problem


def _policy_set(tmp_path, body, name="p"):
    write(tmp_path / f"{name}.yaml", policy(name, body))
    return PolicySet.load(tmp_path, builtin=False, evaluator=EVALUATOR)


def test_namespace_and_object_selectors(tmp_path):
    policies = _policy_set(tmp_path, MODEL_RULES + """\
  namespaceSelector:
    matchLabels: {environment: production}
  objectSelector:
    matchExpressions: [{key: skip-policy, operator: DoesNotExist}]
validations:
  - expression: "false"
    message: matched
""")
    state = FileState(None, objects=[
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"environment": "production"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev", "labels": {"environment": "dev"}}},
    ])
    admit = chain(state, policies, schema=False).admit
    assert not admit(request(kubeai_model("prod")), mutating=False).allowed
    assert admit(request(kubeai_model("dev")), mutating=False).allowed
    assert admit(request(kubeai_model("unknown")), mutating=False).allowed
    assert admit(request(kubeai_model("prod", labels={"skip-policy": "yes"})), mutating=False).allowed


def test_match_conditions_operations_and_request_fields(tmp_path):
    policies = _policy_set(tmp_path, """\
matchConstraints:
  resourceRules:
    - apiGroups: [kubeai.org]
      kinds: [Model]
      operations: [UPDATE]
matchConditions:
  - name: not-a-robot
    expression: "!request.userInfo.username.startsWith('system:')"
validations:
  - expression: object.spec.engine == oldObject.spec.engine
    messageExpression: "'engine changed by ' + request.userInfo.username"
    reason: Forbidden
""")
    admit = chain(FileState(None), policies, schema=False).admit
    old, new = kubeai_model(), kubeai_model(engine="OLlama")
    assert admit(request(new), mutating=False).allowed  # CREATE is not matched
    denied = admit(request(new, "UPDATE", old=old), mutating=False)
    assert messages(denied) == ["engine changed by alice"] and denied.status["code"] == 403
    assert admit(request(new, "UPDATE", old=old, username="system:serviceaccount:x:y"), mutating=False).allowed


def test_failure_policy_fail_and_ignore(tmp_path):
    body = MODEL_RULES + "validations:\n  - expression: object.spec.replicas > 0\n"
    (tmp_path / "a").mkdir()
    fail = chain(FileState(None), _policy_set(tmp_path / "a", body), schema=False).admit(
        request(kubeai_model()), mutating=False)
    assert not fail.allowed and fail.status["reason"] == "InternalError" and fail.status["code"] == 500
    assert "validations[0]: expression 'object.spec.replicas > 0' resulted in error" in fail.status["message"]
    (tmp_path / "b").mkdir()
    ignore = chain(FileState(None), _policy_set(tmp_path / "b", "failurePolicy: Ignore\n" + body), schema=False).admit(
        request(kubeai_model()), mutating=False)
    assert ignore.allowed and "policy p not applied" in ignore.warnings[0]


def test_lookups_params_and_audit_annotations(tmp_path):
    policies = _policy_set(tmp_path, MODEL_RULES + """\
paramRef: {apiVersion: v1, kind: ConfigMap, name: limits, namespace: ops, dataKey: limits.yaml}
lookups:
  - name: owner
    get: {apiVersion: v1, kind: Namespace, name: request.namespace}
  - name: siblings
    list: {apiVersion: kubeai.org/v1, kind: Model, namespace: request.namespace, labelSelector: "'tier=gpu'"}
variables:
  - name: limit
    expression: "params == null ? 1 : params.maxModels"
validations:
  - expression: size(lookups.siblings) < variables.limit
    messageExpression: "'namespace ' + lookups.owner.metadata.name + ' has ' + string(size(lookups.siblings)) + ' GPU models'"
auditAnnotations:
  - key: gpu-models
    valueExpression: string(size(lookups.siblings))
  - key: never
    valueExpression: "null"
""")
    gpu = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "a", "namespace": "team",
                                                                        "labels": {"tier": "gpu"}}}
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}, gpu,
               {**gpu, "metadata": {"name": "cpu", "namespace": "team", "labels": {"tier": "cpu"}}}]
    admit = chain(FileState(None, objects=objects), policies, schema=False).admit
    denied = admit(request(kubeai_model()), mutating=False)
    assert messages(denied) == ["namespace team has 1 GPU models"]
    assert denied.audit_annotations == {"p.gpu-models": "1"}
    limits = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "ops"},
              "data": {"limits.yaml": "maxModels: 2\n"}}
    admit = chain(FileState(None, objects=objects + [limits]), policies, schema=False).admit
    assert admit(request(kubeai_model()), mutating=False).allowed


def test_params_and_lookups_of_cluster_state_alone_follow_every_change_of_the_state(tmp_path):
    """Params, and a lookup whose arguments read nothing of the request, are kept between
    reviews while the state's objects stay the same; every put and delete is seen by the
    next review."""
    from webhook.state.memory import MemoryState

    policies = _policy_set(tmp_path, MODEL_RULES + """\
paramRef: {apiVersion: v1, kind: ConfigMap, name: quota, namespace: ops}
lookups:
  - name: gpuModels
    list: {apiVersion: kubeai.org/v1, kind: Model, labelSelector: "'tier=gpu'"}
validations:
  - expression: "size(lookups.gpuModels) < (params == null ? 2 : int(params.data.max))"
    messageExpression: "string(size(lookups.gpuModels)) + ' GPU models'"
""")
    state = MemoryState()
    admit = chain(state, policies, schema=False).admit

    def gpu(name):
        return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name, "namespace": "team",
                                                                             "labels": {"tier": "gpu"}}}
    verdicts = []
    for change in (lambda: None, lambda: state.put(gpu("a")), lambda: state.put(gpu("b")),
                   lambda: state.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "quota",
                                      "namespace": "ops"}, "data": {"max": "3"}}),
                   lambda: state.delete("kubeai.org/v1", "Model", "a", "team"), lambda: None):
        change()
        for _ in range(2):  # the second review of each state reads what the first kept
            answer = admit(request(kubeai_model()), mutating=False)
            verdicts.append(answer.allowed or messages(answer)[0])
    assert verdicts == [True, True, True, True, "2 GPU models", "2 GPU models", True, True, True, True, True, True]


def test_apply_configuration_and_json_patch_mutations_compose(tmp_path):
    policies = _policy_set(tmp_path, MODEL_RULES + """\
mutations:
  - patchType: ApplyConfiguration
    expression: "{'metadata': {'annotations': {'example.com/owner': request.userInfo.username}}}"
  - patchType: JSONPatch
    expression: >-
      [{'op': 'add', 'path': '/metadata/annotations/example.com~1seen', 'value': object.metadata.annotations['example.com/owner']}]
""")
    result = chain(FileState(None), policies, schema=False).admit(request(kubeai_model()), mutating=True)
    assert result.patch == [{"op": "add", "path": "/metadata/annotations",
                             "value": {"example.com/owner": "alice", "example.com/seen": "alice"}}]
    bad = _policy_set(tmp_path, MODEL_RULES + """\
mutations:
  - patchType: JSONPatch
    expression: "[{'op': 'replace', 'path': '/spec/nothing', 'value': 'x'}]"
""", name="q")
    denied = chain(FileState(None), PolicySet(bad.policies[1:]), schema=False).admit(request(kubeai_model()), mutating=True)
    assert not denied.allowed and "q: mutations[0]: cannot apply" in denied.status["message"]
