"""KubeAI Model rules (docs/decisions.md, "KubeAI Model") through the whole chain, against the
example cluster state (whose KubeAI system config has profiles cpu, nvidia-gpu-l4,
nvidia-gpu-h100, amd-gpu-mi300x and cache profiles efs-dynamic, standard-filestore)."""

import pytest

from tests.support.policy import chain, messages, patched, request
from tests.support.state import example, make_state  # noqa: F401 - fixtures
from webhook.state import FileState


def model(**spec):
    base = {"url": "hf://meta-llama/Llama-3.1-8B-Instruct", "engine": "VLLM", "features": ["TextGeneration"]}
    base.update(spec)
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "ml-team"},
            "spec": {k: v for k, v in base.items() if v is not None}}


def run(obj, **kw):
    return chain().run(request(obj, **kw))


def test_min_replicas_defaults_to_zero():
    obj = model(maxReplicas=3)
    out = run(obj)
    assert out.allowed, out.status
    assert out.patch == [{"op": "add", "path": "/spec/minReplicas", "value": 0}]
    assert out.object["spec"]["minReplicas"] == 0 and out.object["spec"]["targetRequests"] == 100
    # the mutating endpoint alone returns the same patch for the object as the apiserver sends it
    result = chain().admit(request(obj), mutating=True)
    assert patched(obj, result.patch)["spec"]["minReplicas"] == 0


def test_explicit_min_replicas_is_kept():
    out = run(model(minReplicas=2, maxReplicas=3))
    assert out.allowed and out.patch == []


@pytest.mark.parametrize("url, engine", [("ollama://gemma2:2b", "OLlama"), ("hf://x/y", "VLLM"), ("pvc://models/x", "VLLM")])
def test_url_and_engine_that_fit(url, engine):
    assert run(model(url=url, engine=engine)).allowed


def test_ollama_url_needs_the_ollama_engine():
    out = run(model(url="ollama://gemma2:2b", engine="VLLM"))
    assert not out.allowed and out.denied_by == "webhook"
    assert messages(out) == ['spec.engine: Unsupported value: "VLLM": url "ollama://gemma2:2b" is an ollama:// URL, '
                             'which only engine "OLlama" serves']
    assert out.status["code"] == 422 and out.status["details"]["causes"][0]["field"] == "spec.engine"


def test_ollama_engine_needs_an_ollama_url():
    out = run(model(url="hf://x/y", engine="OLlama"))
    assert messages(out) == ['spec.url: Invalid value: "hf://x/y": engine "OLlama" serves only ollama:// URLs '
                             "(e.g. ollama://qwen2:0.5b)"]


def test_speech_to_text_only_with_faster_whisper():
    assert run(model(url="hf://Systran/faster-whisper-small", engine="FasterWhisper", features=["SpeechToText"])).allowed
    out = run(model(features=["TextGeneration", "SpeechToText"]))
    assert messages(out) == ['spec.features: Unsupported value: "SpeechToText": engine "VLLM" does not serve it; '
                             'use engine "FasterWhisper" or drop the feature']


@pytest.mark.parametrize("profile", ["nvidia-gpu-l4:1", "cpu:4"])
def test_known_resource_profiles(profile):
    assert run(model(resourceProfile=profile)).allowed


@pytest.mark.parametrize("profile", ["nvidia-gpu-l4", "nvidia-gpu-l4:0", "nvidia-gpu-l4:x", ":1"])
def test_malformed_resource_profile(profile):
    out = run(model(resourceProfile=profile))
    assert messages(out) == [f'spec.resourceProfile: Invalid value: "{profile}": must be <name>:<count> with '
                             f"count >= 1, e.g. amd-gpu-mi300x:1"]


def test_unknown_resource_profile_names_the_known_ones():
    out = run(model(resourceProfile="nvidia-gpu-a100:2"))
    (message,) = messages(out)
    assert message.startswith('spec.resourceProfile: Invalid value: "nvidia-gpu-a100:2": resource profile '
                              '"nvidia-gpu-a100" is not in the KubeAI system config; known profiles: ')
    assert message.endswith("known profiles: amd-gpu-mi300x, cpu, nvidia-gpu-h100, nvidia-gpu-l4")


def test_cache_profile_must_exist():
    assert run(model(cacheProfile="efs-dynamic")).allowed
    out = run(model(cacheProfile="nfs"))
    (message,) = messages(out)
    assert message == ('spec.cacheProfile: Invalid value: "nfs": cache profile not in the KubeAI system config; '
                       "known profiles: efs-dynamic, standard-filestore")


def test_without_a_system_config_only_the_format_is_checked(tmp_path):
    state = FileState(tmp_path)
    assert chain(state).run(request(model(resourceProfile="anything:2", cacheProfile="whatever"))).allowed
    out = chain(state).run(request(model(resourceProfile="anything")))
    assert messages(out) == ['spec.resourceProfile: Invalid value: "anything": must be <name>:<count> with count >= 1, '
                             "e.g. nvidia-gpu-l4:1"]


@pytest.mark.parametrize(
    "spec, allowed",
    [
        ({"autoscalingDisabled": True, "replicas": 2, "minReplicas": 1, "maxReplicas": 3}, True),
        ({"autoscalingDisabled": True, "replicas": 0}, True),
        ({"autoscalingDisabled": False, "replicas": 9, "maxReplicas": 3}, True),  # autoscaler owns replicas
        ({"autoscalingDisabled": True, "replicas": 5, "minReplicas": 1, "maxReplicas": 3}, False),
        ({"autoscalingDisabled": True, "replicas": 1, "minReplicas": 2, "maxReplicas": 3}, False),
    ],
)
def test_replicas_within_bounds_when_autoscaling_is_disabled(spec, allowed):
    out = run(model(**spec))
    assert out.allowed is allowed
    if not allowed:
        assert messages(out) == [f"spec.replicas: Invalid value: {spec['replicas']}: with autoscalingDisabled, replicas "
                                 f"must be within [minReplicas, maxReplicas] = [{spec['minReplicas']}, {spec['maxReplicas']}]"]


def test_unbounded_max_replicas_in_the_message():
    out = run(model(autoscalingDisabled=True, replicas=0, minReplicas=1))
    assert messages(out)[0].endswith("= [1, unbounded]")


def test_owner_is_a_warning_not_a_denial():
    out = run(model(owner="team-a"))
    assert out.allowed
    assert "spec.owner is deprecated and ignored by KubeAI; remove it" in out.warnings
    assert not any("owner" in w for w in run(model()).warnings)


def test_status_writes_are_not_judged_by_spec_rules():
    bad = model(url="ollama://gemma2:2b", engine="VLLM")
    result = chain().admit(request(bad, "UPDATE", old=bad, subresource="status"), mutating=False)
    assert result.allowed
    assert chain().admit(request(bad, "UPDATE", old=bad, subresource="status"), mutating=True).patch == []


def test_delete_is_allowed():
    bad = model(url="ollama://gemma2:2b", engine="VLLM")
    assert chain().admit(request(None, "DELETE", old=bad), mutating=False).allowed
    assert chain().admit(request(None, "DELETE", old=bad), mutating=True).allowed


def test_system_config_from_a_bare_kubeai_file(tmp_path):
    (tmp_path / "system.yaml").write_text("resourceProfiles:\n  gpu-a: {}\ncacheProfiles:\n  fast: {}\n")
    state = FileState(tmp_path)
    assert chain(state).run(request(model(resourceProfile="gpu-a:2", cacheProfile="fast"))).allowed
    out = chain(state).run(request(model(resourceProfile="gpu-b:1")))
    assert messages(out) == ['spec.resourceProfile: Invalid value: "gpu-b:1": resource profile "gpu-b" is not in the '
                             "KubeAI system config; known profiles: gpu-a"]


async def test_system_config_read_through_both_state_backends(example):
    out = chain(example).run(request(model(resourceProfile="nvidia-gpu-a100:2", cacheProfile="efs-dynamic")))
    assert messages(out) == ['spec.resourceProfile: Invalid value: "nvidia-gpu-a100:2": resource profile "nvidia-gpu-a100" '
                             "is not in the KubeAI system config; known profiles: amd-gpu-mi300x, cpu, nvidia-gpu-h100, "
                             "nvidia-gpu-l4"]
