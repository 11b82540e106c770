"""InferenceServiceClass / InferenceService rules (docs/decisions.md; docs/design.md, "Admission of an order"),
through the whole chain. Every test runs twice: with the cluster state read from files and
from the watch cache fed by a fake apiserver, so the policies' lookups go through both."""

from __future__ import annotations

import pytest

from tests.support.policy import chain, messages, patched
from tests.support.policy import request as review
from tests.support.state import example, make_state  # noqa: F401 - fixtures

AI = "ai.deckhouse.io/v1alpha1"


def isc(name, default=False, **spec):
    meta = {"name": name}
    if default:
        meta["annotations"] = {"ai.deckhouse.io/is-default-class": "true"}
    body = {"exposurePolicy": {"type": "ClusterLocal", "authentication": "Token"}, **spec}
    return {"apiVersion": AI, "kind": "InferenceServiceClass", "metadata": meta, "spec": body}


def order(name="svc", namespace="hardfest-demo", cls="a30-shared", model=None, **spec):
    body = {"model": model or {"src": "ai-models", "ref": {"kind": "Model", "name": "qwen3-embedding-4b-w4a16"}}, **spec}
    if cls is not None:
        body["inferenceServiceClassName"] = cls
    return {"apiVersion": AI, "kind": "InferenceService", "metadata": {"name": name, "namespace": namespace},
            "spec": body}


def hf(name="meta-llama/Llama-3.1-8B-Instruct", **model):
    return {"src": "HuggingFace", "ref": {"name": name}, **model}


def catalog(kind, name, **ref):
    return {"src": "ai-models", "ref": {"kind": kind, "name": name, **ref}}


# -- defaults -------------------------------------------------------------------------------
async def test_worked_example_is_admitted_with_latency(example):
    obj = order(resources={"accelerator": {"deviceClasses": ["nvidia-a30-mig-2g12-mps", "nvidia-h100-physical"]}})
    out = chain(example).run(review(obj))
    assert out.allowed, out.status
    assert out.patch == [{"op": "add", "path": "/spec/launchStrategy", "value": "Latency"}]
    assert patched(obj, out.patch)["spec"]["launchStrategy"] == "Latency" == out.object["spec"]["launchStrategy"]


async def test_missing_class_name_is_the_default_class(example):
    obj = order(cls=None, namespace="sandbox", model=hf(), launchStrategy="Throughput")
    result = chain(example).admit(review(obj), mutating=True)
    assert result.allowed
    assert result.patch == [{"op": "add", "path": "/spec/inferenceServiceClassName", "value": "general"}]
    assert patched(obj, result.patch)["spec"]["inferenceServiceClassName"] == "general"
    assert chain(example).run(review(obj)).allowed


async def test_update_without_class_name_keeps_the_stored_one(example):
    old = order(namespace="sandbox", cls="l4-timeslicing", model=hf(), launchStrategy="Latency")
    new = order(namespace="sandbox", cls=None, model=hf(), launchStrategy="Latency")
    result = chain(example).admit(review(new, "UPDATE", old=old), mutating=True)
    assert result.patch == [{"op": "add", "path": "/spec/inferenceServiceClassName", "value": "l4-timeslicing"}]


async def test_no_default_class_is_denied_naming_the_classes(make_state):
    state = await make_state([isc("b"), isc("a")])
    out = chain(state).run(review(order(cls=None, model=hf(), namespace="x")))
    assert not out.allowed and "inferenceServiceClassName" not in str(out.patch)
    assert messages(out) == ['spec.inferenceServiceClassName: Required value: no InferenceServiceClass is annotated '
                             'ai.deckhouse.io/is-default-class: "true", so the order must name its class; classes: a, b']


async def test_several_default_classes_are_denied(make_state):
    state = await make_state([isc("one", default=True), isc("two", default=True)])
    out = chain(state).run(review(order(cls=None, model=hf(), namespace="x")))
    assert messages(out) == ["spec.inferenceServiceClassName: Required value: several InferenceServiceClasses are "
                             "annotated as the default (one, two), so the order must name its class; name one of them"]


async def test_auth_secret_key_defaults_to_token(example):
    obj = order(namespace="ml-team", cls="l4-timeslicing", model=hf(authSecretRef={"name": "hf-token"}),
                launchStrategy="Balance")
    out = chain(example).run(review(obj))
    assert out.allowed, out.status
    assert out.patch == [{"op": "add", "path": "/spec/model/authSecretRef/key", "value": "token"}]
    kept = order(namespace="ml-team", cls="l4-timeslicing", model=hf(authSecretRef={"name": "x", "key": "HF_TOKEN"}),
                 launchStrategy="Balance")
    assert chain(example).run(review(kept)).patch == []


# -- immutability -----------------------------------------------------------------------------
async def test_class_and_source_are_immutable(example):
    old = order(namespace="sandbox", cls="l4-timeslicing", model=hf(), launchStrategy="Latency")
    moved = order(namespace="sandbox", cls="general", model=catalog("ClusterModel", "qwen3-8b"), launchStrategy="Latency")
    webhook_only = chain(example, schema=False).admit(review(moved, "UPDATE", old=old), mutating=False)
    assert messages(webhook_only) == [
        'spec.inferenceServiceClassName: Invalid value: "general": field is immutable (it is "l4-timeslicing"); '
        'keep "l4-timeslicing" or create a new InferenceService',
        'spec.model.src: Invalid value: "ai-models": field is immutable (it is "HuggingFace"); '
        'keep "HuggingFace" or create a new InferenceService',
    ]
    # the CRD's transition rules deny it too (the apiserver answers before the validating webhook)
    out = chain(example).run(review(moved, "UPDATE", old=old))
    assert not out.allowed and out.denied_by == "apiserver" and "immutable" in out.status["message"]
    same = chain(example).run(review(old, "UPDATE", old=old))
    assert same.allowed


# -- the class: namespaces, devices --------------------------------------------------------------
async def test_namespace_not_admitted_by_the_class(example):
    out = chain(example).run(review(order(namespace="ml-team")))
    assert not out.allowed
    assert out.status["code"] == 403 and out.status["reason"] == "Forbidden"
    assert messages(out) == ['spec.inferenceServiceClassName: Forbidden: class "a30-shared" does not admit orders '
                             'from namespace "ml-team"; allowed namespaces: hardfest-demo']
    assert chain(example).run(review(order(namespace="anywhere", cls="h100-dedicated",
                                            model=catalog("ClusterModel", "qwen3-8b")))).allowed


async def test_empty_device_class_intersection_is_claim_device_missing(example):
    obj = order(resources={"accelerator": {"deviceClasses": ["nvidia-h100-physical"]}})
    out = chain(example).run(review(obj))
    assert not out.allowed and out.status["reason"] == "ClaimDeviceMissing"
    assert out.status["details"]["causes"][0] == {
        "reason": "ClaimDeviceMissing", "field": "spec.resources.accelerator.deviceClasses",
        "message": 'ClaimDeviceMissing: [nvidia-h100-physical] has no '
                   'DeviceClass in common with class "a30-shared" (allowedDeviceClasses: nvidia-a30-mig-2g12-mps, '
                   'nvidia-a30-mig-2g12); name at least one of those'}


async def test_class_without_device_list_takes_any_existing_device_class(example):
    obj = order(namespace="sandbox", cls="general", model=hf(),
                resources={"accelerator": {"deviceClasses": ["nvidia-h100-physical", "gpu-from-the-future"]}})
    out = chain(example).run(review(obj))
    assert out.allowed
    assert 'spec.resources.accelerator.deviceClasses: "gpu-from-the-future" not found (yet)' in out.warnings


async def test_class_not_found_is_a_warning(example):
    out = chain(example).run(review(order(cls="later", model=hf())))
    assert out.allowed
    assert 'spec.inferenceServiceClassName: class "later" not found (yet): the order waits for it' in out.warnings


async def test_model_reference_namespace_must_be_the_orders(example):
    obj = order(namespace="sandbox", cls="general",
                model=catalog("Model", "qwen3-embedding-4b-w4a16", namespace="hardfest-demo"))
    out = chain(example).run(review(obj))
    assert messages(out) == ['spec.model.ref.namespace: Invalid value: "hardfest-demo": a Model reference may only name '
                             "the order's own namespace \"sandbox\"; remove ref.namespace or use a ClusterModel"]
    same = order(model=catalog("Model", "qwen3-embedding-4b-w4a16", namespace="hardfest-demo"))
    assert chain(example).run(review(same)).allowed


# -- model-policy facts ---------------------------------------------------------------------------
async def test_format_not_allowed(example):
    out = chain(example).run(review(order(model=catalog("Model", "gemma-3-4b-gguf"))))
    assert not out.allowed
    assert messages(out) == ['spec.model.ref: Model "gemma-3-4b-gguf" has format "GGUF" (catalog fact), which class '
                             '"a30-shared" does not allow; allowed formats: Safetensors']
    assert out.status["details"]["causes"][0]["reason"] == "FormatNotAllowed"


async def test_endpoint_type_not_allowed(example):
    out = chain(example).run(review(order(model=catalog("ClusterModel", "whisper-large-v3"))))
    assert messages(out) == ['spec.model.ref: ClusterModel "whisper-large-v3" serves SpeechToText (catalog fact), none '
                             'of which class "a30-shared" allows; allowed endpoint types: Embeddings, Rerank']


async def test_catalog_parameter_count_compared_exactly(example):
    out = chain(example).run(review(order(namespace="ml-team", cls="l4-timeslicing",
                                           model=catalog("ClusterModel", "llama-3-3-70b-instruct"))))
    assert messages(out) == ['spec.model.ref: ClusterModel "llama-3-3-70b-instruct" has 70553706496 parameters '
                             '(catalog fact), more than maxParameterCount 9B (9000000000) of class "l4-timeslicing": '
                             "choose a model of at most 9B parameters or a class that allows more"]
    assert out.status["details"]["causes"][0]["reason"] == "ParameterCountExceeded"
    # Qwen3-8B has 8190735360 parameters: within 9B, strictly above 8B (docs/design.md, "Parameter counts": no rounding)
    assert chain(example).run(review(order(namespace="ml-team", cls="l4-timeslicing",
                                            model=catalog("ClusterModel", "qwen3-8b")))).allowed
    strict = chain(example).run(review(order(cls="a30-shared", model=catalog("ClusterModel", "qwen3-8b"))))
    assert any("has 8190735360 parameters" in m and "8B (8000000000)" in m for m in messages(strict))


async def test_unknown_catalog_facts_are_warnings(example):
    out = chain(example).run(review(order(cls="h100-dedicated", model=catalog("Model", "gemma-3-4b-gguf"),
                                           namespace="hardfest-demo")))
    assert not out.allowed  # GGUF is not allowed there either
    assert 'spec.model.ref: Model "gemma-3-4b-gguf" publishes no parameterCount: maxParameterCount 72B cannot be ' \
           "checked yet" in out.warnings
    assert 'spec.model.ref: Model "gemma-3-4b-gguf" publishes no endpoint types: allowedEndpointTypes cannot be ' \
           "checked yet" in out.warnings
    missing = chain(example).run(review(order(model=catalog("Model", "not-published"))))
    assert missing.allowed
    assert missing.warnings == ['spec.model.ref: Model "not-published" not found in the ai-models catalog (yet): the '
                                "order waits for it"]


@pytest.mark.parametrize(
    "limit, given, allowed",
    [("9B", "9B", True), ("9B", "9.5B", False), ("9B", "500M", True), ("1.5B", "1500M", True),
     ("1.5B", "1.500000001B", False), ("500M", "0.5B", True), ("500M", "500.000001M", False)],
)
async def test_huggingface_parameter_count_against_the_limit(make_state, limit, given, allowed):
    state = await make_state([isc("small", modelPolicy={"allowedEndpointTypes": ["Chat"], "maxParameterCount": limit})])
    out = chain(state).run(review(order(namespace="x", cls="small", model=hf(parameterCount=given))))
    assert out.allowed is allowed, out.status
    if not allowed:
        assert messages(out)[0].startswith(f'spec.model.parameterCount: Invalid value: "{given}": more than '
                                           f'maxParameterCount {limit} (')
        assert messages(out)[0].endswith(f'of class "small": at most {limit} is accepted')


async def test_huggingface_without_parameter_count_warns(example):
    out = chain(example).run(review(order(namespace="ml-team", cls="l4-timeslicing", model=hf())))
    assert out.allowed
    assert 'spec.model.parameterCount is not set: maxParameterCount 9B of class "l4-timeslicing" cannot be checked' \
        in out.warnings


# -- the class itself -------------------------------------------------------------------------------
async def test_class_warnings(example):
    cls = isc("odd", exposurePolicy={"type": "ClusterLocal", "authentication": "None",
                                     "https": {"mode": "OnlyInURI"}},
              acceleratorPolicy={"allowedPlacementTypes": ["WholeDevice"], "allowedSharingModes": ["Dedicated"],
                                 "maxAcceleratorCount": 1, "minSharePercent": 10},
              modelPolicy={"allowedEndpointTypes": ["Chat"], "allowedFormats": ["Safetensors", "ONNX"]})
    out = chain(example).run(review(cls))
    assert out.allowed, out.status
    assert out.warnings == [
        "spec.exposurePolicy.https has no effect with type ClusterLocal (only External is published over HTTPS)",
        "spec.acceleratorPolicy: share bounds have no effect when only Dedicated is allowed (always 100 %)",
        "spec.modelPolicy.allowedFormats: ONNX: not a catalog format (Safetensors, GGUF, Diffusers)",
    ]
    assert chain(example).run(review(isc("plain"))).warnings == []


async def test_class_naming_objects_that_do_not_exist_yet(example):
    cls = isc("refs", acceleratorPolicy={"allowedPlacementTypes": ["WholeDevice"], "allowedSharingModes": ["Shared"],
                                        "maxAcceleratorCount": 1,
                                        "allowedDeviceClasses": ["nvidia-l4-timeslicing", "tpu-v5"]},
              scalingPolicy={"allowedPriorityClassNames": ["inference-low", "urgent"]})
    out = chain(example).run(review(cls))
    assert out.allowed
    assert out.warnings == ['spec.acceleratorPolicy.allowedDeviceClasses: "tpu-v5" not found (yet)',
                            'spec.scalingPolicy.allowedPriorityClassNames: "urgent" not found (yet)']


# -- explain ------------------------------------------------------------------------------------------
async def test_explain_shows_expressions_values_and_verdicts(example):
    obj = order(resources={"accelerator": {"deviceClasses": ["nvidia-h100-physical"]}})
    out = chain(example).run(review(obj), explain=True)
    trace = next(t for t in out.traces if t.policy == "inferenceservice-class" and t.rule == "validations[2]")
    assert trace.verdict == "false"
    assert "variables.orderDeviceClasses" in trace.expression
    assert trace.values["variables.orderDeviceClasses"] == ["nvidia-h100-physical"]
    assert trace.values["variables.classDeviceClasses"] == ["nvidia-a30-mig-2g12-mps", "nvidia-a30-mig-2g12"]
    mutation = next(t for t in out.traces if t.policy == "inferenceservice-defaults" and t.rule == "mutations[1]")
    assert "launchStrategy" in mutation.verdict
