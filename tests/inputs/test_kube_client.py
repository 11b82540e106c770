"""One Kubernetes client builder (``webhook.inputs.kube``) for every command: a real kubeconfig
file with two contexts, the context chosen, the pool and user agent asked for, the pod's service
account tried first only in a pod and only without a kubeconfig named."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.inputs.kube import IN_CLUSTER_VARIABLE, KubeClientConfig, KubeConfigError, api_client


def kubeconfig(path: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n"
        "- {name: one, cluster: {server: 'https://one.example:6443', insecure-skip-tls-verify: true}}\n"
        "- {name: two, cluster: {server: 'https://two.example:6443', insecure-skip-tls-verify: true}}\n"
        "users:\n"
        "- {name: alice, user: {token: token-of-alice}}\n"
        "- {name: bob, user: {token: token-of-bob}}\n"
        "contexts:\n"
        "- {name: first, context: {cluster: one, user: alice}}\n"
        "- {name: second, context: {cluster: two, user: bob}}\n"
        "current-context: first\n"
    )
    return path


def where(client) -> tuple[str, str]:
    configuration = client.configuration
    return configuration.host, configuration.get_api_key_with_prefix("BearerToken") or ""


def test_the_kubeconfig_named_at_its_current_context_or_the_one_named(tmp_path):
    path = kubeconfig(tmp_path / "config")
    assert where(api_client(KubeClientConfig(kubeconfig=path))) == ("https://one.example:6443", "Bearer token-of-alice")
    assert where(api_client(KubeClientConfig(kubeconfig=path, context="second"))) == \
        ("https://two.example:6443", "Bearer token-of-bob")


def test_without_a_kubeconfig_named_kubeconfig_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(IN_CLUSTER_VARIABLE, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "config")))
    assert where(api_client(KubeClientConfig(context="second")))[0] == "https://two.example:6443"


def test_the_pods_service_account_only_in_a_pod_and_without_a_kubeconfig_named(tmp_path, monkeypatch):
    path = kubeconfig(tmp_path / "config")
    monkeypatch.setenv(IN_CLUSTER_VARIABLE, "10.96.0.1")
    assert KubeClientConfig().in_pod()
    assert not KubeClientConfig(kubeconfig=path).in_pod()
    assert not KubeClientConfig(in_cluster=False).in_pod()  # audit --kubeconfig: never the pod's own
    monkeypatch.delenv(IN_CLUSTER_VARIABLE)
    assert not KubeClientConfig().in_pod()


@pytest.mark.skipif(Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists(),
                    reason="runs in a pod with a service account token")
def test_in_a_pod_without_a_token_mounted_the_kubeconfig(tmp_path, monkeypatch):
    monkeypatch.setenv(IN_CLUSTER_VARIABLE, "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "config")))
    assert where(api_client(KubeClientConfig()))[0] == "https://one.example:6443"


def test_pool_size_and_user_agent(tmp_path):
    path = kubeconfig(tmp_path / "config")
    default = api_client(KubeClientConfig(kubeconfig=path))
    chosen = api_client(KubeClientConfig(kubeconfig=path, pool_size=64, user_agent="infergate-webhook"))
    assert chosen.configuration.connection_pool_maxsize == 64
    assert chosen.user_agent == "infergate-webhook"
    assert default.user_agent != "infergate-webhook"
    assert default.configuration.connection_pool_maxsize < 64


@pytest.mark.parametrize(("text", "context"), [
    ("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n", None),  # no context at all
    (None, "third"),  # a context the file does not have
])
def test_a_bad_kubeconfig_is_one_line(tmp_path, text, context):
    path = tmp_path / "config"
    if text is None:
        kubeconfig(path)
    else:
        path.write_text(text)
    with pytest.raises(KubeConfigError) as raised:
        api_client(KubeClientConfig(kubeconfig=path, context=context))
    assert "\n" not in str(raised.value) and str(raised.value)


def test_a_missing_kubeconfig_is_one_line(tmp_path):
    with pytest.raises(KubeConfigError) as raised:
        api_client(KubeClientConfig(kubeconfig=tmp_path / "nowhere"))
    assert "\n" not in str(raised.value)
