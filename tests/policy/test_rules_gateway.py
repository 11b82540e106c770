"""InferenceModel rules (docs/decisions.md, "InferenceModel / InferencePool") through the whole
chain, against the example state: pools vllm-llama3-8b and vllm-qwen3-8b in ml-team, and
InferenceModel llama-chat serving llama-3.1-8b-instruct in vllm-llama3-8b."""

import pytest

from tests.support.policy import chain, messages, request


def inference_model(name="new-chat", model_name="my-model", pool="vllm-llama3-8b", **spec):
    body = {"modelName": model_name, "poolRef": {"name": pool}, **spec}
    return {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferenceModel",
            "metadata": {"name": name, "namespace": "ml-team"}, "spec": body}


MIGRATION = "InferenceModel is removed upstream: use llm-d.ai/v1alpha2 InferenceObjective"


def run(obj, **kw):
    """The chain's answer, with the warnings of the rules under test: the migration warning every
    v1alpha1 InferenceModel admitted gets is checked once, here."""
    out = chain().run(request(obj, **kw))
    migration = [w for w in out.warnings if w.startswith(MIGRATION)]
    assert len(migration) == (1 if out.allowed else len(migration)) <= 1, out.warnings
    out.warnings = [w for w in out.warnings if w not in migration]
    return out


def test_admitted_with_crd_defaults_and_no_warnings():
    out = run(inference_model(criticality="Critical"))
    assert out.allowed and out.warnings == []
    assert out.object["spec"]["poolRef"] == {"name": "vllm-llama3-8b", "group": "inference.networking.x-k8s.io",
                                             "kind": "InferencePool"}
    assert "criticality" not in run(inference_model()).object["spec"]  # never defaulted


def test_missing_pool_is_a_warning():
    out = run(inference_model(pool="not-yet"))
    assert out.allowed
    assert out.warnings == ['spec.poolRef.name: InferencePool "not-yet" not found in namespace "ml-team" (yet): '
                            "no traffic until it exists"]


def test_pool_of_another_kind_is_not_looked_up():
    out = run(inference_model(pool="elsewhere", poolRef={"name": "elsewhere", "kind": "Backend", "group": "x.io"}))
    assert out.allowed and out.warnings == []


def test_name_in_use_warns_on_create_only():
    obj = inference_model(model_name="llama-3.1-8b-instruct")
    out = run(obj)
    assert out.allowed
    assert out.warnings == ['spec.modelName: "llama-3.1-8b-instruct" is already served in pool "vllm-llama3-8b" by '
                            '"llama-chat"']
    assert run(obj, operation="UPDATE", old=obj).warnings == []
    # the same name in another pool is no conflict
    assert run(inference_model(model_name="llama-3.1-8b-instruct", pool="vllm-qwen3-8b")).warnings == []


def test_an_update_of_the_model_itself_is_no_conflict():
    same = inference_model(name="llama-chat", model_name="llama-3.1-8b-instruct")
    assert run(same).warnings == []


@pytest.mark.parametrize(
    "targets, allowed",
    [
        ([{"name": "a", "weight": 0}, {"name": "b", "weight": 0}], False),
        ([{"name": "a", "weight": 0}, {"name": "b", "weight": 1}], True),
        ([{"name": "a"}, {"name": "b"}], True),  # no weights: an even split
        ([], True),
    ],
)
def test_zero_total_weight_is_denied(targets, allowed):
    out = run(inference_model(targetModels=targets))
    assert out.allowed is allowed
    if not allowed:
        assert out.denied_by == "webhook"
        assert messages(out) == ["spec.targetModels: Invalid value: weights [0, 0]: traffic cannot be split on a "
                                 "total weight of zero; give at least one target model a weight above 0"]


def test_criticality_default_is_denied_with_the_hint_before_the_schema():
    out = run(inference_model(criticality="Default"))
    assert not out.allowed and out.denied_by == "webhook"
    assert messages(out) == ['spec.criticality: Unsupported value: "Default": use Standard (or leave criticality unset, '
                             'which means Standard); supported values: "Critical", "Standard", "Sheddable"']
    # it is the mutating webhook that answers: the apiserver calls it before validating the schema
    result = chain().admit(request(inference_model(criticality="Default")), mutating=True)
    assert not result.allowed and "use Standard" in result.status["message"]
    # the apiserver alone gives its enum error
    alone = chain().run(request(inference_model(criticality="Default")), crd_only=True)
    assert not alone.allowed and "Unsupported value: \"Default\"" in alone.status["message"]
    assert "use Standard" not in alone.status["message"]
