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


def test_speech_to_text_off_faster_whisper_is_a_warning():
    """KubeAI proxies transcriptions to any engine, and vLLM serves them for Whisper models: admitted."""
    out = run(model(url="hf://Systran/faster-whisper-small", engine="FasterWhisper", features=["SpeechToText"]))
    assert out.allowed and not any("SpeechToText" in w for w in out.warnings)
    out = run(model(features=["TextGeneration", "SpeechToText"]))
    assert out.allowed, out.status
    assert 'spec.features: SpeechToText on engine "VLLM" works only with a Whisper model; engine "FasterWhisper" ' \
        "serves it" in out.warnings
    out = run(model(engine="Infinity", features=["SpeechToText"]))
    assert out.allowed, out.status
    assert 'spec.features: engine "Infinity" does not serve SpeechToText: transcriptions fail; use engine ' \
        '"FasterWhisper"' in out.warnings


@pytest.mark.parametrize("profile", ["nvidia-gpu-l4:1", "cpu:4"])
def test_known_resource_profiles(profile):
    assert run(model(resourceProfile=profile)).allowed


@pytest.mark.parametrize("profile", ["nvidia-gpu-l4", "nvidia-gpu-l4:-1", "nvidia-gpu-l4:x", ":1"])
def test_malformed_resource_profile(profile):
    out = run(model(resourceProfile=profile))
    assert messages(out) == [f'spec.resourceProfile: Invalid value: "{profile}": must be <name>:<count> with '
                             f"count >= 1, e.g. amd-gpu-mi300x:1"]


def test_resource_profile_count_zero_is_a_warning():
    """KubeAI accepts count 0 (the profile's requests times 0): admitted, with a warning."""
    out = run(model(resourceProfile="nvidia-gpu-l4:0"))
    assert out.allowed, out.status
    assert 'spec.resourceProfile: count 0 in "nvidia-gpu-l4:0": the Pods request none of the profile\'s ' \
        "resources" in out.warnings
    # the name is still checked against the config
    assert messages(run(model(resourceProfile="nvidia-gpu-a100:0")))[0].startswith(
        'spec.resourceProfile: Invalid value: "nvidia-gpu-a100:0": resource profile "nvidia-gpu-a100" is not in')


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
    "spec, warned",
    [
        ({"autoscalingDisabled": True, "replicas": 2, "minReplicas": 1, "maxReplicas": 3}, False),
        ({"autoscalingDisabled": True, "replicas": 0}, False),
        ({"autoscalingDisabled": False, "replicas": 9, "maxReplicas": 3}, False),  # autoscaler owns replicas
        ({"autoscalingDisabled": True, "replicas": 5, "minReplicas": 1, "maxReplicas": 3}, True),
        ({"autoscalingDisabled": True, "replicas": 1, "minReplicas": 2, "maxReplicas": 3}, True),
    ],
)
def test_replicas_outside_the_bounds_with_autoscaling_disabled_warn(spec, warned):
    """KubeAI runs spec.replicas as given when autoscaling is disabled: the bounds have no effect."""
    out = run(model(**spec))
    assert out.allowed, out.status
    replicas = [w for w in out.warnings if w.startswith("spec.replicas")]
    if warned:
        assert replicas == [f"spec.replicas: {spec['replicas']} is outside [minReplicas, maxReplicas] = "
                            f"[{spec['minReplicas']}, {spec['maxReplicas']}]: with autoscalingDisabled the bounds "
                            "have no effect"]
    else:
        assert replicas == []


def test_unbounded_max_replicas_in_the_message():
    out = run(model(autoscalingDisabled=True, replicas=0, minReplicas=1))
    assert out.allowed
    assert any(w.startswith("spec.replicas: 0 is outside [minReplicas, maxReplicas] = [1, unbounded]:")
               for w in out.warnings)


def test_owner_is_a_warning_not_a_denial():
    out = run(model(owner="team-a"))
    assert out.allowed
    assert "spec.owner is deprecated: KubeAI only shows it as owned_by in /v1/models; remove it" in out.warnings
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
