"""FileState: manifests on disk as the cluster view; selectors; Secret sanitising."""

import json
import textwrap

import pytest

from webhook.state import FileState, StateLoadError, parse_selector, from_label_selector, SelectorError


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def state(tmp_path):
    write(tmp_path, "classes.yaml", """\
        apiVersion: ai.deckhouse.io/v1alpha1
        kind: InferenceServiceClass
        metadata:
          name: shared
          labels: {tier: gpu, zone: a}
          annotations: {ai.deckhouse.io/is-default-class: "true"}
        spec: {exposurePolicy: {type: ClusterLocal, authentication: Token}}
        ---
        apiVersion: ai.deckhouse.io/v1alpha1
        kind: InferenceServiceClass
        metadata: {name: dedicated, labels: {tier: gpu, zone: b}}
        spec: {exposurePolicy: {type: External, authentication: None}}
        """)
    write(tmp_path, "nested/ns.json", json.dumps({
        "apiVersion": "v1", "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}},
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}},
        ],
    }))
    write(tmp_path, "secret.yaml", """\
        apiVersion: v1
        kind: Secret
        metadata:
          name: hf
          namespace: team-a
          annotations:
            kubectl.kubernetes.io/last-applied-configuration: '{"data":{"token":"c2VjcmV0"}}'
            owner: ml
        type: Opaque
        data: {token: c2VjcmV0}
        stringData: {extra: plain}
        """)
    write(tmp_path, "kubeai.yaml", """\
        resourceProfiles:
          nvidia-gpu-l4: {requests: {nvidia.com/gpu: "1"}}
        cacheProfiles:
          efs: {sharedFilesystem: {storageClassName: efs}}
        """)
    write(tmp_path, "README.txt", "not a manifest")
    return FileState(tmp_path)


def test_get_and_list(state):
    assert state.ready
    shared = state.get("ai.deckhouse.io/v1alpha1", "InferenceServiceClass", "shared")
    assert shared["spec"]["exposurePolicy"]["type"] == "ClusterLocal"
    assert state.get("ai.deckhouse.io/v1alpha1", "InferenceServiceClass", "missing") is None
    names = [o["metadata"]["name"] for o in state.list("ai.deckhouse.io/v1alpha1", "InferenceServiceClass")]
    assert names == ["dedicated", "shared"]
    # the version does not matter, the group does
    assert state.get("ai.deckhouse.io/v1beta1", "InferenceServiceClass", "shared") is shared
    assert state.get("other.io/v1alpha1", "InferenceServiceClass", "shared") is None


def test_list_by_namespace_and_label_selector(state):
    assert [n["metadata"]["name"] for n in state.list("v1", "Namespace")] == ["team-a", "team-b"]
    assert [n["metadata"]["name"] for n in state.list("v1", "Namespace", label_selector="env=prod")] == ["team-a"]
    assert [n["metadata"]["name"] for n in state.list("v1", "Namespace", label_selector="!env")] == ["team-b"]
    kinds = ("ai.deckhouse.io/v1alpha1", "InferenceServiceClass")
    assert [c["metadata"]["name"] for c in state.list(*kinds, label_selector="tier=gpu,zone in (b,c)")] == ["dedicated"]
    assert [c["metadata"]["name"] for c in state.list(*kinds, label_selector="zone notin (b)")] == ["shared"]
    assert state.list("v1", "Secret", namespace="team-b") == []
    assert len(state.list("v1", "Secret", namespace="team-a")) == 1


def test_secret_keeps_metadata_only(state):
    secret = state.get("v1", "Secret", "hf", "team-a")
    assert "data" not in secret and "stringData" not in secret
    assert secret["dataKeys"] == ["extra", "token"]
    assert secret["metadata"]["annotations"] == {"owner": "ml"}
    assert "c2VjcmV0" not in json.dumps(secret)


def test_bare_kubeai_config_becomes_its_configmap(state):
    cm = state.get("v1", "ConfigMap", "kubeai-config", "kubeai")
    assert "nvidia-gpu-l4" in cm["data"]["system.yaml"]


@pytest.mark.parametrize(
    "text, error",
    [
        ("a: [1, 2\n", "bad.yaml:2: invalid YAML"),
        ("- 1\n- 2\n", "bad.yaml:1: expected a Kubernetes object"),
        ("---\nkind: Namespace\nmetadata: {name: x}\n", "bad.yaml:2: object without apiVersion"),
        ("apiVersion: v1\nkind: Namespace\nmetadata: {}\n", "bad.yaml:1: object without metadata.name"),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path, text, error):
    write(tmp_path, "bad.yaml", text)
    with pytest.raises(StateLoadError) as info:
        FileState(tmp_path)
    assert error in str(info.value)


def test_missing_directory(tmp_path):
    with pytest.raises(StateLoadError, match="not a directory"):
        FileState(tmp_path / "nope")


@pytest.mark.parametrize(
    "selector, labels, expected",
    [
        ("", {}, True),
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a in (x, y),b", {"a": "y", "b": "1"}, True),
        ("a notin (x,y)", {"a": "z"}, True),
        ("a notin (x,y)", {"a": "x"}, False),
    ],
)
def test_string_selectors(selector, labels, expected):
    assert parse_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("bad", ["a in x", "a b", "a in (x"])
def test_bad_string_selectors(bad):
    with pytest.raises(SelectorError):
        parse_selector(bad)


def test_label_selector_objects():
    sel = from_label_selector({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "Exists"}]})
    assert sel.matches({"a": "b", "c": "1"}) and not sel.matches({"a": "b"})
    assert from_label_selector(None).matches({})
    with pytest.raises(SelectorError, match="values: must be specified"):
        from_label_selector({"matchExpressions": [{"key": "c", "operator": "In"}]})
    with pytest.raises(SelectorError, match="not a valid label selector operator"):
        from_label_selector({"matchExpressions": [{"key": "c", "operator": "Gt", "values": ["1"]}]})


def test_hidden_entries_are_skipped(tmp_path):
    hidden = tmp_path / "..2026_11_29"
    hidden.mkdir()
    write(hidden, "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    (tmp_path / "ns.yaml").symlink_to(hidden / "ns.yaml")
    write(tmp_path, ".swp.yaml", "not: [valid\n")
    assert [n["metadata"]["name"] for n in FileState(tmp_path).list("v1", "Namespace")] == ["a"]


def _model(name: str, namespace: str) -> dict:
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name, "namespace": namespace}}


def test_listing_follows_every_write_and_hands_out_its_own_list():
    """Lists are kept per kind and namespace between writes; each write of the kind drops them."""
    from webhook.state.base import ObjectStore

    store = ObjectStore()
    store.replace("kubeai.org", "Model", [_model("b", "x"), _model("a", "x"), _model("c", "y")])
    names = lambda ns: [o["metadata"]["name"] for o in store.list("kubeai.org", "Model", ns)]  # noqa: E731
    assert names("x") == ["a", "b"] and names(None) == ["a", "b", "c"]
    store.list("kubeai.org", "Model", "x").clear()  # the caller's own list
    assert names("x") == ["a", "b"]
    store.put(_model("0", "x"))
    assert names("x") == ["0", "a", "b"] and names("y") == ["c"]
    store.delete(_model("a", "x"))
    assert names("x") == ["0", "b"] and names(None) == ["0", "b", "c"]
    store.replace("kubeai.org", "Model", [_model("z", "y")])
    assert names("x") == [] and names("y") == ["z"]
    store.put({**_model("q", "x"), "kind": "Other"})  # another kind leaves these alone
    assert names("x") == []
